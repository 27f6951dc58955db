package records

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
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
		!slices.Equal(keysOf(sec.Data), []string{"record"}) || sec.Annotations[AnnotationChunks] != "1" ||
		!bytes.HasPrefix(sec.Data["record"], []byte{0x1f, 0x8b}) {
		t.Fatalf("management Secret: type %q labels %v annotations %v data keys %v", sec.Type, sec.Labels, sec.Annotations, keysOf(sec.Data))
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
			s.unlocked, s.chunkSize = i%2 == 0, 512 // some as separate processes; chunked records
			errs <- s.RecordInvalid(ctx, ingress, InvalidEntry{Revision: "bad", Reason: "boom", Clusters: []string{fmt.Sprintf("c%d", i)}})
		})
	}
	wg.Go(func() {
		s, _ := newTestManagementStore(c)
		s.unlocked, s.chunkSize = true, 512
		errs <- s.SaveProgress(ctx, ingress, Progress{Phase: PhaseRunning, Revision: "bad", Config: bigConfig(t, 4<<10)})
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
	if !bytes.Equal(r.Progress.Config, bigConfig(t, 4<<10)) {
		t.Fatalf("configuration lost")
	}
	checkChunks(t, ctx, c, 2)
}

// bigConfig is a resource configuration holding a bundle of about size bytes that compresses
// poorly: a ConfigMap whose data is base64 of random bytes, as manifests text.
func bigConfig(t testing.TB, size int) json.RawMessage {
	t.Helper()
	raw := make([]byte, size*3/4)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	manifests := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: blob\n  namespace: default\ndata:\n  blob: " + base64.StdEncoding.EncodeToString(raw) + "\n"
	cfg, err := json.Marshal(map[string]any{"name": "big", "namespace": "fleet", "manifests": manifests})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// bigRollout fills a store with a 5 MiB configuration and a full ledger of long reasons, and
// returns what Load must give back.
func bigRollout(t testing.TB, ctx context.Context, s *ManagementStore) *Rollout {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	noise := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	at := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	p := Progress{
		Phase: PhaseRunning, Revision: "big", Wave: 2, Waves: 4, StartedAt: at, UpdatedAt: at, Holder: "me",
		Clusters: map[string]ClusterOutcome{}, Config: bigConfig(t, 5<<20),
	}
	for i := range 200 {
		p.Clusters[fmt.Sprintf("cluster-%03d", i)] = ClusterOutcome{Revision: "big", State: "current", Reason: noise(100), StartedAt: at, FinishedAt: at}
	}
	must(t, s.SaveProgress(ctx, ingress, p))
	var ledger []InvalidEntry
	for i := range 30 {
		e := InvalidEntry{Revision: fmt.Sprintf("bad%03d", i), Reason: noise(MaxReasonLength / 2), Clusters: []string{"a", "b"}, RecordedAt: at}
		must(t, s.RecordInvalid(ctx, ingress, e))
		ledger = append(ledger, e)
	}
	return &Rollout{Progress: &p, Ledger: ledger}
}

func checkRollout(t testing.TB, got, want *Rollout) {
	t.Helper()
	if !bytes.Equal(got.Progress.Config, want.Progress.Config) {
		t.Fatalf("config does not round-trip: %d bytes, want %d", len(got.Progress.Config), len(want.Progress.Config))
	}
	g, w := *got.Progress, *want.Progress
	g.Config, w.Config = nil, nil
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("progress does not round-trip")
	}
	if len(got.Ledger) != len(want.Ledger) {
		t.Fatalf("ledger: %d entries, want %d", len(got.Ledger), len(want.Ledger))
	}
	for i := range want.Ledger {
		if !reflect.DeepEqual(got.Ledger[i], want.Ledger[i]) {
			t.Fatalf("ledger entry %d does not round-trip", i)
		}
	}
}

// chunkSecrets counts the chunk Secrets of ingress's management record.
func chunkSecrets(t testing.TB, ctx context.Context, c client.Client, namespace string) int {
	t.Helper()
	list := &corev1.SecretList{}
	must(t, c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{LabelRollout: ingress.Hash()}, client.HasLabels{LabelChunk}))
	return len(list.Items)
}

// A 5 MiB bundle (poorly compressible) round-trips through the management store, chunked.
func TestManagementBigRecordRoundTrip(t *testing.T) {
	skipUnderRace(t)
	ctx := t.Context()
	c := newFakeClient(nil)
	s, _ := newTestManagementStore(c)
	want := bigRollout(t, ctx, s)
	got, err := s.Load(ctx, ingress)
	must(t, err)
	checkRollout(t, got, want)
	cfg, err := NewManagementStore(c, "").LoadProgress(ctx, ingress)
	must(t, err)
	if !bytes.Equal(cfg.Config, want.Progress.Config) {
		t.Fatalf("stored config does not round-trip")
	}
	sum, err := s.LoadSummary(ctx, ingress)
	must(t, err)
	if sum.Progress.Config != nil || sum.Progress.Wave != want.Progress.Wave || len(sum.Ledger) != len(want.Ledger) {
		t.Fatalf("summary: config %d bytes, wave %d, %d ledger entries", len(sum.Progress.Config), sum.Progress.Wave, len(sum.Ledger))
	}

	checkChunks(t, ctx, c, 5)

	// A smaller record replaces it: the old chunks go.
	must(t, s.SaveProgress(ctx, ingress, Progress{Phase: PhaseSucceeded, Config: json.RawMessage(`{"small":true}`)}))
	must(t, s.ForgetInvalid(ctx, ingress, "bad000"))
	checkChunks(t, ctx, c, 1)
	p, err := s.LoadProgress(ctx, ingress)
	must(t, err)
	if p.Phase != PhaseSucceeded || string(p.Config) != `{"small":true}` {
		t.Fatalf("progress after shrinking: %+v", p)
	}
	must(t, s.Delete(ctx, ingress))
	if n := chunkSecrets(t, ctx, c, DefaultNamespace); n != 0 {
		t.Fatalf("%d chunk Secrets after Delete", n)
	}
}

// Records written before compression (plain "progress" and "ledger" keys) are read, and
// rewritten compressed on the next change.
func TestManagementLegacyRecord(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	must(t, ensureNamespace(ctx, c, DefaultNamespace))
	at := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	progress, err := json.Marshal(Progress{Phase: PhaseFailed, Revision: "aaa", Config: json.RawMessage(`{"x":1}`), UpdatedAt: at})
	must(t, err)
	ledger, err := json.Marshal([]InvalidEntry{{Revision: "aaa", Reason: "boom", Clusters: []string{"eu-1"}, RecordedAt: at}})
	must(t, err)
	must(t, c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: ingress.ObjectName(), Namespace: DefaultNamespace,
			Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelRollout: ingress.Hash()},
			Annotations: map[string]string{AnnotationRolloutKey: ingress.String()},
		},
		Type: RolloutSecretType,
		Data: map[string][]byte{"progress": progress, "ledger": ledger},
	}))
	s, _ := newTestManagementStore(c)
	r, err := s.Load(ctx, ingress)
	must(t, err)
	if r.Progress == nil || r.Progress.Phase != PhaseFailed || string(r.Progress.Config) != `{"x":1}` || len(r.Ledger) != 1 || r.Ledger[0].Reason != "boom" {
		t.Fatalf("legacy record read as %+v %+v", r.Progress, r.Ledger)
	}
	must(t, s.RecordInvalid(ctx, ingress, InvalidEntry{Revision: "bbb", Reason: "bang"}))
	sec := &corev1.Secret{}
	must(t, c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: ingress.ObjectName()}, sec))
	if !slices.Equal(keysOf(sec.Data), []string{"record"}) {
		t.Fatalf("rewritten record has data keys %v", keysOf(sec.Data))
	}
	r, err = s.Load(ctx, ingress)
	must(t, err)
	if r.Progress.Phase != PhaseFailed || string(r.Progress.Config) != `{"x":1}` || len(r.Ledger) != 2 {
		t.Fatalf("after rewrite: %+v %+v", r.Progress, r.Ledger)
	}
}

// A write that loses the race for the head (another process wrote it in between) removes the
// chunks it wrote and tries again; nothing is torn and nothing is left behind. A chunk missing
// under a head is reported, not read as an empty record.
func TestManagementChunkedConflictsAndTears(t *testing.T) {
	ctx := t.Context()
	var conflicts atomic.Int32
	conflicts.Store(2)
	c := newFakeClient(&interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if obj.GetName() == ingress.ObjectName() && conflicts.Add(-1) >= 0 {
				return apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, obj.GetName(), errors.New("injected"))
			}
			return c.Update(ctx, obj, opts...)
		},
	})
	s, _ := newTestManagementStore(c)
	s.chunkSize = 1 << 10
	reason := string(bigConfig(t, 6<<10))
	must(t, s.RecordInvalid(ctx, ingress, InvalidEntry{Revision: "bad", Reason: reason}))
	must(t, s.SaveProgress(ctx, ingress, Progress{Phase: PhaseRunning, Config: bigConfig(t, 8<<10)}))
	must(t, s.SaveProgress(ctx, ingress, Progress{Phase: PhaseSucceeded, Config: bigConfig(t, 4<<10)}))
	if conflicts.Load() >= 0 {
		t.Fatalf("the conflicts were not injected")
	}
	head := checkChunks(t, ctx, c, 8)
	if head.Annotations[AnnotationChunks] == "1" {
		t.Fatalf("the record itself is not chunked")
	}
	if l, err := s.Ledger(ctx, ingress); err != nil || len(l) != 1 || l[0].Reason != reason {
		t.Fatalf("chunked ledger does not round-trip: %v", err)
	}
	p, err := s.LoadProgress(ctx, ingress)
	must(t, err)
	if p.Phase != PhaseSucceeded || !bytes.Equal(p.Config, bigConfig(t, 4<<10)) {
		t.Fatalf("progress after conflicts: %s", p.Phase)
	}

	// A chunk deleted by hand: the read fails, saying so.
	var config configRef
	must(t, json.Unmarshal([]byte(head.Annotations[AnnotationConfig]), &config))
	must(t, c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: managementChunkName(configChunkPrefix(ingress), config.Digest, 2)}}))
	if _, err := s.Load(ctx, ingress); err == nil || !strings.Contains(err.Error(), "chunk 2 of") {
		t.Fatalf("torn record read: %v", err)
	}
	if _, err := s.Ledger(ctx, ingress); err != nil {
		t.Fatalf("the ledger needs no configuration: %v", err)
	}
	must(t, s.Delete(ctx, ingress))
}

// checkChunks checks that ingress's record has exactly the chunk Secrets its head names, at
// least atLeast of them, and returns the head.
func checkChunks(t testing.TB, ctx context.Context, c client.Client, atLeast int) *corev1.Secret {
	t.Helper()
	head := &corev1.Secret{}
	must(t, c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: ingress.ObjectName()}, head))
	main, err := strconv.Atoi(head.Annotations[AnnotationChunks])
	must(t, err)
	var config configRef
	if v := head.Annotations[AnnotationConfig]; v != "" {
		must(t, json.Unmarshal([]byte(v), &config))
	}
	n := chunkSecrets(t, ctx, c, DefaultNamespace)
	if n != main-1+config.Chunks || n < atLeast || len(head.Data["record"]) > ChunkSize {
		t.Fatalf("head names %d chunks and %d of configuration; %d chunk Secrets, want at least %d", main, config.Chunks, n, atLeast)
	}
	t.Logf("record: head, %d more chunk(s), configuration in %d chunk(s)", main-1, config.Chunks)
	return head
}
