package fleetresource

import (
	"context"
	"reflect"
	"testing"
)

// follow_joins reads back what it was stored from.
func TestFollowJoinsOf(t *testing.T) {
	ctx := context.Background()
	on := &FollowJoins{Labels: map[string]string{"cluster.x-k8s.io/watch-filter": "mgmt-a"}}
	got, diags := FollowJoinsOf(ctx, on.Value())
	if diags.HasError() || !reflect.DeepEqual(got, on) {
		t.Errorf("got %+v (%v), want %+v", got, diags, on)
	}
	if got, _ := FollowJoinsOf(ctx, (*FollowJoins)(nil).Value()); got != nil {
		t.Errorf("off: got %+v", got)
	}
}
