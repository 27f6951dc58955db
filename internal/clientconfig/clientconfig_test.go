package clientconfig

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/settings"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

const kubeconfig = `apiVersion: v1
kind: Config
current-context: mgmt
clusters:
- name: mgmt
  cluster: {server: "https://127.0.0.1:6443"}
contexts:
- name: mgmt
  context: {cluster: mgmt, user: admin}
- name: other
  context: {cluster: mgmt, user: admin}
users:
- name: admin
  user: {token: s3cr3t-token}
`

func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// env is a fake process environment; tests never read the real one.
func env(vars map[string]string) Environment {
	return Environment{
		Lookup: func(name string) (string, bool) {
			v, ok := vars[name]
			return v, ok
		},
		ServiceAccountDir: "/nonexistent/serviceaccount",
	}
}

func build(t *testing.T, s Settings) (*Config, error) {
	t.Helper()
	if s.Env.Lookup == nil {
		s.Env = env(nil)
	}
	return Build(context.Background(), s)
}

func mustBuild(t *testing.T, s Settings) *Config {
	t.Helper()
	cfg, err := build(t, s)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// userError asserts err is a usererr.Error with the summary, a detail containing every want,
// and no secret.
func userError(t *testing.T, err error, summary string, want ...string) {
	t.Helper()
	ue, ok := usererr.As(err)
	if !ok {
		t.Fatalf("want a usererr.Error %q, got %v", summary, err)
	}
	if ue.Summary != summary {
		t.Fatalf("summary %q, want %q (detail: %s)", ue.Summary, summary, ue.Detail)
	}
	for _, w := range want {
		if !strings.Contains(ue.Detail, w) {
			t.Errorf("detail %q lacks %q", ue.Detail, w)
		}
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error echoes a credential: %v", err)
	}
}

func TestBuildFromFile(t *testing.T) {
	path := writeKubeconfig(t)
	cfg := mustBuild(t, Settings{KubeconfigPath: path, Context: "other"})
	if cfg.REST.Host != "https://127.0.0.1:6443" || cfg.REST.BearerToken != "s3cr3t-token" {
		t.Fatalf("unexpected config: host %q", cfg.REST.Host)
	}
	if cfg.REST.QPS != DefaultQPS || cfg.REST.Burst != DefaultBurst || cfg.REST.Timeout != settings.DefaultRequestTimeout {
		t.Fatalf("defaults not applied: %v/%v/%v", cfg.REST.QPS, cfg.REST.Burst, cfg.REST.Timeout)
	}
	if !strings.Contains(cfg.Source, path) || !strings.Contains(cfg.Source, `"other"`) {
		t.Fatalf("source %q does not say where the config came from", cfg.Source)
	}
	// config_paths merges files; the first file's current-context wins.
	extra := filepath.Join(t.TempDir(), "extra")
	if err := os.WriteFile(extra, []byte(strings.ReplaceAll(kubeconfig, "name: other", "name: extra")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg = mustBuild(t, Settings{KubeconfigPaths: []string{path, extra}, RequestTimeout: 5e9})
	if cfg.REST.BearerToken != "s3cr3t-token" || !strings.Contains(cfg.Source, `"mgmt"`) || cfg.REST.Timeout != 5e9 {
		t.Fatalf("config_paths: %+v", cfg)
	}
	cfg = mustBuild(t, Settings{KubeconfigPaths: []string{path, extra}, Context: "extra"})
	if !strings.Contains(cfg.Source, `"extra"`) {
		t.Fatalf("config_paths: %+v", cfg)
	}
}

func TestBuildErrors(t *testing.T) {
	path := writeKubeconfig(t)
	cases := map[string]struct {
		settings Settings
		summary  string
		contains []string
	}{
		"missing file": {Settings{KubeconfigPath: "/nonexistent/kubeconfig"}, "Kubeconfig Not Readable",
			[]string{`"/nonexistent/kubeconfig"`, "no file exists"}},
		"unknown context": {Settings{KubeconfigPath: path, Context: "prod"}, "Unknown Kubeconfig Context",
			[]string{`"prod"`, `"mgmt", "other"`}},
		"raw not yaml": {Settings{KubeconfigRaw: "s3cr3t-token: [oops"}, "Invalid Kubeconfig", []string{"kubeconfig_raw"}},
		"raw unknown context": {Settings{KubeconfigRaw: kubeconfig, Context: "nope"}, "Unknown Kubeconfig Context",
			[]string{"kubeconfig_raw", `"nope"`}},
		"host without credentials": {Settings{Host: "https://example:6443"}, "No Credentials For Host", []string{"token", "exec"}},
		"host with password":       {Settings{Host: "https://admin:s3cr3t@example:6443"}, "No Credentials For Host", []string{"https://example:6443"}},
		"host not a url":           {Settings{Host: "example:6443", Token: "s3cr3t"}, "Invalid Host", nil},
		"cert without key":         {Settings{Host: "https://example:6443", ClientCertificate: "x"}, "Incomplete Client Certificate", nil},
		"bad pem": {Settings{Host: "https://example:6443", ClientCertificate: "not pem", ClientKey: "s3cr3t-token"},
			"Invalid Connection Settings", nil},
		"token without host": {Settings{Token: "s3cr3t"}, "No Management Cluster Host", []string{"KUBE_HOST"}},
		"proxy with password": {Settings{Host: "https://example:6443", Token: "t", ProxyURL: "ftp://u:s3cr3t@proxy"},
			"Invalid Proxy URL", []string{"http, https or socks5"}},
		"exec bad version": {Settings{Host: "https://example:6443", Exec: &Exec{APIVersion: "v1", Command: "x"}},
			"Invalid Exec Block", []string{"client.authentication.k8s.io/v1"}},
		"bad KUBE_INSECURE": {Settings{Host: "https://example:6443", Token: "t", Env: env(map[string]string{"KUBE_INSECURE": "sure"})},
			"Invalid Environment Variable", []string{"KUBE_INSECURE"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := build(t, tc.settings)
			userError(t, err, tc.summary, tc.contains...)
		})
	}
}

func TestBuildFromHost(t *testing.T) {
	cfg := mustBuild(t, Settings{Host: "https://example:6443", Token: "t", QPS: 7, Burst: 9,
		TLSServerName: "api.internal", ProxyURL: "http://proxy.example:3128"})
	if cfg.REST.BearerToken != "t" || cfg.REST.QPS != 7 || cfg.REST.Burst != 9 || cfg.Source != "host https://example:6443" {
		t.Fatalf("unexpected %+v", cfg)
	}
	if cfg.REST.ServerName != "api.internal" || cfg.REST.Proxy == nil {
		t.Fatalf("tls_server_name / proxy_url not applied: %+v", cfg.REST.TLSClientConfig)
	}
}

// No configuration is an error listing the ways to configure, even with a ~/.kube/config and
// KUBECONFIG present: there is no implicit fallback.
func TestBuildNothingConfigured(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".kube", "config"), []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	_, err := build(t, Settings{Env: env(map[string]string{"KUBECONFIG": filepath.Join(home, ".kube", "config")})})
	userError(t, err, "No Management Cluster Configured", "config_path", "KUBE_CONFIG_PATH", "KUBE_CTX", "kubeconfig_raw",
		"KUBE_HOST", "KUBE_TOKEN", "exec {}", "KUBERNETES_SERVICE_HOST", "does not fall back to ~/.kube/config", "KUBECONFIG is set but is not read")
	_, err = build(t, Settings{})
	if ue, _ := usererr.As(err); ue == nil || strings.Contains(ue.Detail, "KUBECONFIG is set") {
		t.Fatalf("without KUBECONFIG: %v", err)
	}
}
