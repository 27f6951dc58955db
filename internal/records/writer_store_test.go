package records

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// newTrackingClient is a fake client that records and returns managedFields, as an API server
// does.
func newTrackingClient() client.WithWatch {
	return fake.NewClientBuilder().WithScheme(testScheme()).WithReturnManagedFields().Build()
}

// edit merge-patches Secret name as manager would (kubectl-edit, kubectl-label).
func edit(t testing.TB, c client.Client, namespace, name, manager, patch string) {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	must(t, c.Patch(context.Background(), sec, client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner(manager)))
}

// failsNaming checks that err names Secret name and its writer.
func failsNaming(t *testing.T, what string, err error, name, writer string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "written by "+writer+", not by the provider") {
		t.Errorf("%s: %v, want an error naming Secret %s written by %s", what, err, name, writer)
	}
}

// TestRecordsWrittenBySomeoneElse: a Secret with a record's very name, labels and annotation
// that someone other than the provider wrote is not read, whatever it says: an invalid or
// superseded one is skipped, naming its writer; a current, backup or provisioning one fails the
// reads, naming it. Neither is ever changed or deleted.
func TestRecordsWrittenBySomeoneElse(t *testing.T) {
	ctx := t.Context()
	c := newTrackingClient()
	s := newTestStore(t, c)
	provisionAndSettle(t, s, ingress, "aaa")
	provisionAndSettle(t, s, ingress, "bbb")

	// Planted: a fake invalid entry, the newest, as kubectl create makes it.
	name := plant(t, c, ingress, ingress.String(), "zzz", StateInvalid, payloadOf(t, ingress, testRevision("zzz")), client.FieldOwner("kubectl-create"))
	st := expectState(t, s, ingress, "current=bbb backup=aaa prov=- invalid=[] superseded=[]")
	if got := skippedNames(t, st, "written by kubectl-create, not by the provider"); !slices.Equal(got, []string{name}) {
		t.Fatalf("skipped %v, want [%s]", got, name)
	}
	st, err := s.LoadCurrent(ctx, ingress)
	must(t, err)
	if st.Current == nil || st.Current.Revision != "bbb" || st.Current.Manifests == nil || len(st.Skipped) != 1 {
		t.Fatalf("LoadCurrent: %s, skipped %v", describe(st), st.Skipped)
	}
	// Another rollout's records, all planted: not a key of the namespace.
	other := Key{Kind: "rollout", Namespace: "fleet", Name: "other"}
	plant(t, c, other, other.String(), "ooo", StateCurrent, payloadOf(t, other, testRevision("ooo")), client.FieldOwner("kubectl-create"))
	if keys, err := s.Keys(ctx); err != nil || !slices.Equal(keys, []Key{ingress}) {
		t.Fatalf("Keys = %v, %v: want only %v", keys, err, ingress)
	}
	// Transitions, pruning of invalid records and Delete leave it alone.
	s.MaxInvalid = 1
	must(t, s.MarkProvisioning(ctx, ingress, testRevision("ccc")))
	must(t, s.MarkInvalid(ctx, ingress, "ccc", "failed"))
	if _, err := s.Restored(ctx, ingress); err != nil {
		t.Fatal(err)
	}
	must(t, s.Delete(ctx, ingress))
	planted := &corev1.Secret{}
	must(t, c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: name}, planted))
	if planted.Labels[LabelState] != string(StateInvalid) || planted.Annotations[AnnotationReason] != "planted" {
		t.Fatalf("the planted record was changed: %v %v", planted.Labels, planted.Annotations)
	}
	// Writing that very revision does not replace it.
	err = s.MarkProvisioning(ctx, ingress, testRevision("zzz"))
	failsNaming(t, "MarkProvisioning over the planted record", err, name, "kubectl-create")

	// Planted as the current record: every read fails, naming it, and so do the transitions.
	c = newTrackingClient()
	s = newTestStore(t, c)
	provisionAndSettle(t, s, ingress, "aaa")
	name = plant(t, c, ingress, ingress.String(), "yyy", StateCurrent, payloadOf(t, ingress, testRevision("yyy")), client.FieldOwner("kubectl-client-side-apply"))
	for what, load := range map[string]func(context.Context, Key) (*State, error){"Load": s.Load, "Summary": s.Summary, "LoadCurrent": s.LoadCurrent} {
		_, err := load(ctx, ingress)
		failsNaming(t, what, err, name, "kubectl-client-side-apply")
	}
	failsNaming(t, "MarkProvisioning", s.MarkProvisioning(ctx, ingress, testRevision("bbb")), name, "kubectl-client-side-apply")
	failsNaming(t, "Delete", s.Delete(ctx, ingress), name, "kubectl-client-side-apply")
	must(t, c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: name}, &corev1.Secret{}))
}

// TestRecordEditedAfterTheProviderWroteIt: a record the provider wrote and someone edited since
// (its data, its state label, its reason) is not read: an invalid one is skipped, a backup or
// current one fails the reads; both naming who edited it. A label of the editor's own changes
// nothing the provider reads, and the record stays trusted.
func TestRecordEditedAfterTheProviderWroteIt(t *testing.T) {
	ctx := t.Context()
	c := newTrackingClient()
	s := newTestStore(t, c)
	provisionAndSettle(t, s, ingress, "aaa")
	must(t, s.MarkProvisioning(ctx, ingress, testRevision("bad")))
	must(t, s.MarkInvalid(ctx, ingress, "bad", "not Available"))
	if _, err := s.Restored(ctx, ingress); err != nil {
		t.Fatal(err)
	}
	provisionAndSettle(t, s, ingress, "bbb")
	expectState(t, s, ingress, "current=bbb backup=aaa prov=- invalid=[bad:not Available] superseded=[]")

	// Someone's own label: still the provider's record.
	edit(t, c, DefaultNamespace, ingress.revisionSecretName("bad"), "kubectl-label", `{"metadata":{"labels":{"team":"web"}}}`)
	expectState(t, s, ingress, "current=bbb backup=aaa prov=- invalid=[bad:not Available] superseded=[]")

	// The invalid record relabelled superseded: skipped, not taken for a change that may still
	// be on the cluster.
	bad := ingress.revisionSecretName("bad")
	edit(t, c, DefaultNamespace, bad, "kubectl-edit", `{"metadata":{"labels":{"gradual.dev/state":"superseded"}}}`)
	st := expectState(t, s, ingress, "current=bbb backup=aaa prov=- invalid=[] superseded=[]")
	if got := skippedNames(t, st, "written by kubectl-edit, not by the provider"); !slices.Equal(got, []string{bad}) {
		t.Fatalf("skipped %v, want [%s]", got, bad)
	}

	// The backup's data replaced: what a failure restores is not read, so the reads fail.
	backup := ingress.revisionSecretName("aaa")
	edit(t, c, DefaultNamespace, backup, "kubectl-edit", `{"data":{"record":"`+base64.StdEncoding.EncodeToString(payloadOf(t, ingress, Revision{Revision: "aaa"}))+`"}}`)
	_, err := s.Load(ctx, ingress)
	failsNaming(t, "Load with an edited backup", err, backup, "kubectl-edit")
}

// TestChunkWrittenBySomeoneElse: a chunk of the provider's record replaced by someone else makes
// the record unreadable: Summary (no data) still lists it, Load fails naming the chunk, and
// tidying never deletes it.
func TestChunkWrittenBySomeoneElse(t *testing.T) {
	ctx := t.Context()
	c := newTrackingClient()
	s := newTestStore(t, c)
	s.chunkSize = 256
	big := incompressibleRevision(t, "big", 2000)
	must(t, s.MarkProvisioning(ctx, ingress, big))
	must(t, s.MarkCurrent(ctx, ingress, "big"))
	chunk := chunkSecretName(ingress.revisionSecretName("big"), 1)
	edit(t, c, DefaultNamespace, chunk, "kubectl-edit", `{"data":{"record":"AAAA"}}`)
	if sum, err := s.Summary(ctx, ingress); err != nil || describe(sum) != "current=big backup=- prov=- invalid=[] superseded=[]" {
		t.Fatalf("Summary: %v, %v", sum, err)
	}
	_, err := s.Load(ctx, ingress)
	failsNaming(t, "Load", err, chunk, "kubectl-edit")
	_, err = s.LoadCurrent(ctx, ingress)
	failsNaming(t, "LoadCurrent", err, chunk, "kubectl-edit")
	// Superseded by another revision and deleted: the chunk stays.
	provisionAndSettle(t, s, ingress, "aaa")
	must(t, s.Delete(ctx, ingress))
	must(t, c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: chunk}, &corev1.Secret{}))
}

// TestManagementRecordWrittenBySomeoneElse: the management cluster's progress and ledger record,
// planted or edited by someone else, is neither used nor changed: every read and write fails,
// naming it and its writer, so a planted ledger can neither block a revision nor a planted
// progress unblock a halted rollout without anyone noticing.
func TestManagementRecordWrittenBySomeoneElse(t *testing.T) {
	ctx := t.Context()
	c := newTrackingClient()
	s := NewManagementStore(c, "")
	must(t, s.RecordInvalid(ctx, ingress, InvalidEntry{Revision: "bad", Reason: "boom"}))
	must(t, s.SaveProgress(ctx, ingress, Progress{Phase: PhaseFailed, Revision: "bad", Config: []byte(`{"a":1}`)}))
	if l, err := s.Ledger(ctx, ingress); err != nil || len(l) != 1 {
		t.Fatalf("Ledger: %v, %v", l, err)
	}
	// The ledger emptied by hand, to let "bad" through.
	head := ingress.ObjectName()
	edit(t, c, DefaultNamespace, head, "kubectl-edit", `{"data":{"record":null,"ledger":"W10="}}`)
	check := func(writer string) {
		t.Helper()
		for what, err := range map[string]error{
			"Ledger":        func() error { _, err := s.Ledger(ctx, ingress); return err }(),
			"LoadSummary":   func() error { _, err := s.LoadSummary(ctx, ingress); return err }(),
			"Load":          func() error { _, err := s.Load(ctx, ingress); return err }(),
			"SaveProgress":  s.SaveProgress(ctx, ingress, Progress{Phase: PhaseRunning}),
			"ForgetInvalid": s.ForgetInvalid(ctx, ingress, "bad"),
			"Delete":        s.Delete(ctx, ingress),
		} {
			failsNaming(t, what, err, head, writer)
		}
		must(t, c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: head}, &corev1.Secret{}))
	}
	check("kubectl-edit")

	// Planted from scratch, as an earlier version's uncompressed record.
	must(t, c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: head}}))
	must(t, c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: head, Namespace: DefaultNamespace,
			Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelRollout: ingress.Hash()},
			Annotations: map[string]string{AnnotationRolloutKey: ingress.String()},
		},
		Type: RolloutSecretType,
		Data: map[string][]byte{legacyProgressKey: []byte(`{"phase":"succeeded","managed":true}`)},
	}, client.FieldOwner("kubectl-create")))
	check("kubectl-create")
}
