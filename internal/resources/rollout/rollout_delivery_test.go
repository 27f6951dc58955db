package rollout

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/shared"
)

// TestRefuseWithFlux: through Flux, sensitive_manifests (they would be published in the artifact)
// and deletion_policy = "orphan" (Flux prunes) are refused at plan, naming the attribute; direct
// delivery takes both.
func TestRefuseWithFlux(t *testing.T) {
	flux := shared.DeliveryValue(&delivery.FluxSettings{Repository: "oci://r.example/fleet/web"})
	direct := shared.DeliveryValue(nil)
	secret := types.StringValue("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: n}\n")
	for _, tc := range []struct {
		name string
		m    Model
		want []string
	}{
		{"Flux, plain", Model{Delivery: flux, Sensitive: types.StringNull(), DeletionPolicy: types.StringValue("delete")}, nil},
		{"Flux, sensitive manifests", Model{Delivery: flux, Sensitive: secret, DeletionPolicy: types.StringValue("delete")}, []string{"Sensitive Manifests Not Delivered Through Flux Yet"}},
		{"Flux, orphan", Model{Delivery: flux, Sensitive: types.StringNull(), DeletionPolicy: types.StringValue("orphan")}, []string{"Orphan Not Delivered Through Flux Yet"}},
		{"direct, both", Model{Delivery: direct, Sensitive: secret, DeletionPolicy: types.StringValue("orphan")}, nil},
	} {
		diags := tc.m.refuseWithFlux()
		var got []string
		for _, d := range diags.Errors() {
			got = append(got, d.Summary())
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
