// Package clientconfig turns the provider's connection settings for the management cluster into a
// client-go REST config, with errors that say what was tried and what to do and never echo
// credentials.
package clientconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Settings are the provider's connection settings. At most one source is used: KubeconfigRaw,
// then Host (with Token or a client certificate), then KubeconfigPath (or the KUBECONFIG
// environment variable, then ~/.kube/config).
type Settings struct {
	KubeconfigPath       string
	Context              string
	KubeconfigRaw        string
	Host                 string
	Token                string
	ClientCertificate    string
	ClientKey            string
	ClusterCACertificate string
	Insecure             bool
	QPS                  float32
	Burst                int
	UserAgent            string
	RequestTimeout       time.Duration
}

// Defaults for client-side rate limiting; client-go's own (5/10) are too low for fleet reads.
const (
	DefaultQPS   = 50
	DefaultBurst = 100
	// DefaultRequestTimeout bounds one request to the management cluster.
	DefaultRequestTimeout = 30 * time.Second
)

// Config is a REST config plus a description of where it came from, safe to show to users.
type Config struct {
	REST   *rest.Config
	Source string
}

// Build resolves the settings into a REST config.
func Build(s Settings) (*Config, error) {
	var (
		cfg    *rest.Config
		source string
		err    error
	)
	switch {
	case s.KubeconfigRaw != "":
		cfg, source, err = fromRaw(s)
	case s.Host != "":
		cfg, source, err = fromHost(s)
	default:
		cfg, source, err = fromFile(s)
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
	cfg.Timeout = s.RequestTimeout
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultRequestTimeout
	}
	return &Config{REST: cfg, Source: source}, nil
}

func fromRaw(s Settings) (*rest.Config, string, error) {
	api, err := clientcmd.Load([]byte(s.KubeconfigRaw))
	if err != nil {
		// The parse error may quote the content, so it is not passed on.
		return nil, "", usererr.New("Invalid Kubeconfig",
			"kubeconfig_raw could not be parsed as a kubeconfig (YAML with clusters, users and contexts). Check the value you pass, e.g. that it is not base64-encoded.")
	}
	return fromAPIConfig(api, s.Context, "kubeconfig_raw")
}

func fromHost(s Settings) (*rest.Config, string, error) {
	cfg := &rest.Config{
		Host:        s.Host,
		BearerToken: s.Token,
		TLSClientConfig: rest.TLSClientConfig{
			Insecure: s.Insecure,
			CAData:   []byte(s.ClusterCACertificate),
			CertData: []byte(s.ClientCertificate),
			KeyData:  []byte(s.ClientKey),
		},
	}
	source := "host " + s.Host
	if (s.ClientCertificate == "") != (s.ClientKey == "") {
		return nil, "", usererr.New("Incomplete Client Certificate",
			"client_certificate and client_key must be set together to authenticate to "+s.Host+" with a client certificate.")
	}
	if s.Token == "" && s.ClientCertificate == "" {
		return nil, "", usererr.New("No Credentials For Host",
			"host is set to "+s.Host+" but neither token nor client_certificate/client_key is. Set one of them, or use kubeconfig_path / kubeconfig_raw instead of host.")
	}
	if _, err := rest.TLSConfigFor(cfg); err != nil {
		return nil, "", usererr.New("Invalid Connection Settings",
			fmt.Sprintf("The settings for %s are not usable (%s). Check host (https://HOST:PORT), cluster_ca_certificate and the client certificate (PEM).", s.Host, scrub(err)))
	}
	return cfg, source, nil
}

func fromFile(s Settings) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	tried := "the KUBECONFIG environment variable, then ~/.kube/config"
	if s.KubeconfigPath != "" {
		path, err := expandHome(s.KubeconfigPath)
		if err != nil {
			return nil, "", err
		}
		if _, err := os.Stat(path); err != nil {
			detail := fmt.Sprintf("kubeconfig_path is %q but ", s.KubeconfigPath)
			if errors.Is(err, fs.ErrNotExist) {
				detail += "no file exists there."
			} else {
				detail += "it cannot be read (" + err.Error() + ")."
			}
			return nil, "", usererr.New("Kubeconfig Not Readable",
				detail+" Point kubeconfig_path at the management cluster's kubeconfig, or set kubeconfig_raw, or host with token or client certificate.")
		}
		rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
		tried = path
	}
	api, err := rules.Load()
	if err != nil {
		return nil, "", usererr.New("Kubeconfig Not Readable",
			fmt.Sprintf("Could not load a kubeconfig from %s: %s. Set kubeconfig_path, kubeconfig_raw, or host with credentials.", tried, scrub(err)))
	}
	if len(api.Contexts) == 0 && s.KubeconfigPath == "" {
		return nil, "", usererr.New("No Kubeconfig Found",
			"No kubeconfig was set and none was found in "+tried+". Set kubeconfig_path (or kubeconfig_raw, or host with credentials) to reach the management cluster where the Cluster API Cluster objects live.")
	}
	return fromAPIConfig(api, s.Context, "kubeconfig "+tried)
}

func fromAPIConfig(api *clientcmdapi.Config, context, source string) (*rest.Config, string, error) {
	if context == "" {
		context = api.CurrentContext
		if context == "" {
			return nil, "", usererr.New("No Kubeconfig Context",
				fmt.Sprintf("The %s has no current-context. Set context to one of: %s.", source, contextNames(api)))
		}
	} else if _, ok := api.Contexts[context]; !ok {
		return nil, "", usererr.New("Unknown Kubeconfig Context",
			fmt.Sprintf("The %s has no context %q. Its contexts are: %s.", source, context, contextNames(api)))
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*api, context, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, "", usererr.New("Invalid Kubeconfig",
			fmt.Sprintf("Context %q of the %s is not usable: %s.", context, source, scrub(err)))
	}
	return cfg, fmt.Sprintf("%s (context %q)", source, context), nil
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

func expandHome(path string) (string, error) {
	if path != "~" && !strings.HasPrefix(path, "~/") {
		return path, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", usererr.New("Kubeconfig Not Readable", "kubeconfig_path starts with ~ but the home directory is unknown: "+err.Error())
	}
	return filepath.Join(home, strings.TrimPrefix(path, "~")), nil
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
