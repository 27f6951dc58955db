package clientconfig

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// apiServer is a TLS server that answers 200 to requests bearing token and 401 to others; it
// returns its URL and CA (PEM).
func apiServer(t *testing.T, token string) (string, string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"major":"1","minor":"34"}`))
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv.URL, string(ca)
}

// get makes one request with cfg and returns the status code.
func get(t *testing.T, cfg *rest.Config) int {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(cfg.Host + "/version")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestBuildFromEnv(t *testing.T) {
	url, ca := apiServer(t, "s3cr3t-env")
	cfg := mustBuild(t, Settings{Env: env(map[string]string{
		"KUBE_HOST": url, "KUBE_TOKEN": "s3cr3t-env", "KUBE_CLUSTER_CA_CERT_DATA": ca,
		"KUBE_TLS_SERVER_NAME": "example.com", "KUBE_PROXY_URL": "http://127.0.0.1:1",
	})})
	if cfg.REST.ServerName != "example.com" || cfg.REST.Proxy == nil || cfg.Source != "host "+url {
		t.Fatalf("environment not applied: %+v", cfg.REST)
	}
	cfg.REST.Proxy = nil // nothing listens there; the proxy setting was checked above
	if code := get(t, cfg.REST); code != http.StatusOK {
		t.Fatalf("request with KUBE_* settings: %d", code)
	}

	path := writeKubeconfig(t)
	cfg = mustBuild(t, Settings{Env: env(map[string]string{"KUBE_CONFIG_PATH": path, "KUBE_CTX": "other"})})
	if !strings.Contains(cfg.Source, path) || !strings.Contains(cfg.Source, `"other"`) {
		t.Fatalf("KUBE_CONFIG_PATH / KUBE_CTX: %q", cfg.Source)
	}
	cfg = mustBuild(t, Settings{Env: env(map[string]string{"KUBE_CONFIG_PATHS": path + string(os.PathListSeparator) + path})})
	if !strings.Contains(cfg.Source, path) {
		t.Fatalf("KUBE_CONFIG_PATHS: %q", cfg.Source)
	}
	// A missing file is refused rather than skipped: a typo must not pick another cluster.
	_, err := build(t, Settings{Env: env(map[string]string{"KUBE_CONFIG_PATHS": "/nonexistent" + string(os.PathListSeparator) + path})})
	userError(t, err, "Kubeconfig Not Readable", `"/nonexistent"`)
}

func TestBuildPrecedence(t *testing.T) {
	path := writeKubeconfig(t)
	no := false
	cases := map[string]struct {
		settings Settings
		env      map[string]string
		check    func(*Config) bool
	}{
		"attribute beats its variable": {
			Settings{Host: "https://attr:6443", Token: "attr"}, map[string]string{"KUBE_HOST": "https://env:6443", "KUBE_TOKEN": "env"},
			func(c *Config) bool { return c.REST.Host == "https://attr:6443" && c.REST.BearerToken == "attr" }},
		"insecure = false beats KUBE_INSECURE": {
			Settings{Host: "https://attr:6443", Token: "t", Insecure: &no}, map[string]string{"KUBE_INSECURE": "true"},
			func(c *Config) bool { return !c.REST.Insecure }},
		"KUBE_INSECURE when unset": {
			Settings{Host: "https://attr:6443", Token: "t"}, map[string]string{"KUBE_INSECURE": "true"},
			func(c *Config) bool { return c.REST.Insecure }},
		"kubeconfig_raw beats KUBE_CONFIG_PATH": {
			Settings{KubeconfigRaw: strings.ReplaceAll(kubeconfig, "6443", "7443")}, map[string]string{"KUBE_CONFIG_PATH": path},
			func(c *Config) bool {
				return c.REST.Host == "https://127.0.0.1:7443" && strings.HasPrefix(c.Source, "kubeconfig_raw")
			}},
		"config_path beats KUBE_CONFIG_PATHS": {
			Settings{KubeconfigPath: path}, map[string]string{"KUBE_CONFIG_PATHS": "/nonexistent"},
			func(c *Config) bool { return strings.Contains(c.Source, path) }},
		"host and token override the kubeconfig context": {
			Settings{KubeconfigPath: path, Host: "https://override:6443", Token: "override"}, nil,
			func(c *Config) bool {
				return c.REST.Host == "https://override:6443" && c.REST.BearerToken == "override" && strings.Contains(c.Source, "host https://override:6443")
			}},
		"host in the block ignores KUBE_CONFIG_PATH": {
			Settings{Host: "https://attr:6443", Token: "attr"}, map[string]string{"KUBE_CONFIG_PATH": path},
			func(c *Config) bool { return c.Source == "host https://attr:6443" && c.REST.BearerToken == "attr" }},
		"KUBE_HOST overrides KUBE_CONFIG_PATH": {
			Settings{}, map[string]string{"KUBE_CONFIG_PATH": path, "KUBE_HOST": "https://env:6443"},
			func(c *Config) bool { return c.REST.Host == "https://env:6443" && c.REST.BearerToken == "s3cr3t-token" }},
		"a variable overrides a kubeconfig from the block": {
			Settings{KubeconfigPath: path}, map[string]string{"KUBE_TOKEN": "from-env"},
			func(c *Config) bool { return c.REST.BearerToken == "from-env" }},
		"host beats in-cluster": {
			Settings{Host: "https://attr:6443", Token: "t"}, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
			func(c *Config) bool { return c.REST.Host == "https://attr:6443" }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.settings.Env = env(tc.env)
			cfg := mustBuild(t, tc.settings)
			if !tc.check(cfg) {
				t.Fatalf("unexpected: host %q insecure %v source %q", cfg.REST.Host, cfg.REST.Insecure, cfg.Source)
			}
		})
	}
}

func TestBuildInCluster(t *testing.T) {
	srvURL, ca := apiServer(t, "s3cr3t-sa")
	u, err := url.Parse(srvURL)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, content := range map[string]string{"token": "s3cr3t-sa\n", "ca.crt": ca} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e := env(map[string]string{"KUBERNETES_SERVICE_HOST": u.Hostname(), "KUBERNETES_SERVICE_PORT": u.Port()})
	e.ServiceAccountDir = dir
	cfg := mustBuild(t, Settings{Env: e})
	if cfg.REST.Host != srvURL || cfg.REST.BearerTokenFile != filepath.Join(dir, "token") || !strings.HasPrefix(cfg.Source, "in-cluster ServiceAccount") {
		t.Fatalf("unexpected %+v (source %q)", cfg.REST, cfg.Source)
	}
	if code := get(t, cfg.REST); code != http.StatusOK {
		t.Fatalf("request with the ServiceAccount: %d", code)
	}

	if err := os.Remove(filepath.Join(dir, "token")); err != nil {
		t.Fatal(err)
	}
	_, err = build(t, Settings{Env: e})
	userError(t, err, "In-Cluster Credentials Not Readable", filepath.Join(dir, "token"), "automountServiceAccountToken")

	e = env(map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) // no port: not in a pod
	_, err = build(t, Settings{Env: e})
	userError(t, err, "No Management Cluster Configured")
}

// plugin writes an exec credential plugin script and returns its path.
func plugin(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cred-plugin")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

const v1 = "client.authentication.k8s.io/v1"

func TestBuildExec(t *testing.T) {
	srvURL, ca := apiServer(t, "s3cr3t-exec")
	calls := filepath.Join(t.TempDir(), "calls")
	cmd := plugin(t, `[ -n "$KUBERNETES_EXEC_INFO" ] || exit 9
echo run >> "$CALLS"
printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"%s"}}' "$1" "$PLUGIN_TOKEN"`)
	cfg := mustBuild(t, Settings{Host: srvURL, ClusterCACertificate: ca, Exec: &Exec{
		APIVersion: v1, Command: cmd, Args: []string{v1}, Env: map[string]string{"PLUGIN_TOKEN": "s3cr3t-exec", "CALLS": calls},
	}})
	if cfg.REST.ExecProvider == nil || cfg.REST.ExecProvider.Command != cmd {
		t.Fatalf("exec not configured: %+v", cfg.REST.ExecProvider)
	}
	if code := get(t, cfg.REST); code != http.StatusOK {
		t.Fatalf("request with the plugin's token: %d", code)
	}
	if b, _ := os.ReadFile(calls); strings.Count(string(b), "run") != 2 {
		t.Fatalf("plugin runs: %q, want one check in Build and one by client-go", b)
	}
	// An exec block also overrides the user of a kubeconfig.
	cfg = mustBuild(t, Settings{KubeconfigPath: writeKubeconfig(t), Exec: &Exec{
		APIVersion: v1, Command: cmd, Args: []string{v1}, Env: map[string]string{"PLUGIN_TOKEN": "x", "CALLS": calls},
	}})
	if cfg.REST.ExecProvider == nil {
		t.Fatal("exec did not override the kubeconfig user")
	}
}

func TestBuildExecProblems(t *testing.T) {
	secretEnv := map[string]string{"PLUGIN_SECRET": "s3cr3t-env-value"}
	cases := map[string]struct {
		body    string
		command string
		summary string
		want    []string
		dont    []string
	}{
		"fails": {body: `echo "login failed for $PLUGIN_SECRET" >&2; exit 3`, summary: "Exec Credential Plugin Failed",
			want: []string{"exited with code 3", "login failed for (redacted)"}},
		"not found": {command: "/nonexistent/aws-iam-authenticator", summary: "Exec Credential Plugin Not Found",
			want: []string{`"/nonexistent/aws-iam-authenticator"`}},
		"not json": {body: `echo "token: $PLUGIN_SECRET"`, summary: "Invalid Exec Credential", want: []string{"did not print an ExecCredential"}},
		"wrong version": {body: `echo '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"x"}}'`,
			summary: "Invalid Exec Credential", want: []string{"v1beta1", "Set api_version"}},
		"no token": {body: `echo '{"apiVersion":"` + v1 + `","kind":"ExecCredential","status":{}}'`,
			summary: "Invalid Exec Credential", want: []string{"without a token"}},
		"cert without key": {body: `echo '{"apiVersion":"` + v1 + `","kind":"ExecCredential","status":{"clientCertificateData":"x"}}'`,
			summary: "Invalid Exec Credential", want: []string{"both are needed"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			command := tc.command
			if command == "" {
				command = plugin(t, tc.body)
			}
			_, err := build(t, Settings{Host: "https://127.0.0.1:1", Exec: &Exec{APIVersion: v1, Command: command, Args: []string{"--secret-arg-s3cr3t"}, Env: secretEnv}})
			userError(t, err, tc.summary, tc.want...)
			if !strings.Contains(err.Error(), command) {
				t.Errorf("error does not name the command: %v", err)
			}
		})
	}
}

func TestBuildExecHangs(t *testing.T) {
	cmd := plugin(t, "sleep 30")
	start := time.Now()
	_, err := build(t, Settings{Host: "https://127.0.0.1:1", RequestTimeout: 300 * time.Millisecond,
		Exec: &Exec{APIVersion: v1, Command: cmd}})
	userError(t, err, "Exec Credential Plugin Timed Out", cmd, "300ms", "request_timeout")
	if took := time.Since(start); took > execWaitDelay+5*time.Second {
		t.Fatalf("a hanging plugin held Build for %s", took)
	}
}

// A kubeconfig's plugin that asks for the cluster (provideClusterInfo) gets it in the check run
// too, as client-go passes it.
func TestBuildExecClusterInfo(t *testing.T) {
	cmd := plugin(t, `case "$KUBERNETES_EXEC_INFO" in *'"server":"https://127.0.0.1:6443"'*) ;; *) echo "no cluster info" >&2; exit 5 ;; esac
printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"t"}}' "`+v1+`"`)
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: mgmt
clusters: [{name: m, cluster: {server: "https://127.0.0.1:6443"}}]
contexts: [{name: mgmt, context: {cluster: m, user: u}}]
users: [{name: u, user: {exec: {apiVersion: %s, command: %q, provideClusterInfo: true, interactiveMode: Never}}}]
`, v1, cmd)
	cfg := mustBuild(t, Settings{KubeconfigRaw: kubeconfig})
	if cfg.REST.ExecProvider == nil || !cfg.REST.ExecProvider.ProvideClusterInfo {
		t.Fatalf("exec from the kubeconfig not kept: %+v", cfg.REST.ExecProvider)
	}
}
