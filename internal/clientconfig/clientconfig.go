// Package clientconfig turns the provider's connection settings for the management cluster into a
// client-go REST config, with errors that say what was tried and what to do and never echo
// credentials.
//
// Resolution is client-go's clientcmd, configured the way hashicorp/kubernetes configures it: a
// kubeconfig (text, one file or several) is the base and the explicit settings (host, token,
// client certificate, CA, insecure, tls_server_name, proxy_url, exec) override its context, like
// kubectl's flags; without a kubeconfig those settings are the whole connection. Each setting
// falls back to its KUBE_* environment variable. With nothing configured, a pod's ServiceAccount
// is used when the standard in-cluster environment is present; otherwise Build fails with the
// list of ways to configure. There is no implicit ~/.kube/config and KUBECONFIG is not read.
package clientconfig

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gradual-dev/terraform-provider-gradual/internal/settings"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Settings are the provider's connection settings as configured in the provider block. Empty
// strings (and nil pointers) are unset and fall back to the KUBE_* environment variables (see
// EnvVar).
type Settings struct {
	KubeconfigPath       string
	KubeconfigPaths      []string
	Context              string
	ContextAuthInfo      string
	ContextCluster       string
	KubeconfigRaw        string
	Host                 string
	Token                string
	ClientCertificate    string
	ClientKey            string
	ClusterCACertificate string
	Insecure             *bool
	TLSServerName        string
	ProxyURL             string
	Exec                 *Exec
	QPS                  float32
	Burst                int
	UserAgent            string
	// RequestTimeout bounds each request, and the first run of an exec credential plugin.
	RequestTimeout time.Duration
	// Env is where environment variables and the in-cluster ServiceAccount files are read;
	// the zero value is the process environment and the standard mount.
	Env Environment
}

// Exec is an exec credential plugin (client.authentication.k8s.io), as in a kubeconfig's user.exec.
type Exec struct {
	APIVersion string
	Command    string
	Args       []string
	Env        map[string]string
}

// Environment is what Build reads besides Settings.
type Environment struct {
	// Lookup reads an environment variable; nil means os.LookupEnv.
	Lookup func(string) (string, bool)
	// ServiceAccountDir holds the in-cluster `token` and `ca.crt`; empty means
	// DefaultServiceAccountDir.
	ServiceAccountDir string
}

// DefaultServiceAccountDir is where Kubernetes mounts a pod's ServiceAccount token and CA.
const DefaultServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Defaults for client-side rate limiting; client-go's own (5/10) are too low for fleet reads.
const (
	DefaultQPS   = 50
	DefaultBurst = 100
)

// Config is a REST config plus a description of where it came from, safe to show to users.
type Config struct {
	REST   *rest.Config
	Source string
}

// Build resolves the settings into a REST config. An exec credential plugin is run once here,
// bounded by the request timeout, so that a plugin that fails or hangs is reported at plan time
// naming its command.
func Build(ctx context.Context, s Settings) (*Config, error) {
	s, err := withEnv(s)
	if err != nil {
		return nil, err
	}
	timeout := s.RequestTimeout
	if timeout <= 0 {
		timeout = settings.DefaultRequestTimeout
	}
	var (
		cfg    *rest.Config
		source string
	)
	switch {
	case s.KubeconfigRaw != "" || s.KubeconfigPath != "" || len(s.KubeconfigPaths) > 0 || s.Host != "":
		cfg, source, err = fromClientcmd(s)
	case s.hasCredentials():
		return nil, usererr.New("No Management Cluster Host",
			"Credentials for the management cluster are set (token, client certificate, CA or exec) but not where to connect. "+
				"Set host (or KUBE_HOST), or config_path (or KUBE_CONFIG_PATH) for a kubeconfig that the credentials override.")
	default:
		cfg, source, err = inCluster(s)
	}
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = s.QPS, s.Burst
	if cfg.QPS <= 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	if s.UserAgent != "" {
		cfg.UserAgent = s.UserAgent
	}
	// Every request is bounded, so that an API server that accepts connections and never answers
	// fails the request (an infrastructure error, retried) instead of hanging the apply.
	cfg.Timeout = timeout
	if cfg.ExecProvider != nil {
		if err := checkExec(ctx, cfg, timeout); err != nil {
			return nil, err
		}
	}
	return &Config{REST: cfg, Source: source}, nil
}

func (s Settings) hasCredentials() bool {
	return s.Token != "" || s.ClientCertificate != "" || s.ClientKey != "" || s.ClusterCACertificate != "" ||
		s.Exec != nil || s.Context != "" || s.ContextAuthInfo != "" || s.ContextCluster != ""
}

// fromClientcmd loads the kubeconfig (if any) and applies the explicit settings over it.
func fromClientcmd(s Settings) (*rest.Config, string, error) {
	api, source, err := loadKubeconfig(s)
	if err != nil {
		return nil, "", err
	}
	if s.Host != "" && api == nil {
		if err := checkHost(s); err != nil {
			return nil, "", err
		}
		api = clientcmdapi.NewConfig()
		source = "host " + redactURL(s.Host)
	}
	overrides := &clientcmd.ConfigOverrides{
		AuthInfo: clientcmdapi.AuthInfo{
			Token:                 s.Token,
			ClientCertificateData: []byte(s.ClientCertificate),
			ClientKeyData:         []byte(s.ClientKey),
		},
		ClusterInfo: clientcmdapi.Cluster{
			Server:                   s.Host,
			CertificateAuthorityData: []byte(s.ClusterCACertificate),
			TLSServerName:            s.TLSServerName,
			ProxyURL:                 s.ProxyURL,
		},
		Context: clientcmdapi.Context{AuthInfo: s.ContextAuthInfo, Cluster: s.ContextCluster},
	}
	if s.Insecure != nil {
		overrides.ClusterInfo.InsecureSkipTLSVerify = *s.Insecure
	}
	if s.Exec != nil {
		overrides.AuthInfo.Exec = s.Exec.config()
	}
	if s.Host != "" && source != "" && !strings.HasPrefix(source, "host ") {
		source += ", host " + redactURL(s.Host)
	}
	if s.Exec != nil {
		source += fmt.Sprintf(", exec plugin %q", s.Exec.Command)
	}
	contextName := s.Context
	switch {
	case contextName != "":
		if _, ok := api.Contexts[contextName]; !ok {
			return nil, "", usererr.New("Unknown Kubeconfig Context",
				fmt.Sprintf("The %s has no context %q. Its contexts are: %s.", source, contextName, contextNames(api)))
		}
	case api.CurrentContext != "":
		contextName = api.CurrentContext
	case s.Host == "" && s.ContextCluster == "":
		return nil, "", usererr.New("No Kubeconfig Context",
			fmt.Sprintf("The %s has no current-context. Set config_context (or KUBE_CTX) to one of: %s.", source, contextNames(api)))
	}
	if contextName != "" {
		source = fmt.Sprintf("%s (context %q)", source, contextName)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*api, contextName, overrides, nil).ClientConfig()
	if err != nil {
		return nil, "", usererr.New("Invalid Connection Settings",
			fmt.Sprintf("The connection to the management cluster from %s is not usable: %s. Check the kubeconfig context, host (https://HOST:PORT), cluster_ca_certificate and the client certificate (PEM).", source, scrub(err)))
	}
	if _, err := rest.TLSConfigFor(cfg); err != nil {
		return nil, "", usererr.New("Invalid Connection Settings",
			fmt.Sprintf("The TLS settings from %s are not usable (%s). Check cluster_ca_certificate, insecure and the client certificate and key (PEM).", source, scrub(err)))
	}
	return cfg, source, nil
}

func checkHost(s Settings) error {
	if (s.ClientCertificate == "") != (s.ClientKey == "") {
		return usererr.New("Incomplete Client Certificate",
			"client_certificate and client_key must be set together to authenticate to "+redactURL(s.Host)+" with a client certificate.")
	}
	if s.Token == "" && s.ClientCertificate == "" && s.Exec == nil {
		return usererr.New("No Credentials For Host",
			"host is set to "+redactURL(s.Host)+" but none of token, client_certificate/client_key or an exec block is. "+
				"Set one of them (or KUBE_TOKEN, KUBE_CLIENT_CERT_DATA/KUBE_CLIENT_KEY_DATA), or use config_path / kubeconfig_raw instead of host.")
	}
	if u, err := url.Parse(s.Host); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return usererr.New("Invalid Host", "host must be the management cluster's API server URL, https://HOST:PORT.")
	}
	return nil
}

// loadKubeconfig returns the kubeconfig named by the settings, or nil when none is.
func loadKubeconfig(s Settings) (*clientcmdapi.Config, string, error) {
	if s.KubeconfigRaw != "" {
		api, err := clientcmd.Load([]byte(s.KubeconfigRaw))
		if err != nil {
			// The parse error may quote the content, so it is not passed on.
			return nil, "", usererr.New("Invalid Kubeconfig",
				"kubeconfig_raw could not be parsed as a kubeconfig (YAML with clusters, users and contexts). Check the value you pass, e.g. that it is not base64-encoded.")
		}
		return api, "kubeconfig_raw", nil
	}
	paths := s.KubeconfigPaths
	attr := "config_paths"
	if s.KubeconfigPath != "" {
		paths, attr = []string{s.KubeconfigPath}, "config_path"
	}
	if len(paths) == 0 {
		return nil, "", nil
	}
	expanded := make([]string, 0, len(paths))
	for _, p := range paths {
		path, err := expandHome(p, attr)
		if err != nil {
			return nil, "", err
		}
		if _, err := os.Stat(path); err != nil {
			detail := fmt.Sprintf("%s names %q but ", attr, p)
			if os.IsNotExist(err) {
				detail += "no file exists there."
			} else {
				detail += "it cannot be read (" + scrub(err) + ")."
			}
			return nil, "", usererr.New("Kubeconfig Not Readable",
				detail+" Point config_path (or KUBE_CONFIG_PATH) at the management cluster's kubeconfig, or set kubeconfig_raw, or host with credentials.")
		}
		expanded = append(expanded, path)
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: expanded}
	if len(expanded) == 1 {
		rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: expanded[0]}
	}
	api, err := rules.Load()
	source := "kubeconfig " + strings.Join(expanded, string(os.PathListSeparator))
	if err != nil {
		return nil, "", usererr.New("Kubeconfig Not Readable",
			fmt.Sprintf("Could not load the %s: %s.", source, scrub(err)))
	}
	return api, source, nil
}

func (e *Exec) config() *clientcmdapi.ExecConfig {
	c := &clientcmdapi.ExecConfig{
		APIVersion:      e.APIVersion,
		Command:         e.Command,
		Args:            append([]string(nil), e.Args...),
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}
	names := make([]string, 0, len(e.Env))
	for name := range e.Env {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c.Env = append(c.Env, clientcmdapi.ExecEnvVar{Name: name, Value: e.Env[name]})
	}
	return c
}

func contextNames(api *clientcmdapi.Config) string {
	if len(api.Contexts) == 0 {
		return "(none)"
	}
	names := make([]string, 0, len(api.Contexts))
	for name := range api.Contexts {
		names = append(names, fmt.Sprintf("%q", name))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func expandHome(path, attr string) (string, error) {
	if path != "~" && !strings.HasPrefix(path, "~/") {
		return path, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", usererr.New("Kubeconfig Not Readable", attr+" starts with ~ but the home directory is unknown: "+err.Error())
	}
	return filepath.Join(home, strings.TrimPrefix(path, "~")), nil
}

// redactURL drops user information from a URL (https://user:pass@host), for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if err != nil && strings.Contains(raw, "@") {
			return "(a URL that cannot be parsed)"
		}
		return raw
	}
	u.User = nil
	return u.String()
}

// scrub keeps an error message to its first line and cuts it short; client-go errors can quote
// file content, which may include credentials.
func scrub(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return msg
}
