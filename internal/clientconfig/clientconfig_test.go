package clientconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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

func TestBuildFromFile(t *testing.T) {
	path := writeKubeconfig(t)
	cfg, err := Build(Settings{KubeconfigPath: path, Context: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.REST.Host != "https://127.0.0.1:6443" || cfg.REST.BearerToken != "s3cr3t-token" {
		t.Fatalf("unexpected config: host %q", cfg.REST.Host)
	}
	if cfg.REST.QPS != DefaultQPS || cfg.REST.Burst != DefaultBurst {
		t.Fatalf("rate limits not defaulted: %v/%v", cfg.REST.QPS, cfg.REST.Burst)
	}
	if !strings.Contains(cfg.Source, path) || !strings.Contains(cfg.Source, `"other"`) {
		t.Fatalf("source %q does not say where the config came from", cfg.Source)
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
		"host without credentials": {Settings{Host: "https://example:6443"}, "No Credentials For Host", []string{"token"}},
		"cert without key":         {Settings{Host: "https://example:6443", ClientCertificate: "x"}, "Incomplete Client Certificate", nil},
		"bad pem": {Settings{Host: "https://example:6443", ClientCertificate: "not pem", ClientKey: "s3cr3t-token"},
			"Invalid Connection Settings", nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Build(tc.settings)
			ue, ok := usererr.As(err)
			if !ok {
				t.Fatalf("want a usererr.Error, got %v", err)
			}
			if ue.Summary != tc.summary {
				t.Fatalf("summary %q, want %q (detail: %s)", ue.Summary, tc.summary, ue.Detail)
			}
			for _, want := range tc.contains {
				if !strings.Contains(ue.Detail, want) {
					t.Errorf("detail %q lacks %q", ue.Detail, want)
				}
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error echoes a credential: %v", err)
			}
		})
	}
}

func TestBuildFromHost(t *testing.T) {
	cfg, err := Build(Settings{Host: "https://example:6443", Token: "t", QPS: 7, Burst: 9})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.REST.BearerToken != "t" || cfg.REST.QPS != 7 || cfg.REST.Burst != 9 || strings.Contains(cfg.Source, "t\"") {
		t.Fatalf("unexpected %+v", cfg)
	}
}
