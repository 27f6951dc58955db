package moduleassignment

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

func summaries(diags diag.Diagnostics) string {
	var out []string
	for _, d := range diags.Errors() {
		out = append(out, d.Summary())
	}
	return strings.Join(out, "; ")
}

// TestSpecRefusesWhatFluxCannotDeliverYet: with delivery.flux, sensitive_manifests (they would
// be published to the registry) and adopt = false (it needs the workload clusters read) are
// refused, naming what; deletion_policy = "orphan" goes through; the
// same configuration delivered directly is accepted. `values` is accepted through Flux (each
// module's rendering for a cluster is an artifact of its own).
func TestSpecRefusesWhatFluxCannotDeliverYet(t *testing.T) {
	flux := fleetresource.DeliveryValue(&delivery.FluxSettings{Repository: "oci://registry.example/fleet/base"})
	for _, tc := range []struct {
		name   string
		hidden string
		refuse bool
		want   string
	}{
		{"sensitive manifests", "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: app}\nstringData: {password: hunter2}\n", false,
			"Sensitive Manifests Not Delivered Through Flux Yet"},
		{"adopt = false", "", true, "Adoption Cannot Be Refused Through Flux"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := moduleModel(t, dbConfigMap, tc.hidden, "", nil)
			m.DeletionPolicy = types.StringValue("orphan")
			if tc.refuse {
				m.Adopt = types.BoolValue(false)
			}
			if _, diags := m.spec(context.Background()); diags.HasError() {
				t.Fatalf("delivered directly: %s", summaries(diags))
			}
			m.Delivery = flux
			_, diags := m.spec(context.Background())
			if got := summaries(diags); !strings.Contains(got, tc.want) {
				t.Fatalf("through Flux: errors %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("values", func(t *testing.T) {
		m := moduleModel(t, dbConfigMap, "", "", nil)
		m.Delivery, m.sensitive = flux, nil
		var diags diag.Diagnostics
		m.Values, diags = fleetresource.ValuesValue(context.Background(), &delivery.Values{FromLabels: map[string]string{"zone": "example.com/zone"}})
		spec, more := m.spec(context.Background())
		if diags.Append(more...); diags.HasError() || spec.Values == nil {
			t.Fatalf("values through Flux: errors %q, values %+v; want them accepted", summaries(diags), spec.Values)
		}
	})
}

// TestModeChangeRefusedWithFlux: the mode lives in the clusters' Kustomizations, so a change of
// it is refused with delivery.flux, and allowed without.
func TestModeChangeRefusedWithFlux(t *testing.T) {
	flux := fleetresource.DeliveryValue(&delivery.FluxSettings{Repository: "oci://registry.example/fleet/base"})
	for _, tc := range []struct {
		name        string
		delivery    types.Object
		mode, prior string
		wantRefusal bool
	}{
		{"flux, changed", flux, "ApplyOnce", "Reconcile", true},
		{"flux, unchanged", flux, "Reconcile", "Reconcile", false},
		{"direct, changed", fleetresource.DeliveryValue(nil), "ApplyOnce", "Reconcile", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := &Model{Delivery: tc.delivery, Mode: types.StringValue(tc.mode)}
			prior := &Model{Delivery: tc.delivery, Mode: types.StringValue(tc.prior)}
			var diags diag.Diagnostics
			refuseModeChange(plan, prior, &diags)
			if diags.HasError() != tc.wantRefusal {
				t.Fatalf("refused = %t (%s), want %t", diags.HasError(), summaries(diags), tc.wantRefusal)
			}
		})
	}
}
