package records

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var ingress = Key{Kind: "rollout", Namespace: "fleet", Name: "ingress"}

func testRevision(rev string) Revision {
	return Revision{
		Revision:  rev,
		Manifests: json.RawMessage(`[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-` + rev + `","namespace":"default"}}]`),
		Inventory: []ObjectRef{{Version: "v1", Kind: "ConfigMap", Namespace: "default", Name: "cm-" + rev}},
	}
}

func newTestStore(t *testing.T, c client.Client) *WorkloadStore {
	t.Helper()
	s := NewWorkloadStore(c, "")
	s.Clock = &tickingClock{fakeClock: *newFakeClock()}
	return s
}

func mustState(t *testing.T, s *WorkloadStore, key Key) *State {
	t.Helper()
	st, err := s.Load(t.Context(), key)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return st
}

func expectState(t *testing.T, s *WorkloadStore, key Key, want string) *State {
	t.Helper()
	st := mustState(t, s, key)
	if got := describe(st); got != want {
		t.Fatalf("state:\n got  %s\n want %s", got, want)
	}
	sum, err := s.Summary(t.Context(), key)
	if err != nil {
		t.Fatalf("Summary: %v", err)
	}
	if got := describe(sum); got != want {
		t.Fatalf("summary:\n got  %s\n want %s", got, want)
	}
	return st
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// provisionAndSettle marks rev provisioning then current, as a successful change does.
func provisionAndSettle(t *testing.T, s *WorkloadStore, key Key, rev string) {
	t.Helper()
	must(t, s.MarkProvisioning(t.Context(), key, testRevision(rev)))
	must(t, s.MarkCurrent(t.Context(), key, rev))
}

func TestProvisioningCurrentBackupChain(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	s := newTestStore(t, c)

	expectState(t, s, ingress, "current=- backup=- prov=- invalid=[] superseded=[]")

	must(t, s.MarkProvisioning(ctx, ingress, testRevision("aaa")))
	st := expectState(t, s, ingress, "current=- backup=- prov=aaa invalid=[] superseded=[]")
	if got := st.Provisioning; got.RolloutKey != ingress || got.AppliedAt.IsZero() || got.StateChangedAt.IsZero() ||
		!bytes.Equal(got.Manifests, testRevision("aaa").Manifests) || len(got.Inventory) != 1 || got.Inventory[0].Name != "cm-aaa" {
		t.Fatalf("provisioning record does not round-trip: %+v", got)
	}

	must(t, s.MarkCurrent(ctx, ingress, "aaa"))
	expectState(t, s, ingress, "current=aaa backup=- prov=- invalid=[] superseded=[]")

	provisionAndSettle(t, s, ingress, "bbb")
	expectState(t, s, ingress, "current=bbb backup=aaa prov=- invalid=[] superseded=[]")

	must(t, s.MarkProvisioning(ctx, ingress, testRevision("ccc")))
	// While ccc is applied, bbb is still what the cluster runs and aaa is still the backup.
	st = expectState(t, s, ingress, "current=bbb backup=aaa prov=ccc invalid=[] superseded=[]")
	if st.LastGood().Revision != "bbb" {
		t.Fatalf("LastGood = %s, want bbb", st.LastGood().Revision)
	}
	must(t, s.MarkCurrent(ctx, ingress, "ccc"))
	expectState(t, s, ingress, "current=ccc backup=bbb prov=- invalid=[] superseded=[]")

	// The layout: one typed, labelled Secret per revision in gradual-system.
	list := &corev1.SecretList{}
	must(t, c.List(ctx, list, client.InNamespace(DefaultNamespace)))
	if len(list.Items) != 2 {
		t.Fatalf("%d Secrets, want 2 (aaa deleted: one backup is kept)", len(list.Items))
	}
	sec := &corev1.Secret{}
	name := "gradual.v1.rollout-fleet-ingress." + ingress.Hash() + ".ccc"
	must(t, c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: name}, sec))
	wantLabels := map[string]string{
		LabelManagedBy: "gradual", LabelRollout: ingress.Hash(), LabelRevision: "ccc", LabelState: "current", LabelChunk: "0",
	}
	for k, v := range wantLabels {
		if sec.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, sec.Labels[k], v)
		}
	}
	if sec.Type != RevisionSecretType || sec.Annotations[AnnotationRolloutKey] != "rollout/fleet/ingress" || sec.Annotations[AnnotationChunks] != "1" {
		t.Errorf("Secret type %q, annotations %v", sec.Type, sec.Annotations)
	}
	if !bytes.HasPrefix(sec.Data["record"], []byte{0x1f, 0x8b}) {
		t.Errorf("record data is not gzip")
	}
}

func TestInvalidAndDeliberateRetry(t *testing.T) {
	ctx := t.Context()
	s := newTestStore(t, newFakeClient(nil))
	provisionAndSettle(t, s, ingress, "zzz")
	provisionAndSettle(t, s, ingress, "aaa")
	must(t, s.MarkProvisioning(ctx, ingress, testRevision("bbb")))
	const why = "Deployment default/web: not Available after 5m"
	must(t, s.MarkInvalid(ctx, ingress, "bbb", why))
	// Marked invalid, but its objects are still on the cluster: still provisioning, so an
	// interrupted restore shows as unsettled.
	st := expectState(t, s, ingress, "current=aaa backup=zzz prov=bbb!"+why+" invalid=[] superseded=[]")
	if reason, ok := st.InvalidReason("bbb"); !ok || reason != why {
		t.Fatalf("InvalidReason = %q, %v", reason, ok)
	}
	if got := st.InvalidRevisions(); len(got) != 1 || got["bbb"] != why {
		t.Fatalf("InvalidRevisions = %v", got)
	}
	if st.LastGood().Revision != "aaa" {
		t.Fatalf("LastGood = %s, want aaa", st.LastGood().Revision)
	}
	must(t, s.MarkInvalid(ctx, ingress, "bbb", "a later reason")) // re-run: the first reason stays

	// The change never became current: restoring keeps aaa current and zzz the backup.
	got, err := s.Restored(ctx, ingress)
	must(t, err)
	if got != "aaa" {
		t.Fatalf("Restored = %q, want aaa", got)
	}
	st = expectState(t, s, ingress, "current=aaa backup=zzz prov=- invalid=[bbb:"+why+"] superseded=[]")
	if len(st.Invalid[0].Manifests) == 0 {
		t.Fatalf("invalid record lost its manifests")
	}

	// An invalid revision cannot be made current without a deliberate retry.
	if err := s.MarkCurrent(ctx, ingress, "bbb"); err == nil || !strings.Contains(err.Error(), "recorded invalid") {
		t.Fatalf("MarkCurrent of an invalid revision: %v", err)
	}
	must(t, s.MarkProvisioning(ctx, ingress, testRevision("bbb")))
	st = expectState(t, s, ingress, "current=aaa backup=zzz prov=bbb invalid=[] superseded=[]")
	if _, ok := st.InvalidReason("bbb"); ok {
		t.Fatalf("retried record is still invalid")
	}
	must(t, s.MarkCurrent(ctx, ingress, "bbb"))
	expectState(t, s, ingress, "current=bbb backup=aaa prov=- invalid=[] superseded=[]")

	// Unknown revisions are reported as such.
	if err := s.MarkInvalid(ctx, ingress, "nope", "x"); !errors.Is(err, ErrNoRecord) {
		t.Fatalf("MarkInvalid of an unknown revision: %v", err)
	}
	if err := s.MarkCurrent(ctx, ingress, "nope"); !errors.Is(err, ErrNoRecord) {
		t.Fatalf("MarkCurrent of an unknown revision: %v", err)
	}
}

func TestRollBackCurrentToBackup(t *testing.T) {
	ctx := t.Context()
	s := newTestStore(t, newFakeClient(nil))
	provisionAndSettle(t, s, ingress, "aaa")
	provisionAndSettle(t, s, ingress, "bbb")

	// on_failure = rollback: bbb settled here, but the rollout failed elsewhere.
	must(t, s.MarkRollingBack(ctx, ingress, "bbb"))
	st := expectState(t, s, ingress, "current=- backup=aaa prov=bbb invalid=[] superseded=[]")
	if st.LastGood().Revision != "aaa" {
		t.Fatalf("LastGood = %v, want aaa", st.LastGood())
	}
	must(t, s.MarkRollingBack(ctx, ingress, "bbb")) // again: a re-run after an interruption
	got, err := s.Restored(ctx, ingress)
	must(t, err)
	if got != "aaa" {
		t.Fatalf("Restored = %q, want aaa", got)
	}
	expectState(t, s, ingress, "current=aaa backup=- prov=- invalid=[] superseded=[]")
	got, err = s.Restored(ctx, ingress)
	must(t, err)
	if got != "aaa" {
		t.Fatalf("Restored again = %q, want aaa", got)
	}
	expectState(t, s, ingress, "current=aaa backup=- prov=- invalid=[] superseded=[]")

	// The next success makes aaa the backup again.
	provisionAndSettle(t, s, ingress, "ccc")
	expectState(t, s, ingress, "current=ccc backup=aaa prov=- invalid=[] superseded=[]")

	if err := s.MarkRollingBack(ctx, ingress, "aaa"); err == nil || !strings.Contains(err.Error(), "not current") {
		t.Fatalf("rolling back the backup: %v", err)
	}
}

// TestFailureAfterSettling covers a revision that fails after it became current (a check after
// bake), as the engine records it (invalid, rolling back, restored) and in short (invalid,
// restored).
func TestFailureAfterSettling(t *testing.T) {
	for _, engineOrder := range []bool{true, false} {
		ctx := t.Context()
		s := newTestStore(t, newFakeClient(nil))
		provisionAndSettle(t, s, ingress, "aaa")
		provisionAndSettle(t, s, ingress, "bbb")
		must(t, s.MarkInvalid(ctx, ingress, "bbb", "check failed after bake"))
		st := expectState(t, s, ingress, "current=bbb!check failed after bake backup=aaa prov=- invalid=[] superseded=[]")
		if st.LastGood().Revision != "aaa" {
			t.Fatalf("LastGood = %s, want aaa", st.LastGood().Revision)
		}
		if engineOrder {
			must(t, s.MarkRollingBack(ctx, ingress, "bbb"))
			expectState(t, s, ingress, "current=- backup=aaa prov=bbb!check failed after bake invalid=[] superseded=[]")
		}
		got, err := s.Restored(ctx, ingress)
		must(t, err)
		if got != "aaa" {
			t.Fatalf("Restored = %q, want aaa", got)
		}
		expectState(t, s, ingress, "current=aaa backup=- prov=- invalid=[bbb:check failed after bake] superseded=[]")
	}
}

// A current revision marked invalid is not made the backup when another revision settles.
func TestInvalidCurrentIsNotKeptAsBackup(t *testing.T) {
	ctx := t.Context()
	s := newTestStore(t, newFakeClient(nil))
	provisionAndSettle(t, s, ingress, "aaa")
	provisionAndSettle(t, s, ingress, "bbb")
	must(t, s.MarkInvalid(ctx, ingress, "bbb", "bad"))
	provisionAndSettle(t, s, ingress, "ccc")
	expectState(t, s, ingress, "current=ccc backup=aaa prov=- invalid=[bbb:bad] superseded=[]")
	// Likewise a superseded one.
	must(t, s.MarkProvisioning(ctx, ingress, testRevision("ddd")))
	must(t, s.MarkInvalid(ctx, ingress, "ddd", "worse"))
	must(t, s.MarkProvisioning(ctx, ingress, testRevision("eee")))
	expectState(t, s, ingress, "current=ccc backup=aaa prov=eee invalid=[bbb:bad] superseded=[ddd!worse]")
	must(t, s.MarkCurrent(ctx, ingress, "eee"))
	expectState(t, s, ingress, "current=eee backup=ccc prov=- invalid=[bbb:bad ddd:worse] superseded=[]")
	// A backup marked invalid becomes invalid at once.
	must(t, s.MarkInvalid(ctx, ingress, "ccc", "stale"))
	expectState(t, s, ingress, "current=eee backup=- prov=- invalid=[bbb:bad ddd:worse ccc:stale] superseded=[]")
}

func TestFailedFirstInstallRestoresToNothing(t *testing.T) {
	ctx := t.Context()
	s := newTestStore(t, newFakeClient(nil))
	must(t, s.MarkProvisioning(ctx, ingress, testRevision("aaa")))
	got, err := s.Restored(ctx, ingress)
	must(t, err)
	if got != "" {
		t.Fatalf("Restored = %q, want nothing", got)
	}
	expectState(t, s, ingress, "current=- backup=- prov=- invalid=[] superseded=[]")
}

func TestProvisioningAnotherRevisionSupersedes(t *testing.T) {
	ctx := t.Context()
	s := newTestStore(t, newFakeClient(nil))
	provisionAndSettle(t, s, ingress, "aaa")
	must(t, s.MarkProvisioning(ctx, ingress, testRevision("bbb"))) // interrupted, never settled
	must(t, s.MarkProvisioning(ctx, ingress, testRevision("ccc")))
	st := expectState(t, s, ingress, "current=aaa backup=- prov=ccc invalid=[] superseded=[bbb]")
	if st.Superseded[0].Inventory[0].Name != "cm-bbb" {
		t.Fatalf("superseded record lost its inventory")
	}
	must(t, s.MarkCurrent(ctx, ingress, "ccc"))
	expectState(t, s, ingress, "current=ccc backup=aaa prov=- invalid=[] superseded=[]")
}

func TestReapplyingCurrentOrBackup(t *testing.T) {
	ctx := t.Context()
	s := newTestStore(t, newFakeClient(nil))
	provisionAndSettle(t, s, ingress, "aaa")
	provisionAndSettle(t, s, ingress, "bbb")
	// Drift repair: the current revision applied again.
	provisionAndSettle(t, s, ingress, "bbb")
	expectState(t, s, ingress, "current=bbb backup=aaa prov=- invalid=[] superseded=[]")
	// Going back to the backup's manifests swaps the two.
	must(t, s.MarkProvisioning(ctx, ingress, testRevision("aaa")))
	expectState(t, s, ingress, "current=bbb backup=- prov=aaa invalid=[] superseded=[]")
	must(t, s.MarkCurrent(ctx, ingress, "aaa"))
	expectState(t, s, ingress, "current=aaa backup=bbb prov=- invalid=[] superseded=[]")
}

func TestMaxInvalidKeepsNewest(t *testing.T) {
	ctx := t.Context()
	s := newTestStore(t, newFakeClient(nil))
	s.MaxInvalid = 2
	provisionAndSettle(t, s, ingress, "good")
	for _, rev := range []string{"bad1", "bad2", "bad3"} {
		must(t, s.MarkProvisioning(ctx, ingress, testRevision(rev)))
		must(t, s.MarkInvalid(ctx, ingress, rev, "failed "+rev))
		_, err := s.Restored(ctx, ingress)
		must(t, err)
	}
	expectState(t, s, ingress, "current=good backup=- prov=- invalid=[bad2:failed bad2 bad3:failed bad3] superseded=[]")
}

func TestRolloutsAreKeptApart(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	s := newTestStore(t, c)
	other := Key{Kind: "module-assignment", Namespace: "fleet", Name: "ingress"}
	provisionAndSettle(t, s, ingress, "aaa")
	provisionAndSettle(t, s, other, "aaa")
	provisionAndSettle(t, s, other, "bbb")
	expectState(t, s, ingress, "current=aaa backup=- prov=- invalid=[] superseded=[]")
	expectState(t, s, other, "current=bbb backup=aaa prov=- invalid=[] superseded=[]")

	must(t, s.Delete(ctx, other))
	expectState(t, s, other, "current=- backup=- prov=- invalid=[] superseded=[]")
	expectState(t, s, ingress, "current=aaa backup=- prov=- invalid=[] superseded=[]")
	must(t, s.Delete(ctx, other)) // nothing left: still fine

	// A Secret with a rollout's label but another key is not mixed in: it is skipped, and
	// reported so that the caller can warn.
	must(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: "impostor", Namespace: DefaultNamespace,
		Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelRollout: ingress.Hash(), LabelRevision: "x", LabelChunk: "0"},
		Annotations: map[string]string{AnnotationRolloutKey: "rollout/other/thing"},
	}}))
	st := expectState(t, s, ingress, "current=aaa backup=- prov=- invalid=[] superseded=[]")
	if len(st.Skipped) != 1 || st.Skipped[0].Name != "impostor" || !strings.Contains(st.Skipped[0].Reason, "belongs to") {
		t.Fatalf("Load with an impostor Secret: skipped %+v", st.Skipped)
	}
}

func TestNamesAreValidForAnyKey(t *testing.T) {
	long := strings.Repeat("very-long-name-", 20)
	keys := []Key{
		ingress,
		{Kind: "rollout", Namespace: "fleet", Name: long + "a"},
		{Kind: "rollout", Namespace: "fleet", Name: long + "b"},
		{Kind: "Module_Assignment", Namespace: "", Name: "UPPER.dots_and_underscores"},
		{Kind: "rollout", Namespace: "-", Name: "-"},
	}
	seen := map[string]Key{}
	for _, k := range keys {
		if err := k.Validate(); err != nil {
			t.Fatalf("%v: %v", k, err)
		}
		names := []string{k.ObjectName(), k.revisionSecretName("0123456789ab"), chunkSecretName(k.revisionSecretName("0123456789ab"), 12)}
		for _, n := range names {
			if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
				t.Errorf("%v: name %q: %v", k, n, errs)
			}
		}
		if errs := validation.IsValidLabelValue(k.Hash()); len(errs) > 0 {
			t.Errorf("%v: label %q: %v", k, k.Hash(), errs)
		}
		if prev, dup := seen[k.ObjectName()]; dup {
			t.Errorf("%v and %v share the name %s", prev, k, k.ObjectName())
		}
		seen[k.ObjectName()] = k
		if k.ObjectName() != (Key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}).ObjectName() {
			t.Errorf("name of %v is not deterministic", k)
		}
	}
	if got := ingress.ObjectName(); got != "gradual.rollout-fleet-ingress."+ingress.Hash() {
		t.Errorf("ObjectName = %s", got)
	}
	for _, bad := range []Key{{Name: "x"}, {Kind: "rollout"}, {Kind: "a/b", Name: "x"}} {
		if bad.Validate() == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
	s := newTestStore(t, newFakeClient(nil))
	if err := s.MarkProvisioning(t.Context(), ingress, testRevision("Not_A_Label")); err == nil {
		t.Errorf("revision Not_A_Label accepted")
	}
}

// incompressibleRevision holds n random bytes, base64-encoded in a ConfigMap: about 4n/3 bytes
// of manifests that gzip cannot shrink below n.
func incompressibleRevision(t *testing.T, rev string, n int) Revision {
	t.Helper()
	raw := make([]byte, n)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	cm := []map[string]any{{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "blob", "namespace": "default"},
		"data":     map[string]any{"blob": base64.StdEncoding.EncodeToString(raw)},
	}}
	manifests, err := json.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	return Revision{Revision: rev, Manifests: manifests, Inventory: []ObjectRef{{Version: "v1", Kind: "ConfigMap", Namespace: "default", Name: "blob"}}}
}

func TestLargeRecordsAreChunked(t *testing.T) {
	skipUnderRace(t)
	ctx := t.Context()
	c := newFakeClient(nil)
	s := newTestStore(t, c)
	big := incompressibleRevision(t, "big", 1536<<10) // 1.5 MiB of entropy: two chunks
	must(t, s.MarkProvisioning(ctx, ingress, big))

	list := &corev1.SecretList{}
	must(t, c.List(ctx, list, client.InNamespace(DefaultNamespace)))
	if len(list.Items) != 2 {
		t.Fatalf("%d Secrets for a 1.5 MiB record, want 2", len(list.Items))
	}
	for _, sec := range list.Items {
		size := 0
		for _, v := range sec.Data {
			size += len(v)
		}
		if size > ChunkSize {
			t.Errorf("Secret %s holds %d bytes, more than a chunk", sec.Name, size)
		}
		if sec.Labels[LabelChunk] != "0" && sec.Labels[LabelState] != "" {
			t.Errorf("chunk %s carries a state label", sec.Name)
		}
	}
	st := expectState(t, s, ingress, "current=- backup=- prov=big invalid=[] superseded=[]")
	if !bytes.Equal(st.Provisioning.Manifests, big.Manifests) {
		t.Fatalf("chunked manifests do not round-trip")
	}

	// Transitions relabel the head only; the record stays whole.
	must(t, s.MarkCurrent(ctx, ingress, "big"))
	provisionAndSettle(t, s, ingress, "small")
	st = expectState(t, s, ingress, "current=small backup=big prov=- invalid=[] superseded=[]")
	if !bytes.Equal(st.Backup.Manifests, big.Manifests) {
		t.Fatalf("chunked backup does not round-trip")
	}

	// A torn record (a chunk lost) is reported, naming the chunk.
	head := ingress.revisionSecretName("big")
	must(t, c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: chunkSecretName(head, 1)}}))
	if _, err := s.Load(ctx, ingress); err == nil || !strings.Contains(err.Error(), "chunk 1 of 2 is missing") {
		t.Fatalf("Load of a torn record: %v", err)
	}
	// Writing the record again repairs it.
	must(t, s.MarkProvisioning(ctx, ingress, big))
	st = expectState(t, s, ingress, "current=small backup=- prov=big invalid=[] superseded=[]")
	if !bytes.Equal(st.Provisioning.Manifests, big.Manifests) {
		t.Fatalf("rewritten record does not round-trip")
	}

	// Delete removes chunks too.
	must(t, s.Delete(ctx, ingress))
	must(t, c.List(ctx, list, client.InNamespace(DefaultNamespace)))
	if len(list.Items) != 0 {
		t.Fatalf("%d Secrets left after Delete", len(list.Items))
	}
}

func TestChunkRewritesAndOrphans(t *testing.T) {
	ctx := t.Context()
	c := newFakeClient(nil)
	s := newTestStore(t, c)
	s.chunkSize = 256 // tiny chunks: many of them
	count := func() int {
		list := &corev1.SecretList{}
		must(t, c.List(ctx, list, client.InNamespace(DefaultNamespace)))
		return len(list.Items)
	}
	rev := incompressibleRevision(t, "many", 4000)
	must(t, s.MarkProvisioning(ctx, ingress, rev))
	many := count()
	if many < 10 {
		t.Fatalf("%d Secrets, want many chunks", many)
	}
	// The same revision written with less content (not something a content hash allows, but
	// the store must not leave stale chunks behind): the extra chunks go.
	small := testRevision("many")
	must(t, s.MarkProvisioning(ctx, ingress, small))
	if n := count(); n != 1 {
		t.Fatalf("%d Secrets after rewriting smaller, want 1", n)
	}
	st := expectState(t, s, ingress, "current=- backup=- prov=many invalid=[] superseded=[]")
	if !bytes.Equal(st.Provisioning.Manifests, small.Manifests) {
		t.Fatalf("rewritten record does not round-trip")
	}

	// Chunks whose head is gone (an interrupted write) are invisible and swept by the next
	// transition.
	must(t, s.MarkProvisioning(ctx, ingress, incompressibleRevision(t, "orphan", 4000)))
	must(t, c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: ingress.revisionSecretName("orphan")}}))
	expectState(t, s, ingress, "current=- backup=- prov=- invalid=[] superseded=[many]")
	must(t, s.MarkProvisioning(ctx, ingress, testRevision("next")))
	must(t, s.MarkCurrent(ctx, ingress, "next"))
	if n := count(); n != 1 {
		t.Fatalf("%d Secrets after MarkCurrent, want 1 (orphan chunks and superseded record swept)", n)
	}
}

// TestInterruptedTransitionsConverge kills each transition at every write it makes, re-runs it,
// and checks that the records end as an uninterrupted run leaves them, with never two current
// records on the way.
func TestInterruptedTransitionsConverge(t *testing.T) {
	skipUnderRace(t)
	type step struct {
		name string
		run  func(ctx context.Context, s *WorkloadStore) error
	}
	provision := func(rev string) step {
		return step{"provision " + rev, func(ctx context.Context, s *WorkloadStore) error {
			return s.MarkProvisioning(ctx, ingress, testRevision(rev))
		}}
	}
	current := func(rev string) step {
		return step{"current " + rev, func(ctx context.Context, s *WorkloadStore) error { return s.MarkCurrent(ctx, ingress, rev) }}
	}
	invalid := func(rev string) step {
		return step{"invalid " + rev, func(ctx context.Context, s *WorkloadStore) error { return s.MarkInvalid(ctx, ingress, rev, "bad") }}
	}
	rollingBack := func(rev string) step {
		return step{"rolling back " + rev, func(ctx context.Context, s *WorkloadStore) error { return s.MarkRollingBack(ctx, ingress, rev) }}
	}
	restored := step{"restored", func(ctx context.Context, s *WorkloadStore) error { _, err := s.Restored(ctx, ingress); return err }}
	del := step{"delete", func(ctx context.Context, s *WorkloadStore) error { return s.Delete(ctx, ingress) }}

	steps := []step{
		provision("aaa"), current("aaa"),
		provision("bbb"), current("bbb"),
		provision("ccc"), current("ccc"),
		provision("ddd"), invalid("ddd"), restored,
		provision("eee"), provision("fff"), current("fff"),
		rollingBack("fff"), restored,
		provision("ggg"), current("ggg"),
		invalid("ggg"), rollingBack("ggg"), restored,
		provision("hhh"), current("hhh"), invalid("hhh"), restored,
		provision("iii"), invalid("iii"), provision("jjj"), current("jjj"),
		invalid("hhh"), // settled invalid already: nothing changes
		del,
	}
	// The reference: every step run once, uninterrupted.
	var want []string
	{
		s := newTestStore(t, newFakeClient(nil))
		for _, st := range steps {
			must(t, st.run(t.Context(), s))
			want = append(want, describe(mustState(t, s, ingress)))
		}
	}

	for i, st := range steps {
		for n := 0; ; n++ {
			ctx := t.Context()
			fa := &failAfter{n: -1}
			fa.check = func(ctx context.Context, c client.WithWatch) {
				counts, err := currentCount(ctx, c, DefaultNamespace)
				if err != nil {
					t.Fatal(err)
				}
				for h, k := range counts {
					if k > 1 {
						t.Fatalf("step %q interrupted after %d writes: %d current records of %s", st.name, n, k, h)
					}
				}
			}
			s := newTestStore(t, newFakeClient(fa.funcs()))
			for _, prev := range steps[:i] {
				must(t, prev.run(ctx, s))
			}
			fa.mu.Lock()
			fa.n, fa.writes = n, 0
			fa.mu.Unlock()
			err := st.run(ctx, s)
			fa.mu.Lock()
			fa.n = -1
			fa.mu.Unlock()
			if err == nil {
				if got := describe(mustState(t, s, ingress)); got != want[i] {
					t.Fatalf("step %q uninterrupted: %s, want %s", st.name, got, want[i])
				}
				break // n exceeds the writes this step makes: every interruption point was tried
			}
			if !errors.Is(err, errInjected) {
				t.Fatalf("step %q interrupted after %d writes: unexpected error %v", st.name, n, err)
			}
			if err := st.run(ctx, s); err != nil {
				t.Fatalf("step %q re-run after an interruption after %d writes: %v", st.name, n, err)
			}
			if got := describe(mustState(t, s, ingress)); got != want[i] {
				t.Fatalf("step %q re-run after an interruption after %d writes:\n got  %s\n want %s", st.name, n, got, want[i])
			}
		}
	}
}

// TestTransitionRetriesOnConflict has another writer touch a record between a transition's read
// and its write: the write must be refused (resourceVersion) and the transition start over.
func TestTransitionRetriesOnConflict(t *testing.T) {
	ctx := t.Context()
	var interfered, conflicts int
	funcs := &interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if interfered == 0 {
				interfered++
				sec := &corev1.Secret{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), sec); err != nil {
					return err
				}
				sec.Annotations["someone-else"] = "was here"
				if err := c.Update(ctx, sec); err != nil {
					return err
				}
			}
			err := c.Patch(ctx, obj, patch, opts...)
			if apierrors.IsConflict(err) {
				conflicts++
			}
			return err
		},
	}
	s := newTestStore(t, newFakeClient(funcs))
	must(t, s.MarkProvisioning(ctx, ingress, testRevision("aaa")))
	must(t, s.MarkCurrent(ctx, ingress, "aaa"))
	if conflicts != 1 {
		t.Fatalf("%d conflicts, want 1: a stale write was not refused", conflicts)
	}
	expectState(t, s, ingress, "current=aaa backup=- prov=- invalid=[] superseded=[]")
}

// Clusters whose kubeconfigs reach one API server share its records, and a wave marks the same
// revision provisioning from each of them at once: once it is marked, the others only move its
// time, with a patch that carries no resourceVersion, so they cannot conflict with one another.
func TestMarkProvisioningAgainCannotConflict(t *testing.T) {
	ctx := t.Context()
	var again []string
	marked := false
	c := newFakeClient(&interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if marked {
				data, err := patch.Data(obj)
				if err != nil {
					return err
				}
				again = append(again, string(data))
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	s := newTestStore(t, c)
	must(t, s.MarkProvisioning(ctx, ingress, testRevision("aaa")))
	first := mustState(t, s, ingress).Provisioning.AppliedAt
	marked = true
	must(t, s.MarkProvisioning(ctx, ingress, testRevision("aaa")))
	if len(again) != 1 || strings.Contains(again[0], "resourceVersion") || strings.Contains(again[0], "labels") || !strings.Contains(again[0], AnnotationAppliedAt) {
		t.Errorf("marking a revision already provisioning patched %q, want one patch of its applied-at alone, without a resourceVersion", again)
	}
	st := expectState(t, s, ingress, "current=- backup=- prov=aaa invalid=[] superseded=[]")
	if !st.Provisioning.AppliedAt.After(first) {
		t.Errorf("applied-at %s, want after %s", st.Provisioning.AppliedAt, first)
	}
}

// Clusters whose kubeconfigs reach one API server share its records; when each renders the
// revision with values of its own, each rewrites the record, all in one wave. A writer that
// replaced the record between this one's read and its write must not make it start over: on
// the scale bed a hundred of them ran out of retries. Here someone else rewrites the record
// before every one of this writer's replaces.
func TestRecordReplaceRacingAnotherClusterSucceeds(t *testing.T) {
	ctx := t.Context()
	var updates int
	c := newFakeClient(&interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			updates++
			other := &corev1.Secret{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), other); err != nil {
				return err
			}
			other.Annotations["another-cluster"] = strconv.Itoa(updates)
			if err := c.Update(ctx, other); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
	})
	s := newTestStore(t, c)
	must(t, s.MarkProvisioning(ctx, ingress, testRevision("aaa")))
	mine := testRevision("aaa")
	mine.Manifests = json.RawMessage(`[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-aaa","namespace":"default"},"data":{"value":"mine"}}]`)
	must(t, s.MarkProvisioning(ctx, ingress, mine))
	if updates != 1 {
		t.Errorf("%d replaces, want 1: a replace raced by another writer was retried", updates)
	}
	st := expectState(t, s, ingress, "current=- backup=- prov=aaa invalid=[] superseded=[]")
	if !strings.Contains(string(st.Provisioning.Manifests), `"mine"`) {
		t.Errorf("the record holds %s, want this writer's manifests", st.Provisioning.Manifests)
	}
}

// TestSummariesAreSummaryOfEachKey: Summaries reads many keys' records with one list of the
// namespace, and gives each key what Summary gives it: its own records, skipped impostors
// included, an empty State for a key without records, and no record of a key not asked for.
func TestSummariesAreSummaryOfEachKey(t *testing.T) {
	ctx := t.Context()
	var lists int
	c := newFakeClient(&interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		lists++
		return c.List(ctx, list, opts...)
	}})
	s := newTestStore(t, c)
	a := Key{Kind: "rollout", Namespace: "fleet", Name: "web@c1"}
	b := Key{Kind: "rollout", Namespace: "fleet", Name: "web@c2"}
	none := Key{Kind: "rollout", Namespace: "fleet", Name: "web@c3"}
	provisionAndSettle(t, s, a, "aaa")
	provisionAndSettle(t, s, b, "aaa")
	provisionAndSettle(t, s, b, "bbb")
	provisionAndSettle(t, s, ingress, "zzz") // another rollout's, in the same namespace
	must(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: "impostor", Namespace: DefaultNamespace,
		Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelRollout: a.Hash(), LabelRevision: "x", LabelChunk: "0"},
		Annotations: map[string]string{AnnotationRolloutKey: "rollout/other/thing"},
	}}))
	lists = 0
	states, errs, err := s.Summaries(ctx, []Key{a, b, none})
	if err != nil || len(errs) != 0 {
		t.Fatalf("Summaries: %v %v", err, errs)
	}
	if lists != 1 {
		t.Fatalf("%d lists for 3 keys, want 1", lists)
	}
	for key, want := range map[Key]string{
		a:    "current=aaa backup=- prov=- invalid=[] superseded=[]",
		b:    "current=bbb backup=aaa prov=- invalid=[] superseded=[]",
		none: "current=- backup=- prov=- invalid=[] superseded=[]",
	} {
		if got := describe(states[key]); got != want {
			t.Errorf("%s: %s, want %s", key, got, want)
		}
		sum, err := s.Summary(ctx, key)
		must(t, err)
		if describe(sum) != describe(states[key]) || len(sum.Skipped) != len(states[key].Skipped) {
			t.Errorf("%s: Summaries %s (%d skipped), Summary %s (%d skipped)", key, describe(states[key]), len(states[key].Skipped), describe(sum), len(sum.Skipped))
		}
	}
	if len(states[a].Skipped) != 1 || states[a].Skipped[0].Name != "impostor" {
		t.Errorf("the impostor is not reported skipped: %+v", states[a].Skipped)
	}
	if _, ok := states[ingress]; ok {
		t.Error("a key not asked for was summarised")
	}
}
