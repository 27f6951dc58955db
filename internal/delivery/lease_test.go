package delivery

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/settings"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// A run holding a Lease that is deleted under it is cancelled, and its error says the Lease was
// lost and why.
func TestHoldLeaseLostCancelsRun(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).Build()
	clock := engine.NewFakeClock(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	svc := &Service{engine: directEngine{}, mgmt: &fleet.Management{Client: c}, clock: clock, leaseDuration: settings.DefaultLeaseDuration}
	key := records.Key{Kind: "rollout", Namespace: "fleet", Name: "ingress"}

	runCtx, release, err := svc.HoldLease(t.Context(), "", key, "me", "Busy", "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if got := LeaseLost(runCtx, errors.New("boom"), "Rollout x"); got.Error() != "boom" {
		t.Fatalf("LeaseLost of a held lease changed the error: %v", got)
	}
	l := &coordinationv1.Lease{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: records.DefaultNamespace, Name: key.ObjectName()}, l); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runCtx.Err() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("run context not cancelled 10 s after the Lease was deleted")
		}
		clock.Advance(time.Second)
		time.Sleep(time.Millisecond)
	}
	err = LeaseLost(runCtx, errors.New("cancelled: "+context.Cause(runCtx).Error()), "Rollout fleet/ingress")
	u, ok := usererr.As(err)
	if !ok || u.Summary != "Lease Lost" || !errors.Is(err, records.ErrLeaseLost) || !strings.Contains(err.Error(), "was deleted") ||
		!strings.Contains(u.Detail, "Rollout fleet/ingress stopped because it lost its Lease") {
		t.Fatalf("error: %v (%+v)", err, u)
	}
	if again := LeaseLost(runCtx, err, "Rollout fleet/ingress"); again != err {
		t.Fatalf("LeaseLost wrapped twice: %v", again)
	}
}
