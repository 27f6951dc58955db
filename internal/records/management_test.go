package records

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func newTestManagementStore(c client.Client) (*ManagementStore, *fakeClock) {
	s := NewManagementStore(c, "")
	clock := newFakeClock()
	s.Clock = clock
	return s, clock
}

func TestProgressRoundTrip(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	s, clock := newTestManagementStore(c)

	p, err := s.LoadProgress(ctx, ingress)
	must(t, err)
	if p != nil {
		t.Fatalf("progress of a rollout never run: %+v", p)
	}
	started := clock.Now()
	want := Progress{
		Phase: PhaseRunning, Revision: "aaa", Wave: 1, Waves: 3, StartedAt: started, Holder: "host_pid1_ab",
		Clusters: map[string]ClusterOutcome{
			"prod-eu-1": {Revision: "aaa", State: "provisioning", StartedAt: started},
			"prod-us-1": {Revision: "zzz", State: "current", Reason: strings.Repeat("x", MaxReasonLength+10)},
		},
	}
	must(t, s.SaveProgress(ctx, ingress, want))
	got, err := s.LoadProgress(ctx, ingress)
	must(t, err)
	if got.Phase != PhaseRunning || got.Wave != 1 || got.Waves != 3 || !got.StartedAt.Equal(started) || !got.UpdatedAt.Equal(started) ||
		got.Holder != "host_pid1_ab" || got.Clusters["prod-eu-1"].State != "provisioning" {
		t.Fatalf("progress does not round-trip: %+v", got)
	}
	if r := got.Clusters["prod-us-1"].Reason; len(r) > MaxReasonLength || !strings.HasSuffix(r, "(truncated)") {
		t.Fatalf("long reason stored as %d bytes", len(r))
	}
	if len(want.Clusters["prod-us-1"].Reason) != MaxReasonLength+10 {
		t.Fatalf("SaveProgress changed the caller's map")
	}

	// Saving progress keeps the ledger, and the other way round.
	must(t, s.RecordInvalid(ctx, ingress, InvalidEntry{Revision: "bad", Reason: "boom", Clusters: []string{"prod-eu-1"}}))
	clock.Advance(time.Minute)
	want.Phase, want.Wave = PhaseFailed, 2
	must(t, s.SaveProgress(ctx, ingress, want))
	r, err := s.Load(ctx, ingress)
	must(t, err)
	if r.Progress.Phase != PhaseFailed || !r.Progress.UpdatedAt.Equal(clock.Now()) || len(r.Ledger) != 1 {
		t.Fatalf("Load = %+v, ledger %v", r.Progress, r.Ledger)
	}

	sec := &corev1.Secret{}
	must(t, c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: ingress.ObjectName()}, sec))
	if sec.Type != RolloutSecretType || sec.Labels[LabelRollout] != ingress.Hash() || sec.Labels[LabelManagedBy] != ManagedBy ||
		len(sec.Data["progress"]) == 0 || len(sec.Data["ledger"]) == 0 {
		t.Fatalf("management Secret: type %q labels %v data keys %v", sec.Type, sec.Labels, keysOf(sec.Data))
	}

	must(t, s.Delete(ctx, ingress))
	must(t, s.Delete(ctx, ingress))
	r, err = s.Load(ctx, ingress)
	must(t, err)
	if r.Progress != nil || r.Ledger != nil {
		t.Fatalf("after Delete: %+v", r)
	}
}

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestLedgerMergesAndForgets(t *testing.T) {
	ctx := t.Context()
	s, clock := newTestManagementStore(newFakeClient(nil))
	first := clock.Now()
	must(t, s.RecordInvalid(ctx, ingress, InvalidEntry{Revision: "bad", Reason: "Deployment web not Available", Clusters: []string{"eu-1"}}))
	clock.Advance(time.Minute)
	must(t, s.RecordInvalid(ctx, ingress, InvalidEntry{Revision: "bad", Reason: "another reason", Clusters: []string{"us-1", "eu-1"}}))
	must(t, s.RecordInvalid(ctx, ingress, InvalidEntry{Revision: "worse", Reason: "CRD missing", Clusters: []string{"ap-1"}}))

	ledger, err := s.Ledger(ctx, ingress)
	must(t, err)
	if len(ledger) != 2 {
		t.Fatalf("ledger %+v", ledger)
	}
	bad := ledger[0]
	if bad.Revision != "bad" || bad.Reason != "Deployment web not Available" || !slices.Equal(bad.Clusters, []string{"eu-1", "us-1"}) || !bad.RecordedAt.Equal(first) {
		t.Fatalf("merged entry %+v", bad)
	}
	if ledger[1].Revision != "worse" || !ledger[1].RecordedAt.Equal(clock.Now()) {
		t.Fatalf("second entry %+v", ledger[1])
	}

	must(t, s.ForgetInvalid(ctx, ingress, "bad"))
	must(t, s.ForgetInvalid(ctx, ingress, "bad")) // gone already: fine
	ledger, err = s.Ledger(ctx, ingress)
	must(t, err)
	if len(ledger) != 1 || ledger[0].Revision != "worse" {
		t.Fatalf("after ForgetInvalid: %+v", ledger)
	}
	if err := s.RecordInvalid(ctx, ingress, InvalidEntry{}); err == nil {
		t.Fatalf("entry without a revision accepted")
	}

	s.MaxLedger = 3
	for i := range 5 {
		must(t, s.RecordInvalid(ctx, ingress, InvalidEntry{Revision: fmt.Sprintf("r%d", i), Reason: "x"}))
	}
	ledger, err = s.Ledger(ctx, ingress)
	must(t, err)
	var revs []string
	for _, e := range ledger {
		revs = append(revs, e.Revision)
	}
	if !slices.Equal(revs, []string{"r2", "r3", "r4"}) {
		t.Fatalf("capped ledger %v", revs)
	}
}

// TestConcurrentWritersKeepEachOthersChanges races writers of the ledger and the progress on
// one Secret: every write is guarded by resourceVersion and retried, so nothing is lost.
func TestConcurrentWritersKeepEachOthersChanges(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	for i := range writers {
		wg.Go(func() {
			s, _ := newTestManagementStore(c)
			errs <- s.RecordInvalid(ctx, ingress, InvalidEntry{Revision: "bad", Reason: "boom", Clusters: []string{fmt.Sprintf("c%d", i)}})
		})
	}
	wg.Go(func() {
		s, _ := newTestManagementStore(c)
		errs <- s.SaveProgress(ctx, ingress, Progress{Phase: PhaseRunning, Revision: "bad"})
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	s, _ := newTestManagementStore(c)
	r, err := s.Load(ctx, ingress)
	must(t, err)
	if r.Progress == nil || r.Progress.Phase != PhaseRunning {
		t.Fatalf("progress lost: %+v", r.Progress)
	}
	if len(r.Ledger) != 1 || len(r.Ledger[0].Clusters) != writers {
		t.Fatalf("ledger lost clusters: %+v", r.Ledger)
	}
}
