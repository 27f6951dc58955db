package clientconfig

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// EnvVar is the environment variable an attribute falls back to, the names hashicorp/kubernetes
// and hashicorp/helm read, or "" when it has none. An attribute set in the provider block wins
// over its variable.
func EnvVar(attr string) string {
	switch attr {
	case "config_path":
		return "KUBE_CONFIG_PATH"
	case "config_paths":
		return "KUBE_CONFIG_PATHS"
	case "config_context":
		return "KUBE_CTX"
	case "config_context_auth_info":
		return "KUBE_CTX_AUTH_INFO"
	case "config_context_cluster":
		return "KUBE_CTX_CLUSTER"
	case "host":
		return "KUBE_HOST"
	case "token":
		return "KUBE_TOKEN"
	case "client_certificate":
		return "KUBE_CLIENT_CERT_DATA"
	case "client_key":
		return "KUBE_CLIENT_KEY_DATA"
	case "cluster_ca_certificate":
		return "KUBE_CLUSTER_CA_CERT_DATA"
	case "insecure":
		return "KUBE_INSECURE"
	case "tls_server_name":
		return "KUBE_TLS_SERVER_NAME"
	case "proxy_url":
		return "KUBE_PROXY_URL"
	}
	return ""
}

func (e Environment) lookup(name string) string {
	lookup := e.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, _ := lookup(name)
	return v
}

func (e Environment) serviceAccountFile(name string) string {
	dir := e.ServiceAccountDir
	if dir == "" {
		dir = DefaultServiceAccountDir
	}
	return filepath.Join(dir, name)
}

// withEnv fills the unset settings from their KUBE_* variables and checks the values that would
// otherwise fail deep inside client-go with a message quoting them.
func withEnv(s Settings) (Settings, error) {
	env := s.Env
	fill := func(v *string, attr string) {
		if *v == "" {
			*v = env.lookup(EnvVar(attr))
		}
	}
	// A kubeconfig from the environment only when the block sets neither a kubeconfig (config_path,
	// config_paths and kubeconfig_raw exclude each other) nor a host: a KUBE_CONFIG_PATH left in
	// a shell must not lend its user's credentials to a host the configuration names.
	if s.KubeconfigPath == "" && len(s.KubeconfigPaths) == 0 && s.KubeconfigRaw == "" && s.Host == "" {
		fill(&s.KubeconfigPath, "config_path")
		if s.KubeconfigPath == "" {
			if v := env.lookup(EnvVar("config_paths")); v != "" {
				for _, p := range filepath.SplitList(v) {
					if p != "" {
						s.KubeconfigPaths = append(s.KubeconfigPaths, p)
					}
				}
			}
		}
	}
	fill(&s.Context, "config_context")
	fill(&s.ContextAuthInfo, "config_context_auth_info")
	fill(&s.ContextCluster, "config_context_cluster")
	fill(&s.Host, "host")
	fill(&s.Token, "token")
	fill(&s.ClientCertificate, "client_certificate")
	fill(&s.ClientKey, "client_key")
	fill(&s.ClusterCACertificate, "cluster_ca_certificate")
	fill(&s.TLSServerName, "tls_server_name")
	fill(&s.ProxyURL, "proxy_url")
	if s.Insecure == nil {
		if v := env.lookup(EnvVar("insecure")); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return s, usererr.New("Invalid Environment Variable", "KUBE_INSECURE must be true or false.")
			}
			s.Insecure = &b
		}
	}
	if s.ProxyURL != "" {
		if _, err := parseProxy(s.ProxyURL); err != nil {
			return s, err
		}
	}
	if s.Exec != nil {
		if strings.TrimSpace(s.Exec.Command) == "" {
			return s, usererr.New("Invalid Exec Block", "exec.command must name the credential plugin to run.")
		}
		switch s.Exec.APIVersion {
		case "client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1":
		default:
			return s, usererr.New("Invalid Exec Block",
				"exec.api_version must be client.authentication.k8s.io/v1 or client.authentication.k8s.io/v1beta1, the version the plugin speaks.")
		}
	}
	return s, nil
}

// parseProxy checks a proxy URL. It may carry credentials (http://user:pass@proxy), so errors
// never quote it.
func parseProxy(raw string) (func(*http.Request) (*url.URL, error), error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5") {
		return nil, usererr.New("Invalid Proxy URL",
			"proxy_url (or KUBE_PROXY_URL) must be a URL with scheme http, https or socks5 and a host, e.g. http://proxy.example:3128.")
	}
	return http.ProxyURL(u), nil
}
