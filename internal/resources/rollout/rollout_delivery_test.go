package rollout

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/health"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// TestRefuseWithFlux: through Flux, sensitive_manifests without decryption (they would be
// published readable in the artifact) or with values, and adopt = false (it needs the workload clusters read) are refused at plan, naming the
// attribute; direct delivery takes both, and deletion_policy = "orphan" goes through Flux.
func TestRefuseWithFlux(t *testing.T) {
	flux := fleetresource.DeliveryValue(&delivery.FluxSettings{Repository: "oci://r.example/fleet/web"})
	decrypting := fleetresource.DeliveryValue(&delivery.FluxSettings{Repository: "oci://r.example/fleet/web",
		Decryption: &delivery.FluxDecryption{AgeRecipient: "age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj", SecretName: "sops-age"}})
	values := types.ObjectValueMust(map[string]attr.Type{}, map[string]attr.Value{})
	direct := fleetresource.DeliveryValue(nil)
	secret := types.StringValue("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: n}\n")
	for _, tc := range []struct {
		name string
		m    Model
		want []string
	}{
		{"Flux, plain", Model{Delivery: flux, Sensitive: types.StringNull(), Adopt: types.BoolNull()}, nil},
		{"Flux, sensitive manifests", Model{Delivery: flux, Sensitive: secret, Adopt: types.BoolNull()}, []string{"Sensitive Manifests Through Flux Need Decryption"}},
		{"Flux, sensitive manifests, decryption", Model{Delivery: decrypting, Sensitive: secret, Adopt: types.BoolNull(), Values: types.ObjectNull(map[string]attr.Type{})}, nil},
		{"Flux, sensitive manifests, decryption, values", Model{Delivery: decrypting, Sensitive: secret, Adopt: types.BoolNull(), Values: values},
			[]string{"Sensitive Manifests With Values Not Delivered Through Flux Yet"}},
		{"Flux, adopt = false", Model{Delivery: flux, Sensitive: types.StringNull(), Adopt: types.BoolValue(false)}, []string{"Adoption Cannot Be Refused Through Flux"}},
		{"Flux, adopt = true, orphan", Model{Delivery: flux, Sensitive: types.StringNull(), Adopt: types.BoolValue(true), DeletionPolicy: types.StringValue("orphan")}, nil},
		{"direct, both", Model{Delivery: direct, Sensitive: secret, Adopt: types.BoolValue(false)}, nil},
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

// TestHealthChecksThroughFlux: verify.health_checks go through Flux (as the Kustomizations'
// healthCheckExprs) as they do delivering directly: no refusal, and the spec's checker holds them.
func TestHealthChecksThroughFlux(t *testing.T) {
	ctx := context.Background()
	rules := []health.Rule{{APIVersion: "v1", Kind: "ConfigMap", Current: "true", Failed: "data.value == 'bad'"}}
	for _, d := range []types.Object{fleetresource.DeliveryValue(&delivery.FluxSettings{Repository: "oci://r.example/fleet/web"}), fleetresource.DeliveryValue(nil)} {
		m := Model{Delivery: d}
		verify := VerifyModel{HTTPChecks: types.ListNull(types.ObjectType{AttrTypes: httpCheckAttrTypes}), HealthChecks: fleetresource.HealthValue(rules),
			ClusterGates: types.BoolNull(), NodeGate: types.ObjectNull(fleetresource.NodeGateAttrTypes), CheckJob: types.ObjectNull(fleetresource.CheckJobAttrTypes)}
		var spec delivery.Spec
		if diags := m.specVerify(ctx, verify, &spec); diags.HasError() {
			t.Fatalf("delivery %v: %v", d, diags)
		}
		if got := spec.Health.Rules(); len(got) != 1 || got[0] != rules[0] {
			t.Errorf("delivery %v: spec health rules %+v, want %+v", d, got, rules)
		}
	}
}

// TestMovingFrom: the private state remembers the engine a rollout moves from, from the prior
// state's `delivery` or, once a move has begun, from the prior private state; it ends once the
// fleet holds no cluster on the old engine and none unread.
func TestMovingFrom(t *testing.T) {
	ctx := context.Background()
	settings := &delivery.FluxSettings{Repository: "oci://r.example/fleet/web", Insecure: true}
	flux, direct := fleetresource.DeliveryValue(settings), fleetresource.DeliveryValue(nil)
	model := func(d types.Object, from *engineRef) *Model {
		m := &Model{Delivery: d}
		m.private.MovingFrom = from
		return m
	}
	for _, tc := range []struct {
		name        string
		plan, prior *Model
		want        string // "", "direct" or "flux"
	}{
		{"create", model(flux, nil), nil, ""},
		{"unchanged", model(flux, nil), model(flux, nil), ""},
		{"direct to Flux", model(flux, nil), model(direct, nil), "direct"},
		{"Flux to direct", model(direct, nil), model(flux, nil), "flux"},
		{"a move to Flux under way", model(flux, nil), model(flux, &engineRef{}), "direct"},
		{"a move to Flux undone by hand", model(direct, nil), model(direct, &engineRef{}), ""},
	} {
		got, diags := movingFrom(ctx, tc.plan, tc.prior)
		if diags.HasError() {
			t.Fatalf("%s: %v", tc.name, diags)
		}
		name := ""
		if got != nil {
			name = got.Engine()
		}
		if name != tc.want {
			t.Errorf("%s: moving from %q, want %q", tc.name, name, tc.want)
		}
		if name == "flux" && (got.Flux.Repository != settings.Repository || !got.Flux.Insecure) {
			t.Errorf("%s: the Flux settings moved from %+v, want the prior state's", tc.name, got.Flux)
		}
	}
	m := model(flux, &engineRef{})
	for _, tc := range []struct {
		obs  *delivery.Observation
		ends bool
	}{
		{nil, false},
		{&delivery.Observation{Previous: map[string]string{"c1": "r"}}, false},
		{&delivery.Observation{Previous: map[string]string{}, Skipped: map[string]string{"c2": "unreachable"}}, false},
		{&delivery.Observation{Previous: map[string]string{}}, true},
	} {
		m.settleMove(tc.obs)
		if (m.private.MovingFrom == nil) != tc.ends {
			t.Errorf("after %+v: moving from %v, want ended %v", tc.obs, m.private.MovingFrom, tc.ends)
		}
	}
}
