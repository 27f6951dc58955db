package records

import (
	"context"
	"testing"
	"time"
)

func TestBindings_separatePerAssignmentAndCluster(t *testing.T) {
	ctx := context.Background()
	c := newFakeClient(nil)
	s := NewBindingStore(c, "")
	a := Key{Kind: "module-assignment", Namespace: "fleet", Name: "cni"}
	b := Key{Kind: "module-assignment", Namespace: "fleet", Name: "csi"}
	at := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	add := func(key Key, cluster, module, rev string) {
		t.Helper()
		err := s.Update(ctx, key, cluster, func(old []ModuleBinding) []ModuleBinding {
			return append(old, ModuleBinding{Module: module, Revision: rev, AppliedAt: at, Result: BindingApplied})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	add(a, "prod-eu-1", "calico", "r1")
	add(b, "prod-eu-1", "ebs", "r2")
	add(a, "prod-eu-1", "bgp", "r3")
	add(a, "prod-us-1", "calico", "r1")

	got, err := s.List(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got["prod-eu-1"]) != 2 || got["prod-eu-1"][0].Module != "bgp" || !got["prod-eu-1"][1].AppliedAt.Equal(at) {
		t.Fatalf("bindings of a: %+v", got)
	}
	both, err := s.ForCluster(ctx, "prod-eu-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(both) != 2 || len(both[b]) != 1 || both[b][0].Revision != "r2" {
		t.Fatalf("bindings of prod-eu-1: %+v", both)
	}
	// Dropping a's binding leaves b's.
	if err := s.Delete(ctx, a, "prod-eu-1"); err != nil {
		t.Fatal(err)
	}
	if both, _ = s.ForCluster(ctx, "prod-eu-1"); len(both) != 1 || both[b] == nil {
		t.Fatalf("after delete: %+v", both)
	}
	if err := s.DeleteAll(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.List(ctx, a); len(got) != 0 {
		t.Fatalf("after DeleteAll: %+v", got)
	}
	if got, _ = s.List(ctx, b); len(got) != 1 {
		t.Fatalf("b's bindings lost: %+v", got)
	}
}

func TestBindings_concurrentWritersMerge(t *testing.T) {
	ctx := context.Background()
	c := newFakeClient(nil)
	s := NewBindingStore(c, "")
	a := Key{Kind: "module-assignment", Namespace: "fleet", Name: "cni"}
	done := make(chan error)
	for _, m := range []string{"m1", "m2", "m3", "m4"} {
		go func() {
			done <- s.Update(ctx, a, "x", func(old []ModuleBinding) []ModuleBinding {
				return append(old, ModuleBinding{Module: m, Revision: "r", Result: BindingApplied})
			})
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.List(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(got["x"]) != 4 {
		t.Fatalf("lost a concurrent write: %+v", got)
	}
}

func TestParseKey(t *testing.T) {
	k := Key{Kind: "module", Namespace: "fleet", Name: "cni.calico"}
	got, err := ParseKey(k.String())
	if err != nil || got != k {
		t.Fatalf("ParseKey(%q) = %v, %v", k.String(), got, err)
	}
	if _, err := ParseKey("a/b"); err == nil {
		t.Fatal("want an error")
	}
}
