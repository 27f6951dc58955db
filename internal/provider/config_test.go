package provider

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/ownerupdate"
	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
	"github.com/gradual-dev/terraform-provider-gradual/internal/settings"
)

func providerSchema(t *testing.T) provider.SchemaResponse {
	t.Helper()
	var resp provider.SchemaResponse
	(&gradualProvider{version: "test"}).Schema(context.Background(), provider.SchemaRequest{}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatalf("schema: %v", resp.Diagnostics)
	}
	return resp
}

func TestSchemaValid(t *testing.T) {
	resp := providerSchema(t)
	if diags := resp.Schema.ValidateImplementation(context.Background()); diags.HasError() {
		t.Fatalf("schema implementation: %v", diags)
	}
	for _, name := range []string{"config_path", "kubeconfig_path", "config_paths", "config_context", "context", "host", "token",
		"client_certificate", "client_key", "cluster_ca_certificate", "insecure", "tls_server_name", "proxy_url", "request_timeout"} {
		if _, ok := resp.Schema.Attributes[name]; !ok {
			t.Errorf("attribute %s missing", name)
		}
	}
	if _, ok := resp.Schema.Blocks["exec"]; !ok {
		t.Error("exec block missing")
	}
}

// configure runs Configure with the given attributes (the rest null) and a clean environment.
func configure(t *testing.T, attrs map[string]tftypes.Value) *provider.ConfigureResponse {
	t.Helper()
	for _, name := range []string{"KUBE_CONFIG_PATH", "KUBE_CONFIG_PATHS", "KUBE_CTX", "KUBE_CTX_AUTH_INFO", "KUBE_CTX_CLUSTER",
		"KUBE_HOST", "KUBE_TOKEN", "KUBE_CLIENT_CERT_DATA", "KUBE_CLIENT_KEY_DATA", "KUBE_CLUSTER_CA_CERT_DATA", "KUBE_INSECURE",
		"KUBE_TLS_SERVER_NAME", "KUBE_PROXY_URL", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"} {
		t.Setenv(name, "")
	}
	ctx := context.Background()
	s := providerSchema(t).Schema
	typ := s.Type().TerraformType(ctx).(tftypes.Object)
	values := map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		if v, ok := attrs[name]; ok {
			values[name] = v
		} else {
			values[name] = tftypes.NewValue(at, nil)
		}
	}
	req := provider.ConfigureRequest{Config: tfsdk.Config{Schema: s, Raw: tftypes.NewValue(typ, values)}}
	resp := &provider.ConfigureResponse{}
	(&gradualProvider{version: "test"}).Configure(ctx, req, resp)
	return resp
}

func str(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }

func execBlock(command string, env map[string]string) tftypes.Value {
	envValues := map[string]tftypes.Value{}
	for k, v := range env {
		envValues[k] = str(v)
	}
	return tftypes.NewValue(tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"api_version": tftypes.String, "command": tftypes.String,
		"args": tftypes.List{ElementType: tftypes.String}, "env": tftypes.Map{ElementType: tftypes.String},
	}}, map[string]tftypes.Value{
		"api_version": str("client.authentication.k8s.io/v1"), "command": str(command),
		"args": tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, nil),
		"env":  tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, envValues),
	})
}

func TestConfigureNothing(t *testing.T) {
	resp := configure(t, nil)
	if !resp.Diagnostics.HasError() || resp.Diagnostics[0].Summary() != "No Management Cluster Configured" {
		t.Fatalf("diagnostics: %v", resp.Diagnostics)
	}
	if resp.ResourceData != nil {
		t.Fatal("provider configured without a connection")
	}
}

func TestConfigureKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kubeconfig := `apiVersion: v1
kind: Config
current-context: a
clusters: [{name: m, cluster: {server: "https://127.0.0.1:6443"}}]
contexts: [{name: a, context: {cluster: m, user: u}}, {name: mgmt, context: {cluster: m, user: u}}]
users: [{name: u, user: {token: t}}]
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, attrs := range []map[string]tftypes.Value{
		{"kubeconfig_path": str(path), "context": str("mgmt"), "request_timeout": str("7s")},
		{"config_path": str(path), "config_context": str("mgmt"), "request_timeout": str("7s")},
	} {
		resp := configure(t, attrs)
		if resp.Diagnostics.HasError() {
			t.Fatalf("diagnostics: %v", resp.Diagnostics)
		}
		data := resp.ResourceData.(*providerdata.Data)
		if !strings.Contains(data.Management.Source, `"mgmt"`) || data.Management.RESTConfig.Timeout.String() != "7s" {
			t.Fatalf("source %q timeout %s", data.Management.Source, data.Management.RESTConfig.Timeout)
		}
	}
}

func TestConfigureExecFails(t *testing.T) {
	plugin := filepath.Join(t.TempDir(), "get-token")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\necho \"denied: $SECRET\" >&2\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	resp := configure(t, map[string]tftypes.Value{
		"host": str("https://127.0.0.1:6443"),
		"exec": execBlock(plugin, map[string]string{"SECRET": "s3cr3t"}),
	})
	if !resp.Diagnostics.HasError() {
		t.Fatal("a failing plugin configured the provider")
	}
	d := resp.Diagnostics[0]
	if d.Summary() != "Exec Credential Plugin Failed" || !strings.Contains(d.Detail(), plugin) || strings.Contains(d.Detail(), "s3cr3t") {
		t.Fatalf("diagnostic: %s: %s", d.Summary(), d.Detail())
	}
}

// The provider block's lease_duration, max_parallel_clusters and request_timeout reach every
// service as one value: delivery, and in-place updates single-owner and fleet alike.
func TestConfigureSettingsReachInPlaceUpdates(t *testing.T) {
	resp := configure(t, map[string]tftypes.Value{
		"host": str("https://127.0.0.1:6443"), "token": str("t"),
		"lease_duration": str("90s"), "max_parallel_clusters": tftypes.NewValue(tftypes.Number, 7), "request_timeout": str("7s"),
	})
	if resp.Diagnostics.HasError() {
		t.Fatalf("diagnostics: %v", resp.Diagnostics)
	}
	data := resp.ResourceData.(*providerdata.Data)
	want := settings.Settings{LeaseDuration: 90 * time.Second, Parallelism: 7, RequestTimeout: 7 * time.Second}
	updater, _ := data.FleetUpdate.OwnerUpdater.(*ownerupdate.Updater)
	planner, _ := data.FleetUpdate.OwnerPlanner.(*owners.Planner)
	if updater == nil || planner == nil || data.Settings != want || updater.Settings != want || planner.Settings != want || data.FleetUpdate.Settings != want {
		t.Errorf("settings: provider %+v, in-place updater %+v, planner %+v, fleet %+v; want %+v",
			data.Settings, updater, planner, data.FleetUpdate.Settings, want)
	}
	if data.Management.RESTConfig.Timeout != 7*time.Second {
		t.Errorf("connection timeout %s, want request_timeout's 7s", data.Management.RESTConfig.Timeout)
	}
}
