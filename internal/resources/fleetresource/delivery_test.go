package fleetresource

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed/servingcert"
)

// TestDeliveryValueKeepsNoCredentials: what import restores holds the username, never the
// password or token (write-only).
func TestDeliveryValueKeepsNoCredentials(t *testing.T) {
	v := DeliveryValue(&delivery.FluxSettings{Repository: "oci://r.example/x", Credentials: delivery.FluxCredentials{Username: "u", Password: "p", Token: "t"}})
	flux := v.Attributes()["flux"].(types.Object).Attributes()
	if flux["username"] != types.StringValue("u") || !flux["password"].IsNull() || !flux["token"].IsNull() {
		t.Fatalf("delivery.flux %v: want the username and no password or token", flux)
	}
}

// TestFluxClientCertificate: the client certificate is kept (public), its key never; a key that
// is not the certificate's is refused at plan on `delivery.flux.client_key`, without quoting it.
func TestFluxClientCertificate(t *testing.T) {
	ctx := context.Background()
	a, err := servingcert.NewClient("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := servingcert.NewClient("b")
	if err != nil {
		t.Fatal(err)
	}
	settings := &delivery.FluxSettings{Repository: "oci://r.example/x", ClientCertificate: string(a.CertPEM),
		Credentials: delivery.FluxCredentials{ClientKey: string(a.KeyPEM)}}
	v := DeliveryValue(settings)
	flux := v.Attributes()["flux"].(types.Object).Attributes()
	if flux["client_certificate"] != types.StringValue(string(a.CertPEM)) || !flux["client_key"].IsNull() {
		t.Fatalf("delivery.flux %v: want the client certificate and no key", flux)
	}
	// The configuration as the plan reads it: the key comes write-only, beside the value.
	key := func(pem []byte) FluxWriteOnly {
		w := NoFluxWriteOnly()
		w.ClientKey = types.StringValue(string(pem))
		return w
	}
	got, diags := FluxSettings(ctx, v, key(a.KeyPEM))
	if diags.HasError() || got.Credentials.ClientKey != string(a.KeyPEM) || got.ClientCertificate != string(a.CertPEM) {
		t.Fatalf("the certificate and its key: %v, %+v", diags, got)
	}
	_, diags = FluxSettings(ctx, v, key(b.KeyPEM))
	if len(diags.Errors()) != 1 {
		t.Fatalf("another certificate's key: diagnostics %v, want one error", diags)
	}
	d, ok := diags.Errors()[0].(diag.DiagnosticWithPath)
	if !ok || !d.Path().Equal(pathFlux.AtName("client_key")) || !strings.Contains(d.Detail(), "not the key of client_certificate") ||
		strings.Contains(d.Detail(), "PRIVATE KEY") {
		t.Fatalf("another certificate's key: %v, want it refused on delivery.flux.client_key", diags)
	}
	// Refresh, import and destroy read the settings from the state: the certificate without its
	// key (write-only). Accepted: they push nothing. (A configuration with one and not the other
	// is refused by the schema's AlsoRequires.)
	if got, diags := FluxSettings(ctx, v, NoFluxWriteOnly()); diags.HasError() || got.ClientCertificate != string(a.CertPEM) {
		t.Fatalf("the certificate from the state, without its key: %v, %+v; want it accepted", diags, got)
	}
}

// The plan's Flux Artifact warning: one line per revision (a module's named), the digest apply
// pins, and what a tag holding other content makes apply do.
func TestWarnFluxArtifacts(t *testing.T) {
	var diags diag.Diagnostics
	WarnFluxArtifacts(&diags, nil)
	if len(diags) != 0 {
		t.Fatalf("no artifact, diagnostics %v", diags)
	}
	WarnFluxArtifacts(&diags, []string{
		FluxArtifactLine("", delivery.FluxArtifact{Ref: "oci://r.example/web:abc", Digest: "sha256:1234"}),
		FluxArtifactLine("app", delivery.FluxArtifact{Ref: "oci://r.example/app:def", Digest: "sha256:5678", Template: true}),
	})
	if len(diags) != 1 || diags[0].Summary() != "Flux Artifact" {
		t.Fatalf("diagnostics %v, want one Flux Artifact warning", diags)
	}
	detail := diags[0].Detail()
	for _, want := range []string{"\n  oci://r.example/web:abc @ sha256:1234\n", "\n  app: oci://r.example/app:def @ sha256:5678 (a template: each cluster's Kustomization substitutes that cluster's values)\n", "both digests"} {
		if !strings.Contains(detail, want) {
			t.Errorf("the warning %q does not say %q", detail, want)
		}
	}
}

// TestDeliveryAttributeMovable: the resources move between the engines in place, and take
// changes of the repository, `insecure`, credentials, the CA and the pull Secrets as updates
// rolled out in waves: no plan modifier on `delivery` replaces them.
func TestDeliveryAttributeMovable(t *testing.T) {
	if m := DeliveryAttribute().PlanModifiers; len(m) != 0 {
		t.Errorf("%d plan modifiers, want none", len(m))
	}
	for _, tc := range []struct {
		settings *delivery.FluxSettings
		want     string
	}{{nil, "direct"}, {&delivery.FluxSettings{Repository: "oci://r.example/x"}, "flux"}} {
		if got, diags := EngineOf(context.Background(), DeliveryValue(tc.settings)); got != tc.want || diags.HasError() {
			t.Errorf("EngineOf(%v) = %q %v, want %q", tc.settings, got, diags, tc.want)
		}
	}
}
