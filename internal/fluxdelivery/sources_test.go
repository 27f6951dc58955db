package fluxdelivery

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// sourcesOf names the rollout's OCIRepositories in namespace fleet.
func sourcesOf(t *testing.T, d *Delivery) []string {
	t.Helper()
	var names []string
	if err := d.list(context.Background(), OCIRepositoryKind, "fleet", func(u *unstructured.Unstructured) { names = append(names, u.GetName()) }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// pinnedFleet is a Delivery of watchKey over an empty management cluster.
func pinnedFleet() *Delivery {
	return &Delivery{mgmt: fake.NewClientBuilder().Build(), key: watchKey}
}

// TestClustersOnOneArtifactShareItsSource: the clusters of a namespace pinned to one artifact
// have one OCIRepository between them, which their Kustomizations name and Pinned and ReadAll
// follow; a cluster moved to another artifact gets that one's, and the first stays while a
// Kustomization names it.
func TestClustersOnOneArtifactShareItsSource(t *testing.T) {
	ctx := context.Background()
	d := pinnedFleet()
	for _, c := range []string{"c1", "c2", "c3"} {
		if _, err := d.Pin(ctx, "fleet", c, Pinning{Digest: digestA, Timeout: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := sourcesOf(t, d), []string{SourceName(watchKey, digestA)}; !slices.Equal(got, want) {
		t.Fatalf("OCIRepositories after pinning three clusters to one artifact: %v, want %v", got, want)
	}
	if _, err := d.Pin(ctx, "fleet", "c3", Pinning{Digest: digestB, Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := d.Sweep(ctx, "fleet", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	want := []string{SourceName(watchKey, digestA), SourceName(watchKey, digestB)}
	slices.Sort(want)
	if got := sourcesOf(t, d); !slices.Equal(got, want) {
		t.Fatalf("OCIRepositories with c3 moved on: %v, want %v", got, want)
	}
	objs, err := d.ReadAll(ctx, "fleet")
	if err != nil {
		t.Fatal(err)
	}
	for c, digest := range map[string]string{"c1": digestA, "c2": digestA, "c3": digestB} {
		if got, ok := objs.Pinned(c); !ok || got != digest {
			t.Errorf("ReadAll: %s pinned to %q (%v), want %s", c, got, ok, digest)
		}
		if got, ok, err := d.Pinned(ctx, "fleet", c); err != nil || !ok || got != digest {
			t.Errorf("Pinned: %s pinned to %q (%v, %v), want %s", c, got, ok, err, digest)
		}
	}
}

// TestRemoveSweepsOnlyUnnamedSources: removing a cluster deletes its Kustomization, and the
// OCIRepository only once no other Kustomization names it; a Pin under way keeps the source it
// is about to name.
func TestRemoveSweepsOnlyUnnamedSources(t *testing.T) {
	ctx := context.Background()
	d := pinnedFleet()
	for _, c := range []string{"c1", "c2"} {
		if _, err := d.Pin(ctx, "fleet", c, Pinning{Digest: digestA, Timeout: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Remove(ctx, "fleet", "c1", time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	if got := sourcesOf(t, d); len(got) != 1 {
		t.Fatalf("OCIRepositories with c2 still on the artifact: %v, want its one", got)
	}
	if src, err := d.Source(ctx, "fleet", "c1"); err != nil || src != nil {
		t.Fatalf("c1's source after its removal: %v, %v; want none", src, err)
	}

	// A sweep waits for the Pins under way in the namespace: between its two lists a Pin could
	// write a source and the Kustomization naming it.
	unlock := pinning("fleet")
	swept := make(chan error, 1)
	go func() { swept <- d.Remove(ctx, "fleet", "c2", time.Millisecond, false) }()
	time.Sleep(50 * time.Millisecond)
	if got := sourcesOf(t, d); len(got) != 1 {
		t.Fatalf("OCIRepositories while a Pin is under way: %v, want the one left alone", got)
	}
	unlock()
	if err := <-swept; err != nil {
		t.Fatal(err)
	}
	if got := sourcesOf(t, d); len(got) != 0 {
		t.Fatalf("OCIRepositories with every cluster removed: %v, want none", got)
	}
}

// TestPinRecreatesASourceBeingDeleted: a Pin that meets its OCIRepository being deleted (a sweep
// let it go, source-controller still holds it) waits it out and creates it again, rather than
// naming a source about to disappear.
func TestPinRecreatesASourceBeingDeleted(t *testing.T) {
	ctx := context.Background()
	d := pinnedFleet()
	src := d.source("fleet", digestA)
	src.SetFinalizers([]string{"finalizers.fluxcd.io"})
	if err := d.mgmt.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	if err := d.mgmt.Delete(ctx, src); err != nil {
		t.Fatal(err)
	}
	// (The fake API server lets the object go as soon as the apply leaves it no finalizer; a real
	// one holds it until source-controller lets go. Either way the Pin must end with a source.)
	if _, err := d.Pin(ctx, "fleet", "c1", Pinning{Digest: digestA, Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	live := src.DeepCopy()
	if err := d.mgmt.Get(ctx, client.ObjectKeyFromObject(src), live); err != nil || live.GetDeletionTimestamp() != nil {
		t.Fatalf("the source after the Pin: %v (deleting: %v), want it there anew", err, live.GetDeletionTimestamp())
	}
}
