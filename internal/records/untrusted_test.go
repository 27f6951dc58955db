package records

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// Records in a workload cluster are not trusted blindly: whoever can write Secrets in the
// records namespace can plant some. These tests plant them by hand.

// dataReads records the names of the Secrets whose data a client returned (full Secret lists
// and gets; metadata-only lists carry no data).
type dataReads struct {
	mu    sync.Mutex
	names []string
}

func (d *dataReads) funcs() *interceptor.Funcs {
	return &interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			err := c.List(ctx, list, opts...)
			if sl, ok := list.(*corev1.SecretList); ok {
				d.mu.Lock()
				for _, s := range sl.Items {
					d.names = append(d.names, s.Name)
				}
				d.mu.Unlock()
			}
			return err
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			if _, ok := obj.(*corev1.Secret); ok && err == nil {
				d.mu.Lock()
				d.names = append(d.names, key.Name)
				d.mu.Unlock()
			}
			return err
		},
	}
}

func (d *dataReads) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.names
	d.names = nil
	slices.Sort(out)
	return slices.Compact(out)
}

func gzipped(t testing.TB, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	must(t, err)
	_, err = zw.Write(raw)
	must(t, err)
	must(t, zw.Close())
	return buf.Bytes()
}

// bombOf is gzip data that expands to mib MiB of zeros: one member compressing a MiB, repeated
// (a gzip reader reads concatenated members as one stream).
func bombOf(t testing.TB, mib int) []byte {
	t.Helper()
	return bytes.Repeat(gzipped(t, make([]byte, 1<<20)), mib)
}

// payloadOf is the record data the store would write for rev of key (one chunk, no digest).
func payloadOf(t testing.TB, key Key, rev Revision) []byte {
	t.Helper()
	raw, err := json.Marshal(payload{RolloutKey: key, Revision: rev.Revision, Manifests: rev.Manifests, Inventory: rev.Inventory})
	must(t, err)
	return gzipped(t, raw)
}

// plant creates the head Secret of a record of revision as the store names and labels it for
// key, except that its rollout-key annotation is owner's, holding data, created with opts (a
// field owner: see ForeignWriters).
func plant(t testing.TB, c client.Client, key Key, owner, revision string, state RevisionState, data []byte, opts ...client.CreateOption) string {
	t.Helper()
	name := key.revisionSecretName(revision)
	must(t, c.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: DefaultNamespace,
			Labels: map[string]string{
				LabelManagedBy: ManagedBy, LabelRollout: key.Hash(), LabelRevision: revision,
				LabelState: string(state), LabelChunk: "0",
			},
			Annotations: map[string]string{
				AnnotationRolloutKey:     owner,
				AnnotationReason:         "planted",
				AnnotationStateChangedAt: "2030-01-01T00:00:00Z", // newer than anything of ours
			},
		},
		Type: RevisionSecretType,
		Data: map[string][]byte{"record": data},
	}, opts...))
	return name
}

// skippedNames are the names of st's skipped Secrets, each checked to give a reason holding want.
func skippedNames(t *testing.T, st *State, want string) []string {
	t.Helper()
	var names []string
	for _, s := range st.Skipped {
		names = append(names, s.Name)
		if !strings.Contains(s.Reason, want) || !strings.Contains(s.String(), s.Name) {
			t.Errorf("skipped %s: reason %q, want one saying %q", s.Name, s.Reason, want)
		}
	}
	return names
}

// TestForeignSecretsAreNeverRead: Secrets of the records namespace that are no record of the
// rollout are never decoded, and their data never fetched when the read needs none.
func TestForeignSecretsAreNeverRead(t *testing.T) {
	ctx := t.Context()
	reads := &dataReads{}
	c := newFakeClient(reads.funcs())
	s := newTestStore(t, c)
	provisionAndSettle(t, s, ingress, "aaa")
	provisionAndSettle(t, s, ingress, "bbb")
	bomb := bombOf(t, 64)

	// No labels at all, though it carries the rollout's key and a record's name.
	must(t, c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: ingress.revisionSecretName("unlabelled"), Namespace: DefaultNamespace,
			Annotations: map[string]string{AnnotationRolloutKey: ingress.String()},
		},
		Data: map[string][]byte{"record": bomb},
	}))
	// The rollout's labels, but none of the fields a record of it always has: no rollout-key
	// annotation, and a name the store never gives.
	must(t, c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: "planted", Namespace: DefaultNamespace,
			Labels: map[string]string{LabelManagedBy: ManagedBy, LabelRollout: ingress.Hash(), LabelRevision: "ccc",
				LabelState: string(StateCurrent), LabelChunk: "0"},
		},
		Data: map[string][]byte{"record": bomb},
	}))
	reads.take()

	st := expectState(t, s, ingress, "current=bbb backup=aaa prov=- invalid=[] superseded=[]")
	if got := skippedNames(t, st, "no "+AnnotationRolloutKey); !slices.Equal(got, []string{"planted"}) {
		t.Fatalf("skipped %v, want [planted] (the unlabelled Secret is not even listed)", got)
	}
	if got := reads.take(); slices.Contains(got, ingress.revisionSecretName("unlabelled")) {
		t.Fatalf("Load and Summary fetched the data of the unlabelled Secret: %v", got)
	}

	// LoadCurrent fetches the current record's data, nothing else.
	st, err := s.LoadCurrent(ctx, ingress)
	must(t, err)
	if got := describe(st); got != "current=bbb backup=aaa prov=- invalid=[] superseded=[]" {
		t.Fatalf("LoadCurrent: %s", got)
	}
	if st.Current == nil || !bytes.Equal(st.Current.Manifests, testRevision("bbb").Manifests) || len(st.Current.Inventory) != 1 {
		t.Fatalf("LoadCurrent: current record without its contents: %+v", st.Current)
	}
	if st.Backup == nil || st.Backup.Manifests != nil {
		t.Fatalf("LoadCurrent read the backup's contents: %+v", st.Backup)
	}
	if got := reads.take(); !slices.Equal(got, []string{ingress.revisionSecretName("bbb")}) {
		t.Fatalf("LoadCurrent fetched the data of %v, want only the current record's", got)
	}
	if got := skippedNames(t, st, "no "+AnnotationRolloutKey); !slices.Equal(got, []string{"planted"}) {
		t.Fatalf("LoadCurrent skipped %v, want [planted]", got)
	}

	// Transitions neither trip over them nor touch them.
	provisionAndSettle(t, s, ingress, "ddd")
	must(t, s.Delete(ctx, ingress))
	list := &corev1.SecretList{}
	must(t, c.List(ctx, list, client.InNamespace(DefaultNamespace)))
	var left []string
	for _, sec := range list.Items {
		left = append(left, sec.Name)
	}
	slices.Sort(left)
	if want := []string{ingress.revisionSecretName("unlabelled"), "planted"}; !slices.Equal(left, want) {
		t.Fatalf("after Delete: %v, want %v", left, want)
	}
}

// TestOversizedRecordIsSkipped: a record whose compressed data is larger than a Secret may hold
// is not decoded. An invalid one is skipped, named; a current one fails the read, named.
func TestOversizedRecordIsSkipped(t *testing.T) {
	ctx := t.Context()
	data := payloadOf(t, ingress, incompressibleRevision(t, "big", 1200<<10))
	if len(data) <= MaxSecretDataSize {
		t.Fatalf("planted data is %d bytes, not more than %d", len(data), MaxSecretDataSize)
	}

	c := newFakeClient(nil)
	s := newTestStore(t, c)
	provisionAndSettle(t, s, ingress, "aaa")
	name := plant(t, c, ingress, ingress.String(), "big", StateInvalid, data)
	st := expectState(t, s, ingress, "current=aaa backup=- prov=- invalid=[big:planted] superseded=[]")
	if got := skippedNames(t, st, "more than the 1048576"); !slices.Equal(got, []string{name}) {
		t.Fatalf("skipped %v, want [%s]", got, name)
	}
	if st.Invalid[0].Manifests != nil || st.Invalid[0].Inventory != nil {
		t.Fatalf("the oversized record was decoded")
	}
	if st.Current.Manifests == nil {
		t.Fatalf("the current record lost its contents")
	}

	// The same as the current record (the one a restore needs) fails the read, naming it.
	c = newFakeClient(nil)
	s = newTestStore(t, c)
	name = plant(t, c, ingress, ingress.String(), "big", StateCurrent, data)
	for what, load := range map[string]func(context.Context, Key) (*State, error){"Load": s.Load, "LoadCurrent": s.LoadCurrent} {
		if _, err := load(ctx, ingress); err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "more than the 1048576") {
			t.Errorf("%s of an oversized current record: %v", what, err)
		}
	}
}

// TestGzipBombIsNotExpanded: a record that decompresses past the bound is decompressed no
// further, and skipped.
func TestGzipBombIsNotExpanded(t *testing.T) {
	const expanded = 64 << 20
	bomb := bombOf(t, expanded>>20)
	c := newFakeClient(nil)
	s := newTestStore(t, c)
	s.limits.size = 1 << 20
	provisionAndSettle(t, s, ingress, "aaa")
	name := plant(t, c, ingress, ingress.String(), "bomb", StateSuperseded, bomb)
	t.Logf("bomb: %d bytes expanding to %d", len(bomb), expanded)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st, err := s.Load(t.Context(), ingress)
	runtime.ReadMemStats(&after)
	got := after.TotalAlloc - before.TotalAlloc
	if got > 16<<20 {
		t.Fatalf("Load allocated %d bytes: the bomb was expanded past the 1 MiB bound", got)
	}
	t.Logf("Load allocated %d bytes", got)
	must(t, err)
	if got := describe(st); got != "current=aaa backup=- prov=- invalid=[] superseded=[bomb!planted]" {
		t.Fatalf("state %s", got)
	}
	if got := skippedNames(t, st, "decompresses to more than 1048576 bytes"); !slices.Equal(got, []string{name}) {
		t.Fatalf("skipped %v, want [%s]", got, name)
	}
}

// TestForeignKeyRecordIsSkipped: a record labelled for the rollout whose annotation, or whose
// payload, names another rollout is not used.
func TestForeignKeyRecordIsSkipped(t *testing.T) {
	ctx := t.Context()
	other := Key{Kind: "rollout", Namespace: "fleet", Name: "other"}
	c := newFakeClient(nil)
	s := newTestStore(t, c)
	provisionAndSettle(t, s, ingress, "aaa")

	// Named and labelled as ingress's newest current record, annotated as other's.
	name := plant(t, c, ingress, other.String(), "zzz", StateCurrent, payloadOf(t, other, testRevision("zzz")))
	st := expectState(t, s, ingress, "current=aaa backup=- prov=- invalid=[] superseded=[]")
	if got := skippedNames(t, st, `belongs to "`+other.String()+`"`); !slices.Equal(got, []string{name}) {
		t.Fatalf("skipped %v, want [%s]", got, name)
	}
	st, err := s.LoadCurrent(ctx, ingress)
	must(t, err)
	if st.Current == nil || st.Current.Revision != "aaa" || len(st.Skipped) != 1 {
		t.Fatalf("LoadCurrent: %s, skipped %v", describe(st), st.Skipped)
	}
	if keys, err := s.Keys(ctx); err != nil || len(keys) != 1 || keys[0] != ingress {
		t.Fatalf("Keys = %v, %v: want only %v (the planted head carries ingress's label)", keys, err, ingress)
	}
	// Transitions leave it alone.
	provisionAndSettle(t, s, ingress, "bbb")
	must(t, s.Delete(ctx, ingress))
	must(t, c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: name}, &corev1.Secret{}))

	// Ingress's annotation, but another rollout's payload (copied over by hand): an invalid
	// record's contents are skipped; as the current record it fails the read.
	c = newFakeClient(nil)
	s = newTestStore(t, c)
	provisionAndSettle(t, s, ingress, "aaa")
	name = plant(t, c, ingress, ingress.String(), "yyy", StateInvalid, payloadOf(t, other, testRevision("yyy")))
	st = expectState(t, s, ingress, "current=aaa backup=- prov=- invalid=[yyy:planted] superseded=[]")
	if got := skippedNames(t, st, `of "`+other.String()+`"`); !slices.Equal(got, []string{name}) {
		t.Fatalf("skipped %v, want [%s]", got, name)
	}
	if st.Invalid[0].Manifests != nil {
		t.Fatalf("another rollout's payload was used")
	}
	must(t, c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: name}}))
	plant(t, c, ingress, ingress.String(), "yyy", StateCurrent, payloadOf(t, other, testRevision("yyy")))
	if _, err := s.Load(ctx, ingress); err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), other.String()) {
		t.Fatalf("Load with another rollout's payload as the current record: %v", err)
	}
}

// TestRecordBoundsOnWrite: the store never writes a record its reads would refuse.
func TestRecordBoundsOnWrite(t *testing.T) {
	ctx := t.Context()
	s := newTestStore(t, newFakeClient(nil))
	s.limits.size = 4 << 10
	if err := s.MarkProvisioning(ctx, ingress, incompressibleRevision(t, "big", 8<<10)); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("MarkProvisioning of a record past the size bound: %v", err)
	}
	s = newTestStore(t, newFakeClient(nil))
	s.chunkSize, s.limits.chunks = 256, 4
	if err := s.MarkProvisioning(ctx, ingress, incompressibleRevision(t, "many", 4000)); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("MarkProvisioning of a record past the chunk bound: %v", err)
	}
	provisionAndSettle(t, s, ingress, "small") // within both
	expectState(t, s, ingress, "current=small backup=- prov=- invalid=[] superseded=[]")
}
