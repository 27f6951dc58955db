package fleetresource

import (
	"context"
	"reflect"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
)

// follow_joins reads back what it was stored from, and is refused through Flux (the
// ClusterResourceSet applies through the clusters' kubeconfigs, not through Flux).
func TestFollowJoinsOf(t *testing.T) {
	ctx := context.Background()
	on := &FollowJoins{Labels: map[string]string{"cluster.x-k8s.io/watch-filter": "mgmt-a"}}
	got, diags := FollowJoinsOf(ctx, on.Value(), DeliveryValue(nil))
	if diags.HasError() || !reflect.DeepEqual(got, on) {
		t.Errorf("got %+v (%v), want %+v", got, diags, on)
	}
	if got, _ := FollowJoinsOf(ctx, (*FollowJoins)(nil).Value(), DeliveryValue(nil)); got != nil {
		t.Errorf("off: got %+v", got)
	}
	_, diags = FollowJoinsOf(ctx, on.Value(), DeliveryValue(&delivery.FluxSettings{Repository: "oci://registry.example/fleet"}))
	if !diags.HasError() || diags.Errors()[0].Summary() != "Follow Joins Not Through Flux" {
		t.Errorf("through Flux: %v, want it refused", diags)
	}
}
