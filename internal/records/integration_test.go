package records

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// TestAgainstAPIServer runs the stores and the Lease against a real kube-apiserver: the test
// bed's management cluster alone (no workload clusters are needed: a workload store is just a
// client). It needs the toolchain from `make tools`.
func TestAgainstAPIServer(t *testing.T) {
	if _, err := testbed.ToolchainFromEnv(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	if testing.Short() {
		t.Skip("skipping in -short mode: starts a control plane")
	}
	f := testbed.Start(t, testbed.Options{})
	cfg, err := f.Management.RESTConfig()
	must(t, err)
	// Clients with core types only, as the provider's are: Leases must work without
	// coordination.k8s.io in the scheme.
	newClient := func(t *testing.T) client.Client {
		t.Helper()
		s := runtime.NewScheme()
		must(t, corev1.AddToScheme(s))
		c, err := client.New(rest.CopyConfig(cfg), client.Options{Scheme: s})
		must(t, err)
		return c
	}
	c := newClient(t)

	t.Run("workload records: chain, chunking, restore, namespace created", func(t *testing.T) {
		ctx := t.Context()
		s := NewWorkloadStore(c, "records-workload")
		provision := func(rev Revision) {
			t.Helper()
			must(t, s.MarkProvisioning(ctx, ingress, rev))
		}
		provision(testRevision("aaa"))
		must(t, s.MarkCurrent(ctx, ingress, "aaa"))
		ns := &corev1.Namespace{}
		must(t, c.Get(ctx, client.ObjectKey{Name: "records-workload"}, ns))

		// 1.5 MiB of entropy: one Secret cannot hold it (the API server refuses), two can.
		big := incompressibleRevision(t, "big", 1536<<10)
		tooBig := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "too-big", Namespace: "records-workload"},
			Data:       map[string][]byte{"x": big.Manifests},
		}
		if err := c.Create(ctx, tooBig); err == nil {
			t.Fatalf("the API server took a %d-byte Secret: the chunking test proves nothing", len(big.Manifests))
		} else {
			t.Logf("a single %d-byte Secret is refused: %v", len(big.Manifests), shorten(err.Error()))
		}
		provision(big)
		must(t, s.MarkCurrent(ctx, ingress, "big"))
		st, err := s.Load(ctx, ingress)
		must(t, err)
		if got := describe(st); got != "current=big backup=aaa prov=- invalid=[] superseded=[]" {
			t.Fatalf("state %s", got)
		}
		if !bytes.Equal(st.Current.Manifests, big.Manifests) {
			t.Fatalf("chunked record does not round-trip through the API server")
		}

		provision(testRevision("bad"))
		must(t, s.MarkInvalid(ctx, ingress, "bad", "Deployment default/web: not Available"))
		got, err := s.Restored(ctx, ingress)
		must(t, err)
		if got != "big" {
			t.Fatalf("Restored = %q", got)
		}
		must(t, s.MarkRollingBack(ctx, ingress, "big"))
		if got, err = s.Restored(ctx, ingress); err != nil || got != "aaa" {
			t.Fatalf("Restored after rolling back = %q, %v", got, err)
		}
		sum, err := s.Summary(ctx, ingress)
		must(t, err)
		if got := describe(sum); got != "current=aaa backup=- prov=- invalid=[bad:Deployment default/web: not Available] superseded=[]" {
			t.Fatalf("summary %s", got)
		}
		must(t, s.Delete(ctx, ingress))
		list := &corev1.SecretList{}
		must(t, c.List(ctx, list, client.InNamespace("records-workload"), client.MatchingLabels{LabelManagedBy: ManagedBy}))
		if len(list.Items) != 0 {
			t.Fatalf("%d Secrets left after Delete", len(list.Items))
		}
	})

	t.Run("a stale metadata patch is a conflict", func(t *testing.T) {
		ctx := t.Context()
		s := NewWorkloadStore(c, "records-workload")
		must(t, s.MarkProvisioning(ctx, ingress, testRevision("aaa")))
		recs, err := s.listMeta(ctx, ingress)
		must(t, err)
		stale := recs["aaa"]
		// Another writer moves the record on.
		must(t, s.MarkCurrent(ctx, ingress, "aaa"))
		err = s.patchMeta(ctx, stale.head, map[string]any{LabelState: string(StateSuperseded)}, nil)
		if !apierrors.IsConflict(err) {
			t.Fatalf("patch with a stale resourceVersion: %v, want a conflict", err)
		}
		must(t, s.Delete(ctx, ingress))
	})

	t.Run("management records: racing writers lose nothing", func(t *testing.T) {
		ctx := t.Context()
		const writers = 6
		var wg sync.WaitGroup
		errs := make(chan error, 2*writers)
		for i := range writers {
			cl := newClient(t) // separate clients, as separate processes would have
			wg.Go(func() {
				s := NewManagementStore(cl, "")
				s.unlocked = true // as separate processes: conflicts on the head
				errs <- s.RecordInvalid(ctx, ingress, InvalidEntry{Revision: "bad", Reason: "boom", Clusters: []string{fmt.Sprintf("c%d", i)}})
				errs <- s.SaveProgress(ctx, ingress, Progress{Phase: PhaseRunning, Revision: "bad", Wave: i})
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			must(t, err)
		}
		s := NewManagementStore(c, "")
		r, err := s.Load(ctx, ingress)
		must(t, err)
		if r.Progress == nil || len(r.Ledger) != 1 || len(r.Ledger[0].Clusters) != writers {
			t.Fatalf("after racing writers: progress %+v ledger %+v", r.Progress, r.Ledger)
		}
		must(t, s.ForgetInvalid(ctx, ingress, "bad"))
		if l, err := s.Ledger(ctx, ingress); err != nil || len(l) != 0 {
			t.Fatalf("ledger after ForgetInvalid: %v, %v", l, err)
		}
		must(t, s.Delete(ctx, ingress))
	})

	t.Run("management records: a 5 MiB bundle round-trips, chunked", func(t *testing.T) {
		skipUnderRace(t)
		ctx := t.Context()
		s := NewManagementStore(c, "")
		start := time.Now()
		want := bigRollout(t, ctx, s)
		got, err := s.Load(ctx, ingress)
		must(t, err)
		checkRollout(t, got, want)
		checkChunks(t, ctx, c, 5)
		t.Logf("saved and loaded in %s", time.Since(start).Round(time.Millisecond))
		// Changing the progress, not the configuration, leaves the configuration's chunks alone.
		head := &corev1.Secret{}
		must(t, c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: ingress.ObjectName()}, head))
		p := *want.Progress
		p.Wave = 3
		must(t, s.SaveProgress(ctx, ingress, p))
		after := &corev1.Secret{}
		must(t, c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: ingress.ObjectName()}, after))
		if after.Annotations[AnnotationConfig] != head.Annotations[AnnotationConfig] {
			t.Fatalf("configuration rewritten by a progress write")
		}
		must(t, s.Delete(ctx, ingress))
		if n := chunkSecrets(t, ctx, c, DefaultNamespace); n != 0 {
			t.Fatalf("%d chunk Secrets after Delete", n)
		}
	})

	t.Run("records someone else wrote are not read; an earlier version's are", func(t *testing.T) {
		ctx := t.Context()
		key := Key{Kind: "rollout", Namespace: "fleet", Name: "writers"}
		// An earlier version: no field manager, the provider's user agent.
		legacyCfg := rest.CopyConfig(cfg)
		legacyCfg.UserAgent = "terraform-provider-gradual/v0.1.0"
		legacyClient, err := client.New(legacyCfg, client.Options{Scheme: c.Scheme()})
		must(t, err)
		old := &WorkloadStore{c: legacyClient, namespace: DefaultNamespace, chunkSize: ChunkSize, limits: revisionLimits}
		must(t, old.MarkProvisioning(ctx, key, testRevision("aaa")))
		must(t, old.MarkCurrent(ctx, key, "aaa"))
		managers := func(name string) []string {
			t.Helper()
			sec := &corev1.Secret{}
			must(t, c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: name}, sec))
			var out []string
			for _, e := range sec.ManagedFields {
				out = append(out, e.Manager+"/"+string(e.Operation))
			}
			return out
		}
		if got := managers(key.revisionSecretName("aaa")); !slices.Equal(got, []string{"terraform-provider-gradual/Update"}) {
			t.Fatalf("an earlier version's record is managed by %v, want the user agent's first part", got)
		}
		s := NewWorkloadStore(c, "")
		s.limits.secretData = 64 << 10
		provisionAndSettle(t, s, key, "bbb")
		st, err := s.Load(ctx, key)
		must(t, err)
		if got := describe(st); got != "current=bbb backup=aaa prov=- invalid=[] superseded=[]" || st.Backup.Manifests == nil || len(st.Skipped) != 0 {
			t.Fatalf("records of an earlier version and this one: %s, skipped %v", got, st.Skipped)
		}
		if got := managers(key.revisionSecretName("bbb")); !slices.Equal(got, []string{RecordsFieldManager + "/Update"}) {
			t.Fatalf("a record of this version is managed by %v", got)
		}

		// Planted with the record's very name, labels and annotation: by kubectl create, by a
		// client that names no manager (the API server takes the test binary's user agent), and
		// an oversized one by kubectl.
		planted := plant(t, c, key, key.String(), "zzz", StateInvalid, payloadOf(t, key, testRevision("zzz")), client.FieldOwner("kubectl-create"))
		anonymous := plant(t, c, key, key.String(), "yyy", StateSuperseded, payloadOf(t, key, testRevision("yyy")))
		bigByKubectl := plant(t, c, key, key.String(), "xxx", StateInvalid, payloadOf(t, key, incompressibleRevision(t, "xxx", 100<<10)), client.FieldOwner("kubectl-create"))
		// Oversized, under our own manager's name: the bounds still hold.
		bigByUs := plant(t, c, key, key.String(), "www", StateInvalid, payloadOf(t, key, incompressibleRevision(t, "www", 100<<10)), client.FieldOwner(RecordsFieldManager))
		// The provider's invalid record, edited by hand since.
		must(t, s.MarkProvisioning(ctx, key, testRevision("bad")))
		must(t, s.MarkInvalid(ctx, key, "bad", "boom"))
		_, err = s.Restored(ctx, key)
		must(t, err)
		edited := key.revisionSecretName("bad")
		edit(t, c, DefaultNamespace, edited, "kubectl-edit", `{"metadata":{"annotations":{"gradual.dev/reason":"nothing"}}}`)
		if got := managers(edited); !slices.Contains(got, "kubectl-edit/Update") {
			t.Fatalf("managers after kubectl-edit: %v", got)
		}

		st, err = s.Load(ctx, key)
		must(t, err)
		if got := describe(st); got != "current=bbb backup=aaa prov=- invalid=[www:planted] superseded=[]" {
			t.Fatalf("state %s", got)
		}
		reasons := map[string]string{}
		for _, sk := range st.Skipped {
			reasons[sk.Name] = sk.String()
		}
		for name, want := range map[string]string{
			planted:      "written by kubectl-create, not by the provider",
			anonymous:    "written by records.test, not by the provider",
			bigByKubectl: "written by kubectl-create, not by the provider",
			bigByUs:      "more than the 65536",
			edited:       "written by kubectl-edit, not by the provider",
		} {
			if !strings.Contains(reasons[name], want) || !strings.Contains(reasons[name], name) {
				t.Errorf("skipped %s: %q, want it named, saying %q", name, reasons[name], want)
			}
		}
		if len(reasons) != 5 {
			t.Errorf("skipped %v", st.Skipped)
		}

		// The current record relabelled by hand: no read goes on without it.
		edit(t, c, DefaultNamespace, key.revisionSecretName("bbb"), "kubectl-label", `{"metadata":{"labels":{"gradual.dev/state":"backup"}}}`)
		_, err = s.Summary(ctx, key)
		failsNaming(t, "Summary", err, key.revisionSecretName("bbb"), "kubectl-label")

		// The management record: an earlier version's is read; edited by hand, it is not.
		oldMgmt := &ManagementStore{c: legacyClient, namespace: DefaultNamespace, chunkSize: ChunkSize}
		must(t, oldMgmt.RecordInvalid(ctx, key, InvalidEntry{Revision: "bad", Reason: "boom"}))
		m := NewManagementStore(c, "")
		must(t, m.SaveProgress(ctx, key, Progress{Phase: PhaseFailed, Revision: "bad"}))
		if l, err := m.Ledger(ctx, key); err != nil || len(l) != 1 {
			t.Fatalf("ledger of an earlier version: %v, %v", l, err)
		}
		edit(t, c, DefaultNamespace, key.ObjectName(), "kubectl-edit", `{"data":{"record":null,"ledger":"W10="}}`)
		_, err = m.Ledger(ctx, key)
		failsNaming(t, "Ledger", err, key.ObjectName(), "kubectl-edit")
		failsNaming(t, "Delete", m.Delete(ctx, key), key.ObjectName(), "kubectl-edit")

		for _, name := range []string{planted, anonymous, bigByKubectl, bigByUs, edited, key.revisionSecretName("aaa"), key.revisionSecretName("bbb"), key.ObjectName()} {
			must(t, c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: name}}))
		}
	})

	t.Run("lease: racing holders, observed expiry, takeover, renew, release", func(t *testing.T) {
		ctx := t.Context()
		const d = 15 * time.Second
		winner, losers := raceAcquire(t, func() client.Client { return newClient(t) }, "records-mgmt", 4, d, newFakeClock())
		if len(losers) != 3 {
			t.Fatalf("%d losers", len(losers))
		}
		t.Logf("winner %s; a loser was told: %v", winner.Holder(), losers[0])
		if !strings.Contains(losers[0].Error(), "is being applied by "+winner.Holder()) {
			t.Fatalf("loser's error: %v", losers[0])
		}
		runCtx, cancel := winner.Fence(ctx)
		defer cancel()

		// The winner "dies" (its clock, shared with the racers, stands still): a successor takes
		// over after watching the Lease unchanged for its duration, by the successor's clock.
		clock := newFakeClock()
		clock.Advance(-time.Hour) // skew does not matter
		ch := make(chan acquired, 1)
		go func() {
			h, err := Acquire(ctx, c, "records-mgmt", ingress, "successor", d, clock)
			ch <- acquired{h, err}
		}()
		clock.step(t, 1, d+takeoverMargin(d)-time.Second, time.Second)
		stillWaiting(t, ch, clock)
		clock.step(t, 1, time.Second, time.Second)
		next := receive(t, ch)
		must(t, next.err)
		if err := winner.Renew(ctx); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("renew by the expired holder: %v", err)
		}
		if cause := cancelled(t, runCtx); !errors.Is(cause, ErrLeaseLost) {
			t.Fatalf("winner's run context: %v", cause)
		}
		must(t, winner.Release(ctx))

		// A third watches while the successor renews: refused.
		third := newFakeClock()
		ch = make(chan acquired, 1)
		go func() {
			h, err := Acquire(ctx, c, "records-mgmt", ingress, "third", d, third)
			ch <- acquired{h, err}
		}()
		third.waitSleepers(t, 1)
		clock.Advance(time.Second) // a renewal writes a new renew time (an unchanged object is no write)
		must(t, next.h.Renew(ctx))
		third.step(t, 1, pollInterval(d), time.Second)
		var held *HeldError
		if r := receive(t, ch); !errors.As(r.err, &held) || held.Holder != "successor" {
			t.Fatalf("a renewed lease was taken: %v", r.err)
		}
		must(t, next.h.Release(ctx))
		h, err := Acquire(ctx, c, "records-mgmt", ingress, "third", d, third)
		must(t, err)
		must(t, h.Release(ctx))
	})
}

func shorten(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
