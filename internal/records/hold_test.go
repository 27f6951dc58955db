package records

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Hold takes every Lease, fences the run on all of them, and gives them all back; a Lease lost
// (here: deleted) cancels the run and trips the fence.
func TestHoldFencesOnEveryLease(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	clock := newFakeClock()
	const d = time.Minute
	a := Key{Kind: "MachineDeployment", Namespace: "fleet", Name: "a"}
	b := Key{Kind: "MachineDeployment", Namespace: "fleet", Name: "b"}
	if err := Fenced(ctx); err != nil {
		t.Fatalf("a context outside an apply is fenced: %v", err)
	}
	runCtx, release, err := Hold(ctx, c, "leases", []Key{a, b}, "me", d, clock)
	must(t, err)
	defer release()
	for _, k := range []Key{a, b} {
		l, err := getLease(t, c, "leases", k)
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "me" {
			t.Fatalf("Lease of %s: %v %v", k, l, err)
		}
	}
	if err := Fenced(runCtx); err != nil {
		t.Fatalf("fence while both Leases are held: %v", err)
	}
	if err := Fenced(context.WithoutCancel(runCtx)); err != nil {
		t.Fatalf("the fence does not travel to a settling context: %v", err)
	}

	l, err := getLease(t, c, "leases", b)
	must(t, err)
	must(t, c.Delete(ctx, l))
	clock.step(t, 2, pollInterval(d), time.Second)
	if cause := cancelled(t, runCtx); !errors.Is(cause, ErrLeaseLost) || !strings.Contains(cause.Error(), "deleted") {
		t.Fatalf("run context cause after the second Lease was deleted: %v", cause)
	}
	if err := Fenced(context.WithoutCancel(runCtx)); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("fence after a Lease was lost: %v, want ErrLeaseLost", err)
	}
}

// When a later Lease cannot be taken, the ones already taken are given back: nothing stays held.
func TestHoldReleasesWhatItTookOnFailure(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	a := Key{Kind: "MachineDeployment", Namespace: "fleet", Name: "a"}
	_, _, err := Hold(ctx, c, "leases", []Key{a, {}}, "me", time.Minute, newFakeClock())
	if err == nil {
		t.Fatal("Hold with an invalid second key succeeded")
	}
	if l, err := getLease(t, c, "leases", a); err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		t.Fatalf("the first Lease is still held by %q after Hold failed", *l.Spec.HolderIdentity)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	// Another holder takes it at once: it was released, not left to expire.
	h, err := Acquire(ctx, c, "leases", a, "other", time.Minute, newFakeClock())
	must(t, err)
	must(t, h.Release(ctx))
}
