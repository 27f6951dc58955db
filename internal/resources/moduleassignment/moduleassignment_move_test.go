package moduleassignment

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// memPrivate is the framework's private state as the assignment sees it.
type memPrivate map[string][]byte

func (p memPrivate) GetKey(_ context.Context, key string) ([]byte, diag.Diagnostics) {
	return p[key], nil
}

func (p memPrivate) SetKey(_ context.Context, key string, value []byte) diag.Diagnostics {
	if len(value) == 0 {
		delete(p, key)
	} else {
		p[key] = value
	}
	return nil
}

// TestMovingFrom: the private state remembers the engine an assignment moves from, from the
// prior state's `delivery` or, once a move has begun, from the prior private state (an apply
// that failed part-way saved the new `delivery`); a plan that goes back to the old engine by
// hand, a create and an unchanged engine move nothing.
func TestMovingFrom(t *testing.T) {
	ctx := context.Background()
	settings := &delivery.FluxSettings{Repository: "oci://r.example/fleet/base", Insecure: true}
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
		{"delivery not known yet", model(types.ObjectUnknown(flux.AttributeTypes(ctx)), nil), model(direct, nil), ""},
		{"direct to Flux", model(flux, nil), model(direct, nil), "direct"},
		{"Flux to direct", model(direct, nil), model(flux, nil), "flux"},
		{"a move to Flux under way", model(flux, nil), model(flux, &engineRef{}), "direct"},
		{"a move back to direct under way", model(direct, nil), model(direct, &engineRef{Flux: settings}), "flux"},
		{"a move to Flux undone by hand", model(direct, nil), model(direct, &engineRef{}), ""},
	} {
		d := tc.plan.planMove(ctx, tc.prior)
		if d.HasError() {
			t.Fatalf("%s: %v", tc.name, d)
		}
		got, name := tc.plan.private.MovingFrom, ""
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
}

// The engine moved from survives the private state's round trip across plans, applies and
// refreshes (loadMoving reads it alone), and the move ends only once every module was let go
// everywhere; its key is removed then.
func TestMoveAcrossPrivateState(t *testing.T) {
	ctx := context.Background()
	store := memPrivate{}
	var m Model
	m.private.MovingFrom = &engineRef{Flux: &delivery.FluxSettings{Repository: "oci://r.example/fleet/base"}}
	if d := m.SavePrivate(ctx, store); d.HasError() {
		t.Fatal(d)
	}
	var refreshed Model
	if d := refreshed.loadMoving(ctx, store); d.HasError() || refreshed.private.MovingFrom == nil ||
		refreshed.private.MovingFrom.Engine() != "flux" || refreshed.private.MovingFrom.Flux.Repository != "oci://r.example/fleet/base" {
		t.Fatalf("after the round trip: %+v (%v)", refreshed.private.MovingFrom, d)
	}
	if strings.Contains(string(store[privateMovingKey]), "password") {
		t.Errorf("credentials in the private state: %s", store[privateMovingKey])
	}
	module := func(previous map[string]string) *delivery.Observation {
		return &delivery.Observation{Previous: previous, Moving: map[string]string{}}
	}
	for _, tc := range []struct {
		name string
		obs  *assignment.Observation
		ends bool
	}{
		{"not read", nil, false},
		{"app still on Flux on c2", &assignment.Observation{Modules: map[string]*delivery.Observation{
			"base": module(map[string]string{}), "app": module(map[string]string{"c2": "r1"})}}, false},
		{"a cluster unread", &assignment.Observation{Skipped: map[string]string{"c3": "unreachable"}, Modules: map[string]*delivery.Observation{
			"base": module(map[string]string{}), "app": module(map[string]string{})}}, false},
		{"every module let go", &assignment.Observation{Modules: map[string]*delivery.Observation{
			"base": module(map[string]string{}), "app": module(map[string]string{})}}, true},
	} {
		refreshed.settleMove(tc.obs)
		if (refreshed.private.MovingFrom == nil) != tc.ends {
			t.Errorf("%s: moving from %v, want ended %v", tc.name, refreshed.private.MovingFrom, tc.ends)
		}
	}
	if d := refreshed.SavePrivate(ctx, store); d.HasError() {
		t.Fatal(d)
	}
	if _, kept := store[privateMovingKey]; kept {
		t.Errorf("the engine moved from is still stored after the move ended")
	}
}

// warnMove says nothing when nothing moves, and, moving, names both engines and the placements
// still on the old one.
func TestWarnMove(t *testing.T) {
	svc := &delivery.Service{}
	var diags diag.Diagnostics
	warnMove(&diags, svc, &assignment.Observation{})
	if len(diags) != 0 {
		t.Errorf("not moving: %v", diags)
	}
	moving := svc.WithFlux(&delivery.FluxSettings{Repository: "oci://r.example/x"}).MovingFrom(nil)
	obs := &assignment.Observation{Modules: map[string]*delivery.Observation{
		"base": {Moving: map[string]string{"c1": "r", "c2": "r"}}, "app": {Moving: map[string]string{"c1": "r"}}}}
	warnMove(&diags, moving, obs)
	if len(diags) != 1 || diags[0].Summary() != "Delivery Engine Moves" ||
		!strings.Contains(diags[0].Detail(), "from direct delivery to Flux") || !strings.Contains(diags[0].Detail(), "3 module placement(s) still on direct delivery") {
		t.Errorf("moving: %v", diags)
	}
}

// movedFromSettings: with no move, none; moving from direct delivery, the settings as they are;
// moving from Flux, with its pull settings (and never the credentials, which are no part of a
// revision), which the same content then names as it did under Flux.
func TestMovedFromSettings(t *testing.T) {
	var m Model
	if _, moving := m.movedFromSettings([]byte("rules")); moving {
		t.Errorf("not moving: moving")
	}
	m.private.MovingFrom = &engineRef{}
	if got, moving := m.movedFromSettings([]byte("rules")); !moving || string(got) != "rules" {
		t.Errorf("from direct delivery: %q %v", got, moving)
	}
	settings := &delivery.FluxSettings{Repository: "oci://r.example/x", Insecure: true}
	m.private.MovingFrom = &engineRef{Flux: settings}
	rules := []byte("rules")
	got, moving := m.movedFromSettings(rules[:len(rules):len(rules)])
	if want := "rules" + string(delivery.RevisionSettings(settings)); !moving || string(got) != want {
		t.Errorf("from Flux: %q, want %q", got, want)
	}
}
