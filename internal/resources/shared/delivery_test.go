package shared

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
)

// TestEngineChangedReplacesOnlyForWhereArtifactsAre: the engine, the repository and `insecure`
// replace the resource; credentials, the CA and the pull Secrets do not (the Secrets go through
// the revision instead).
func TestEngineChangedReplacesOnlyForWhereArtifactsAre(t *testing.T) {
	base := delivery.FluxSettings{Repository: "oci://r.example/fleet/web", Credentials: delivery.FluxCredentials{Username: "a"}}
	with := func(f func(*delivery.FluxSettings)) *delivery.FluxSettings {
		s := base
		f(&s)
		return &s
	}
	for _, tc := range []struct {
		name          string
		before, after *delivery.FluxSettings
		replace       bool
	}{
		{"unchanged", &base, &base, false},
		{"direct to Flux", nil, &base, true},
		{"Flux to direct", &base, nil, true},
		{"repository", &base, with(func(s *delivery.FluxSettings) { s.Repository += "-2" }), true},
		{"insecure", &base, with(func(s *delivery.FluxSettings) { s.Insecure = true }), true},
		{"username", &base, with(func(s *delivery.FluxSettings) { s.Credentials.Username = "b" }), false},
		{"CA bundle", &base, with(func(s *delivery.FluxSettings) { s.CABundle = "pem" }), false},
		{"pull Secret", &base, with(func(s *delivery.FluxSettings) { s.SecretRef = "pull" }), false},
	} {
		req := planmodifier.ObjectRequest{StateValue: DeliveryValue(tc.before), PlanValue: DeliveryValue(tc.after)}
		var resp objectplanmodifier.RequiresReplaceIfFuncResponse
		engineChanged(context.Background(), req, &resp)
		if resp.Diagnostics.HasError() {
			t.Fatalf("%s: %v", tc.name, resp.Diagnostics)
		}
		if resp.RequiresReplace != tc.replace {
			t.Errorf("%s: replace %t, want %t", tc.name, resp.RequiresReplace, tc.replace)
		}
	}
}

// TestDeliveryValueKeepsNoCredentials: what import restores holds the username, never the
// password or token (write-only).
func TestDeliveryValueKeepsNoCredentials(t *testing.T) {
	v := DeliveryValue(&delivery.FluxSettings{Repository: "oci://r.example/x", Credentials: delivery.FluxCredentials{Username: "u", Password: "p", Token: "t"}})
	flux := v.Attributes()["flux"].(types.Object).Attributes()
	if flux["username"] != types.StringValue("u") || !flux["password"].IsNull() || !flux["token"].IsNull() {
		t.Fatalf("delivery.flux %v: want the username and no password or token", flux)
	}
}
