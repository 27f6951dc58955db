package clientconfig

import (
	"net"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"

	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// inCluster is the connection of a pod to its own cluster through its ServiceAccount, the way
// rest.InClusterConfig builds it, with the token and CA read from s.Env's directory. It is the
// last resort, used only when nothing else is configured; without the in-cluster environment,
// the error lists every way to configure the provider.
func inCluster(s Settings) (*rest.Config, string, error) {
	host, port := s.Env.lookup("KUBERNETES_SERVICE_HOST"), s.Env.lookup("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, "", noConnection(s.Env)
	}
	tokenFile, caFile := s.Env.serviceAccountFile("token"), s.Env.serviceAccountFile("ca.crt")
	token, err := os.ReadFile(tokenFile)
	if err != nil || strings.TrimSpace(string(token)) == "" {
		return nil, "", usererr.New("In-Cluster Credentials Not Readable",
			"Nothing is configured for the management cluster and KUBERNETES_SERVICE_HOST is set (running in a pod), "+
				"but the ServiceAccount token "+tokenFile+" cannot be read or is empty. Mount the ServiceAccount token "+
				"(automountServiceAccountToken), or configure config_path, kubeconfig_raw or host with credentials.")
	}
	if _, err := certutil.NewPool(caFile); err != nil {
		return nil, "", usererr.New("In-Cluster Credentials Not Readable",
			"Nothing is configured for the management cluster and KUBERNETES_SERVICE_HOST is set (running in a pod), "+
				"but the ServiceAccount CA "+caFile+" cannot be read as PEM certificates. Mount the ServiceAccount volume, "+
				"or configure config_path, kubeconfig_raw or host with credentials.")
	}
	cfg := &rest.Config{
		Host: "https://" + net.JoinHostPort(host, port),
		// The token is re-read from the file periodically: projected tokens rotate.
		BearerToken:     strings.TrimSpace(string(token)),
		BearerTokenFile: tokenFile,
		TLSClientConfig: rest.TLSClientConfig{CAFile: caFile, ServerName: s.TLSServerName},
	}
	if s.Insecure != nil && *s.Insecure {
		cfg.TLSClientConfig = rest.TLSClientConfig{Insecure: true, ServerName: s.TLSServerName}
	}
	if s.ProxyURL != "" {
		proxy, err := parseProxy(s.ProxyURL)
		if err != nil {
			return nil, "", err
		}
		cfg.Proxy = proxy
	}
	return cfg, "in-cluster ServiceAccount (" + cfg.Host + ")", nil
}

func noConnection(env Environment) error {
	detail := "The provider is not configured to reach the management cluster (where the Cluster API Cluster objects live), " +
		"and it does not fall back to ~/.kube/config. Configure one of:\n" +
		"- config_path (or KUBE_CONFIG_PATH), with config_context (or KUBE_CTX) for a context other than the current one; " +
		"config_paths (or KUBE_CONFIG_PATHS) for several files;\n" +
		"- kubeconfig_raw, the kubeconfig as text;\n" +
		"- host (or KUBE_HOST) with token (KUBE_TOKEN), client_certificate and client_key (KUBE_CLIENT_CERT_DATA, KUBE_CLIENT_KEY_DATA), " +
		"or an exec {} block, and cluster_ca_certificate (KUBE_CLUSTER_CA_CERT_DATA);\n" +
		"- or run in a pod: its ServiceAccount is used when KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are set."
	if env.lookup("KUBECONFIG") != "" {
		detail += "\nKUBECONFIG is set but is not read by this provider: set config_path = \"...\" or KUBE_CONFIG_PATH to use that file."
	}
	return usererr.New("No Management Cluster Configured", detail)
}
