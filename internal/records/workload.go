package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultMaxInvalid is how many invalid records of a rollout a workload cluster keeps.
const DefaultMaxInvalid = 10

// WorkloadStore keeps the revision records of rollouts in one workload cluster (see the package
// doc for the layout). Its methods may be called concurrently for different keys; for one key
// the caller (holding the rollout's Lease) serialises them.
type WorkloadStore struct {
	c         client.Client
	namespace string
	// Clock stamps records; the system clock when nil.
	Clock Clock
	// MaxInvalid bounds the invalid records kept per rollout (oldest go first);
	// DefaultMaxInvalid when zero.
	MaxInvalid int

	chunkSize int        // ChunkSize; smaller in tests
	limits    readLimits // revisionLimits; smaller in tests
}

// NewWorkloadStore keeps records through c in namespace (DefaultNamespace when empty).
func NewWorkloadStore(c client.Client, namespace string) *WorkloadStore {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	return &WorkloadStore{c: withRecordsFieldManager(c), namespace: namespace, chunkSize: ChunkSize, limits: revisionLimits}
}

// Namespace is where the store keeps its records.
func (s *WorkloadStore) Namespace() string { return s.namespace }

func (s *WorkloadStore) now() time.Time { return clockOrSystem(s.Clock).Now() }

// record is one revision record as its Secrets' metadata describe it.
type record struct {
	revision  string
	state     RevisionState
	head      metav1.Object   // nil for chunks whose head is gone
	chunks    []metav1.Object // beyond the head, any order
	changedAt time.Time
	// alien are chunks of the record that someone else wrote (see ForeignWriters): never
	// read, changed or deleted; a decode that needs one fails.
	alien []metav1.Object
}

// reason is why the record's revision failed here; "" unless it is marked invalid.
func (r *record) reason() string {
	if r.head == nil {
		return ""
	}
	return r.head.GetAnnotations()[AnnotationReason]
}

// group sorts a rollout's Secrets into records. Secrets that are no record of key (see
// foreign) or that someone other than the provider wrote (see ForeignWriters) are left out, and
// returned as skipped: they are never decoded, relabelled or deleted. A head written by someone
// else takes its revision's chunks out with it (they are left alone); a chunk written by someone
// else makes its record unreadable (see decode). A head written by someone else that is labelled
// current, backup or provisioning fails the grouping, naming it, as a record in those states
// that cannot be decoded fails a read (see trusted): it may be the provider's own record,
// edited since, and restore and pruning must not go on without it.
func (s *WorkloadStore) group(key Key, objs []metav1.Object) (map[string]*record, []SkippedRecord, error) {
	recs := map[string]*record{}
	var skipped []SkippedRecord
	var alien []metav1.Object
	for _, o := range objs {
		if why := foreign(key, o); why != "" {
			skipped = append(skipped, s.skipped(o, fmt.Sprintf("labelled a record of %s but %s: not read", key.Describe(), why)))
			continue
		}
		if writtenBy(o) != "" {
			alien = append(alien, o)
			continue
		}
		rev := o.GetLabels()[LabelRevision]
		r := recs[rev]
		if r == nil {
			r = &record{revision: rev}
			recs[rev] = r
		}
		if o.GetLabels()[LabelChunk] != "0" {
			r.chunks = append(r.chunks, o)
			continue
		}
		r.head = o
		r.state = RevisionState(o.GetLabels()[LabelState])
		r.changedAt = parseStamp(o.GetAnnotations()[AnnotationStateChangedAt])
	}
	slices.SortFunc(alien, func(a, b metav1.Object) int { return compareStrings(a.GetName(), b.GetName()) })
	var errs []error
	for _, o := range alien {
		rev, by := o.GetLabels()[LabelRevision], writtenBy(o)
		if o.GetLabels()[LabelChunk] != "0" {
			if r := recs[rev]; r != nil {
				r.alien = append(r.alien, o)
			}
			skipped = append(skipped, s.skipped(o, fmt.Sprintf("a chunk of the record of revision %s of %s, but written by %s, not by the provider: not read", rev, key.Describe(), by)))
			continue
		}
		delete(recs, rev)
		state := RevisionState(o.GetLabels()[LabelState])
		if trusted(state) {
			errs = append(errs, fmt.Errorf("the %s record of revision %s of %s: %w", state, rev, key.Describe(), foreignWriteError(s.namespace, o.GetName(), by)))
		}
		skipped = append(skipped, s.skipped(o, fmt.Sprintf("labelled the %s record of revision %s of %s, but written by %s, not by the provider: not read", state, rev, key.Describe(), by)))
	}
	sortSkipped(skipped)
	return recs, skipped, errors.Join(errs...)
}

// foreign says why o is no record of key, "" when it is one: the store gives every Secret of
// a record its labels, key's rollout-key annotation and a name made of key, revision and chunk
// index, and a Secret lacking any of them was not written by the store for key (whoever can
// write Secrets in the namespace can plant one with the rollout's labels).
func foreign(key Key, o metav1.Object) string {
	labels := o.GetLabels()
	if labels[LabelManagedBy] != ManagedBy || labels[LabelRollout] != key.Hash() {
		return "it lacks the labels " + LabelManagedBy + "=" + ManagedBy + " and " + LabelRollout + "=" + key.Hash()
	}
	switch got := o.GetAnnotations()[AnnotationRolloutKey]; got {
	case key.String():
	case "":
		return "it carries no " + AnnotationRolloutKey + " annotation"
	default:
		return fmt.Sprintf("it belongs to %q", got)
	}
	rev := labels[LabelRevision]
	if err := validateRevision(rev); err != nil {
		return "its " + LabelRevision + " label is not a revision: " + err.Error()
	}
	want := key.revisionSecretName(rev)
	if chunk := labels[LabelChunk]; chunk != "0" {
		i, err := strconv.Atoi(chunk)
		if err != nil || i < 1 || strconv.Itoa(i) != chunk {
			return fmt.Sprintf("its %s label is %q, not a chunk index", LabelChunk, chunk)
		}
		want = chunkSecretName(want, i)
	}
	if o.GetName() != want {
		return "a record of its revision would be named " + want
	}
	return ""
}

// skipped reports o as skipped for reason.
func (s *WorkloadStore) skipped(o metav1.Object, reason string) SkippedRecord {
	return SkippedRecord{Namespace: s.namespace, Name: o.GetName(), Revision: o.GetLabels()[LabelRevision], Reason: reason}
}

func sortSkipped(skipped []SkippedRecord) {
	slices.SortFunc(skipped, func(a, b SkippedRecord) int { return compareStrings(a.Name, b.Name) })
}

// trusted reports whether the contents of a record in state must be read for the rollout's
// records to be used at all: the current and backup records are what a failed change restores
// (their manifests) and the provisioning record's inventory is what undoing a change prunes. A
// read that cannot decode one of them fails rather than report a state without it. Invalid and
// superseded records only add to pruning and to what was adopted (which later records carry
// forward), so one that cannot be read is skipped, with a warning.
func trusted(state RevisionState) bool {
	switch state {
	case StateCurrent, StateBackup, StateProvisioning:
		return true
	}
	return false
}

func (s *WorkloadStore) selector(key Key) client.ListOption {
	return client.MatchingLabels{LabelManagedBy: ManagedBy, LabelRollout: key.Hash()}
}

// listMeta returns the rollout's records from a metadata-only list: transitions and Summary need
// no record data. Secrets that are no record of the rollout are left out.
func (s *WorkloadStore) listMeta(ctx context.Context, key Key) (map[string]*record, error) {
	recs, _, err := s.listMetaSkipped(ctx, key)
	return recs, err
}

// listMetaSkipped is listMeta, also returning the Secrets it left out.
func (s *WorkloadStore) listMetaSkipped(ctx context.Context, key Key) (map[string]*record, []SkippedRecord, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := s.c.List(ctx, list, client.InNamespace(s.namespace), s.selector(key)); err != nil {
		return nil, nil, fmt.Errorf("list records of %s in namespace %s: %w", key.Describe(), s.namespace, err)
	}
	objs := make([]metav1.Object, len(list.Items))
	for i := range list.Items {
		objs[i] = &list.Items[i]
	}
	return s.group(key, objs)
}

// Load reads every record of the rollout, contents included, from one list of the Secrets
// labelled with the rollout (no other Secret of the namespace is read). It returns an empty
// State when there are none (or the namespace does not exist).
//
// Records are not trusted blindly: a Secret with the rollout's labels that is no record of it
// is left out; a record whose data exceeds MaxSecretDataSize per Secret or MaxRecordChunks
// Secrets, or that decompresses to more than MaxRevisionRecordSize, is not decoded (and is
// decompressed no further than that); a record that is torn, corrupt or holds another
// rollout's payload is not used. Such an invalid or superseded record is skipped, and the
// State's Skipped says which and why; such a current, backup or provisioning record fails the
// Load, naming its Secret (see trusted).
func (s *WorkloadStore) Load(ctx context.Context, key Key) (*State, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	list := &corev1.SecretList{}
	if err := s.c.List(ctx, list, client.InNamespace(s.namespace), s.selector(key)); err != nil {
		return nil, fmt.Errorf("list records of %s in namespace %s: %w", key.Describe(), s.namespace, err)
	}
	objs := make([]metav1.Object, len(list.Items))
	for i := range list.Items {
		objs[i] = &list.Items[i]
	}
	recs, skipped, err := s.group(key, objs)
	if err != nil {
		return nil, err
	}
	return s.state(key, recs, true, skipped)
}

// Summary is Load without record contents (no Manifests or Inventory): one metadata-only list,
// cheap enough for every plan of a large fleet. No record data is read or decompressed.
func (s *WorkloadStore) Summary(ctx context.Context, key Key) (*State, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	recs, skipped, err := s.listMetaSkipped(ctx, key)
	if err != nil {
		return nil, err
	}
	return s.state(key, recs, false, skipped)
}

// Summaries is Summary of many keys whose records share the namespace (the Flux engine's
// per-cluster records in the management cluster), from one metadata-only list of the
// namespace's records, read in pages, instead of a list per key: a plan of a fleet then makes a
// number of requests that does not grow with it. A key whose records cannot be grouped or sorted
// (a Secret someone else wrote, labelled as its current record) has its error in errs; err is the
// list's.
func (s *WorkloadStore) Summaries(ctx context.Context, keys []Key) (states map[Key]*State, errs map[Key]error, err error) {
	byHash := make(map[string]Key, len(keys))
	for _, key := range keys {
		if err := key.Validate(); err != nil {
			return nil, nil, err
		}
		byHash[key.Hash()] = key
	}
	objs := map[Key][]metav1.Object{}
	cont := ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
		opts := []client.ListOption{client.InNamespace(s.namespace), client.MatchingLabels{LabelManagedBy: ManagedBy},
			client.HasLabels{LabelRollout}, client.Limit(summariesPage)}
		if cont != "" {
			opts = append(opts, client.Continue(cont))
		}
		if err := s.c.List(ctx, list, opts...); err != nil {
			return nil, nil, fmt.Errorf("list records in namespace %s: %w", s.namespace, err)
		}
		for i := range list.Items {
			if key, ok := byHash[list.Items[i].GetLabels()[LabelRollout]]; ok {
				objs[key] = append(objs[key], &list.Items[i])
			}
		}
		if cont = list.GetContinue(); cont == "" {
			break
		}
	}
	states, errs = make(map[Key]*State, len(keys)), map[Key]error{}
	for _, key := range keys {
		recs, skipped, err := s.group(key, objs[key])
		if err == nil {
			states[key], err = s.state(key, recs, false, skipped)
		}
		if err != nil {
			errs[key] = err
		}
	}
	return states, errs, nil
}

// summariesPage is how many Secrets a page of Summaries' list holds.
const summariesPage = 500

// LoadCurrent is Summary with the contents of the current record (State.Current's Manifests,
// Inventory and Adopted), what comparing a cluster with its current revision (drift) needs:
// one metadata-only list, then the current record's Secrets only, so that the other records
// (backup, invalid, superseded: up to a dozen copies of a bundle) are neither read nor
// decompressed. The current record is read with Load's bounds, and fails the read when it
// cannot be decoded.
func (s *WorkloadStore) LoadCurrent(ctx context.Context, key Key) (*State, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	var err error
	for range 3 {
		var st *State
		if st, err = s.loadCurrent(ctx, key); !errors.Is(err, errTorn) {
			return st, err
		}
	}
	return nil, err
}

// loadCurrent is one attempt of LoadCurrent; errTorn when a Secret listed is gone when read.
func (s *WorkloadStore) loadCurrent(ctx context.Context, key Key) (*State, error) {
	recs, skipped, err := s.listMetaSkipped(ctx, key)
	if err != nil {
		return nil, err
	}
	st, err := s.state(key, recs, false, skipped)
	if err != nil || st.Current == nil {
		return st, err
	}
	r := recs[st.Current.Revision]
	p, err := s.fetchAndDecode(ctx, key, r)
	if err != nil {
		return nil, fmt.Errorf("record of %s, revision %s (Secret %s/%s): %w", key.Describe(), r.revision, s.namespace, r.head.GetName(), err)
	}
	st.Current.Manifests, st.Current.Inventory, st.Current.Adopted = p.Manifests, p.Inventory, p.Adopted
	return st, nil
}

// fetchAndDecode reads the Secrets of a record found by a metadata-only list, the head then the
// chunks it names, and decodes them.
func (s *WorkloadStore) fetchAndDecode(ctx context.Context, key Key, r *record) (payload, error) {
	get := func(name string) (*corev1.Secret, error) {
		sec := &corev1.Secret{}
		err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, sec)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: Secret %s is gone", errTorn, name)
		}
		if err != nil {
			return nil, fmt.Errorf("read Secret %s/%s: %w", s.namespace, name, err)
		}
		return sec, nil
	}
	head, err := get(r.head.GetName())
	if err != nil {
		return payload{}, err
	}
	n, err := s.chunkCount(head)
	if err != nil {
		return payload{}, err
	}
	objs := []metav1.Object{head}
	for i := 1; i < n; i++ {
		c, err := get(chunkSecretName(head.Name, i))
		if err != nil {
			return payload{}, err
		}
		objs = append(objs, c)
	}
	got, skipped, err := s.group(key, objs)
	if err != nil {
		return payload{}, err
	}
	if len(skipped) > 0 {
		return payload{}, errors.New(skipped[0].String())
	}
	full := got[r.revision]
	if full == nil || full.head == nil {
		return payload{}, fmt.Errorf("%w: Secret %s is no longer the head of revision %s", errTorn, head.Name, r.revision)
	}
	return s.decode(key, full)
}

// state sorts records into a State, with their contents when contents. skipped are the
// Secrets left out already; records whose contents cannot be read are added to them, or fail
// the read (see trusted).
func (s *WorkloadStore) state(key Key, recs map[string]*record, contents bool, skipped []SkippedRecord) (*State, error) {
	var revs []Revision
	for _, r := range recs {
		if r.head == nil {
			continue // chunks of an interrupted write or delete
		}
		rev := Revision{
			Revision:       r.revision,
			State:          r.state,
			AppliedAt:      parseStamp(r.head.GetAnnotations()[AnnotationAppliedAt]),
			StateChangedAt: r.changedAt,
			Reason:         r.head.GetAnnotations()[AnnotationReason],
			RolloutKey:     key,
		}
		if contents {
			p, err := s.decode(key, r)
			switch {
			case err == nil:
				rev.Manifests, rev.Inventory, rev.Adopted = p.Manifests, p.Inventory, p.Adopted
			case trusted(r.state):
				return nil, fmt.Errorf("record of %s, revision %s (Secret %s/%s): %w", key.Describe(), r.revision, s.namespace, r.head.GetName(), err)
			default:
				skipped = append(skipped, s.skipped(r.head, fmt.Sprintf("the contents of the %s record of revision %s of %s were not read: %v", r.state, r.revision, key.Describe(), err)))
			}
		}
		revs = append(revs, rev)
	}
	slices.SortFunc(revs, func(a, b Revision) int {
		if c := a.StateChangedAt.Compare(b.StateChangedAt); c != 0 {
			return c
		}
		return compareStrings(a.Revision, b.Revision)
	})
	sortSkipped(skipped)
	st := &State{Skipped: skipped}
	for i := range revs {
		rev := revs[i]
		var slot **Revision
		switch rev.State {
		case StateCurrent:
			slot = &st.Current
		case StateBackup:
			slot = &st.Backup
		case StateProvisioning:
			slot = &st.Provisioning
		case StateInvalid:
			st.Invalid = append(st.Invalid, rev)
			continue
		default:
			st.Superseded = append(st.Superseded, rev)
			continue
		}
		// Oldest first: a newer record of the same state wins and the older one is surplus.
		if *slot != nil {
			st.Superseded = append(st.Superseded, **slot)
		}
		*slot = &rev
	}
	return st, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// chunkCount is the number of Secrets a record's head says it takes, within the bounds.
func (s *WorkloadStore) chunkCount(head metav1.Object) (int, error) {
	n := 1
	if v := head.GetAnnotations()[AnnotationChunks]; v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			return 0, fmt.Errorf("bad %s annotation %q", AnnotationChunks, v)
		}
	}
	if n > s.limits.chunks {
		return 0, fmt.Errorf("the record says it takes %d Secrets, more than the %d a record may", n, s.limits.chunks)
	}
	return n, nil
}

// decode reads and joins a record's Secrets, within the store's bounds, and checks that they
// hold the record of key's revision.
func (s *WorkloadStore) decode(key Key, r *record) (payload, error) {
	n, err := s.chunkCount(r.head)
	if err != nil {
		return payload{}, err
	}
	for _, c := range r.alien {
		if i, err := strconv.Atoi(c.GetLabels()[LabelChunk]); err == nil && i >= 1 && i < n {
			return payload{}, fmt.Errorf("chunk %d of %d: %w", i, n, foreignWriteError(s.namespace, c.GetName(), writtenBy(c)))
		}
	}
	parts := make([][]byte, n)
	parts[0] = secretData(r.head)
	for _, c := range r.chunks {
		i, err := strconv.Atoi(c.GetLabels()[LabelChunk])
		if err != nil || i < 1 || i >= n {
			continue // left over from a larger earlier write
		}
		parts[i] = secretData(c)
	}
	for i, p := range parts {
		if p == nil {
			return payload{}, fmt.Errorf("chunk %d of %d is missing (Secret %s)", i, n, chunkSecretName(r.head.GetName(), i))
		}
		if len(p) > s.limits.secretData {
			name := r.head.GetName()
			if i > 0 {
				name = chunkSecretName(name, i)
			}
			return payload{}, fmt.Errorf("Secret %s holds %d bytes of record data, more than the %d a Secret of a record may", name, len(p), s.limits.secretData)
		}
	}
	p, err := decodePayload(parts, r.head.GetAnnotations()[AnnotationDigest], s.limits.size)
	if err != nil {
		return p, err
	}
	if p.RolloutKey != key || p.Revision != r.revision {
		return payload{}, fmt.Errorf("the record holds revision %q of %q, not revision %s of %s", p.Revision, p.RolloutKey.String(), r.revision, key.String())
	}
	return p, nil
}

func secretData(o metav1.Object) []byte {
	if sec, ok := o.(*corev1.Secret); ok {
		return sec.Data["record"]
	}
	return nil
}

// MarkProvisioning records that rev is about to be applied: its record is written (or, when the
// same content is already recorded, relabelled) with state provisioning. A different revision
// still provisioning becomes superseded. Nothing should be applied unless this succeeds.
func (s *WorkloadStore) MarkProvisioning(ctx context.Context, key Key, rev Revision) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := validateRevision(rev.Revision); err != nil {
		return err
	}
	if rev.RolloutKey != (Key{}) && rev.RolloutKey != key {
		return fmt.Errorf("revision %s is of %s, not %s", rev.Revision, rev.RolloutKey.Describe(), key.Describe())
	}
	if len(rev.Manifests) > 0 && !json.Valid(rev.Manifests) {
		return fmt.Errorf("revision %s: manifests are not valid JSON", rev.Revision)
	}
	chunks, digest, err := encodePayload(payload{RolloutKey: key, Revision: rev.Revision, Manifests: rev.Manifests, Inventory: rev.Inventory, Adopted: rev.Adopted}, s.chunkSize, s.limits)
	if err != nil {
		return err
	}
	appliedAt := rev.AppliedAt
	if appliedAt.IsZero() {
		appliedAt = s.now()
	}
	return s.transition(ctx, key, "mark revision "+rev.Revision+" provisioning", func(recs map[string]*record) error {
		if err := s.supersedeOthers(ctx, recs, rev.Revision); err != nil {
			return err
		}
		r := recs[rev.Revision]
		if r != nil && r.head != nil && r.head.GetAnnotations()[AnnotationDigest] == digest && complete(r, len(chunks)) {
			if r.state == StateProvisioning && r.reason() == "" {
				// Already marked, by an earlier try or by another cluster whose kubeconfig
				// reaches this API server (they share the record): only the time is new, so it
				// is written without a resourceVersion. With one, every such writer of a wave
				// conflicts with every other; without, the state a concurrent writer set stands.
				return s.patchAnnotations(ctx, r.head, map[string]any{AnnotationAppliedAt: stamp(appliedAt)})
			}
			return s.patchMeta(ctx, r.head, map[string]any{LabelState: string(StateProvisioning)}, map[string]any{
				AnnotationAppliedAt:      stamp(appliedAt),
				AnnotationStateChangedAt: s.changedStamp(r, StateProvisioning),
				AnnotationReason:         nil,
			})
		}
		return s.write(ctx, key, rev.Revision, chunks, digest, appliedAt, r)
	})
}

// complete reports whether r has every one of its n-1 chunks beyond the head.
func complete(r *record, n int) bool {
	have := map[string]bool{}
	for _, c := range r.chunks {
		have[c.GetLabels()[LabelChunk]] = true
	}
	for i := 1; i < n; i++ {
		if !have[strconv.Itoa(i)] {
			return false
		}
	}
	return true
}

// changedStamp keeps a record's state-changed-at when its state does not change, so
// re-running a transition does not reorder records.
func (s *WorkloadStore) changedStamp(r *record, to RevisionState) string {
	if r.state == to && !r.changedAt.IsZero() {
		return stamp(r.changedAt)
	}
	return stamp(s.now())
}

// write stores a record: chunks first, the head last (so the record exists only once it is
// complete), then chunks a larger earlier write left beyond the new count are deleted.
func (s *WorkloadStore) write(ctx context.Context, key Key, revision string, chunks [][]byte, digest string, appliedAt time.Time, old *record) error {
	head := key.revisionSecretName(revision)
	secret := func(name string, i int) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:      name,
				Namespace: s.namespace,
				Labels: map[string]string{
					LabelManagedBy: ManagedBy,
					LabelRollout:   key.Hash(),
					LabelRevision:  revision,
					LabelChunk:     strconv.Itoa(i),
				},
				Annotations: map[string]string{AnnotationRolloutKey: key.String()},
			},
			Type: RevisionSecretType,
			Data: map[string][]byte{"record": chunks[i]},
		}
	}
	for i := 1; i < len(chunks); i++ {
		if err := s.put(ctx, secret(chunkSecretName(head, i), i)); err != nil {
			return err
		}
	}
	h := secret(head, 0)
	h.Labels[LabelState] = string(StateProvisioning)
	h.Annotations[AnnotationAppliedAt] = stamp(appliedAt)
	h.Annotations[AnnotationStateChangedAt] = stamp(s.now())
	h.Annotations[AnnotationChunks] = strconv.Itoa(len(chunks))
	h.Annotations[AnnotationDigest] = digest
	if err := s.put(ctx, h); err != nil {
		return err
	}
	if old != nil {
		for _, c := range old.chunks {
			if i, err := strconv.Atoi(c.GetLabels()[LabelChunk]); err != nil || i >= len(chunks) {
				if err := s.deleteName(ctx, c.GetName()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// put creates sec, or replaces the Secret of that name.
func (s *WorkloadStore) put(ctx context.Context, sec *corev1.Secret) error {
	err := createInNamespace(ctx, s.c, sec.DeepCopy())
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create Secret %s/%s: %w", s.namespace, sec.Name, err)
		}
		return nil
	}
	existing := &corev1.Secret{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: sec.Name}, existing); err != nil {
		return fmt.Errorf("read Secret %s/%s: %w", s.namespace, sec.Name, err)
	}
	if by := writtenBy(existing); by != "" {
		return fmt.Errorf("replace Secret %s/%s: %w", s.namespace, sec.Name, foreignWriteError(s.namespace, sec.Name, by))
	}
	// The replace is unconditional (no resourceVersion): the transition that calls put decided
	// on a fresh read to write this record, and the only other writers of it are this rollout's
	// own clusters whose kubeconfigs reach this API server (the Lease keeps other processes
	// out). A wave writes them all at once; a conditional replace makes n writers retry about
	// n times each, and on the scale bed under load they ran out of retries.
	sec = sec.DeepCopy()
	sec.ResourceVersion = ""
	if err := s.c.Update(ctx, sec); err != nil {
		return fmt.Errorf("replace Secret %s/%s: %w", s.namespace, sec.Name, err)
	}
	return nil
}

// MarkCurrent records that revision is applied and verified: its record becomes current, the
// previous current becomes the backup and the previous backup is deleted (one backup is kept).
// A previous current marked invalid becomes invalid instead (and the backup stays); superseded
// records are deleted, or become invalid when marked so. The previous current is demoted before
// revision is promoted, and a state with no current keeps its backup, so an interrupted call
// re-runs to the same end.
func (s *WorkloadStore) MarkCurrent(ctx context.Context, key Key, revision string) error {
	if err := key.Validate(); err != nil {
		return err
	}
	return s.transition(ctx, key, "mark revision "+revision+" current", func(recs map[string]*record) error {
		r, err := s.find(key, recs, revision)
		if err != nil {
			return err
		}
		if r.state == StateInvalid || r.reason() != "" {
			return fmt.Errorf("revision %s of %s is recorded invalid (%s); mark it provisioning again to retry it",
				revision, key.Describe(), r.reason())
		}
		var good []*record
		for _, o := range byState(recs, StateCurrent, revision) {
			if o.reason() != "" {
				if err := s.setState(ctx, o, StateInvalid, o.reason()); err != nil {
					return err
				}
				continue
			}
			good = append(good, o)
		}
		if len(good) > 0 {
			for _, b := range byState(recs, StateBackup, revision) {
				if err := s.deleteRecord(ctx, b); err != nil {
					return err
				}
			}
			if err := s.setState(ctx, good[0], StateBackup, ""); err != nil {
				return err
			}
			for _, extra := range good[1:] {
				if err := s.deleteRecord(ctx, extra); err != nil {
					return err
				}
			}
		}
		if err := s.setState(ctx, r, StateCurrent, ""); err != nil {
			return err
		}
		if err := s.settle(ctx, byState(recs, StateSuperseded, revision)); err != nil {
			return err
		}
		return s.tidy(ctx, recs, revision)
	})
}

// MarkInvalid records that revision failed here, and why (the first reason is kept). A backup
// record becomes invalid at once. A record whose change is still on the cluster (provisioning,
// current, superseded) keeps its state with the reason, so an interrupted restore still shows
// as unsettled; Restored (or MarkCurrent of another revision) makes it invalid. Either way
// InvalidReason reports it from now on. Only the newest MaxInvalid invalid records are kept.
func (s *WorkloadStore) MarkInvalid(ctx context.Context, key Key, revision, reason string) error {
	if err := key.Validate(); err != nil {
		return err
	}
	reason = truncateReason(reason)
	if reason == "" {
		reason = "failed"
	}
	return s.transition(ctx, key, "mark revision "+revision+" invalid", func(recs map[string]*record) error {
		r, err := s.find(key, recs, revision)
		if err != nil {
			return err
		}
		if r.reason() != "" {
			reason = r.reason()
		}
		state := r.state
		if state == StateBackup || state == StateInvalid {
			state = StateInvalid
		}
		if err := s.setState(ctx, r, state, reason); err != nil {
			return err
		}
		return s.tidy(ctx, recs, revision)
	})
}

// MarkRollingBack records that the current revision is about to be undone (restored to the
// backup): its record becomes provisioning again, keeping any invalid mark, so an interrupted
// rollback shows as an unsettled change and is restored again by the next run. Follow it with
// Restored.
func (s *WorkloadStore) MarkRollingBack(ctx context.Context, key Key, revision string) error {
	if err := key.Validate(); err != nil {
		return err
	}
	return s.transition(ctx, key, "mark revision "+revision+" rolling back", func(recs map[string]*record) error {
		r, err := s.find(key, recs, revision)
		if err != nil {
			return err
		}
		switch r.state {
		case StateProvisioning:
			return nil
		case StateCurrent:
		default:
			return fmt.Errorf("revision %s of %s is %s, not current: nothing to roll back", revision, key.Describe(), r.state)
		}
		if err := s.supersedeOthers(ctx, recs, revision); err != nil {
			return err
		}
		return s.setState(ctx, r, StateProvisioning, r.reason())
	})
}

// Restored records that the cluster is back on its last good revision: the current record when
// there is one not marked invalid (a change that failed never became current), otherwise the
// backup, which becomes current again. Provisioning and superseded records are deleted, or
// become invalid when marked so; a current record marked invalid becomes invalid. It returns
// the revision now current, "" when none is (the cluster holds nothing of the rollout).
func (s *WorkloadStore) Restored(ctx context.Context, key Key) (string, error) {
	if err := key.Validate(); err != nil {
		return "", err
	}
	var current string
	err := s.transition(ctx, key, "record restore", func(recs map[string]*record) error {
		current = ""
		var good *record
		for _, c := range byState(recs, StateCurrent, "") {
			switch {
			case c.reason() != "":
				if err := s.setState(ctx, c, StateInvalid, c.reason()); err != nil {
					return err
				}
			case good == nil:
				good = c
			default:
				if err := s.deleteRecord(ctx, c); err != nil {
					return err
				}
			}
		}
		if good == nil {
			if backups := byState(recs, StateBackup, ""); len(backups) > 0 {
				good = backups[0]
				if err := s.setState(ctx, good, StateCurrent, ""); err != nil {
					return err
				}
			}
		}
		for _, state := range []RevisionState{StateProvisioning, StateSuperseded} {
			if err := s.settle(ctx, byState(recs, state, "")); err != nil {
				return err
			}
		}
		if good != nil {
			current = good.revision
		}
		return s.tidy(ctx, recs, current)
	})
	return current, err
}

// settle ends records whose change is no longer on the cluster: invalid when marked so,
// deleted otherwise.
func (s *WorkloadStore) settle(ctx context.Context, recs []*record) error {
	for _, r := range recs {
		var err error
		if r.reason() != "" {
			err = s.setState(ctx, r, StateInvalid, r.reason())
		} else {
			err = s.deleteRecord(ctx, r)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// tidy deletes invalid records beyond MaxInvalid (oldest first, never keep's) and chunks whose
// head is gone.
func (s *WorkloadStore) tidy(ctx context.Context, recs map[string]*record, keep string) error {
	limit := s.MaxInvalid
	if limit <= 0 {
		limit = DefaultMaxInvalid
	}
	invalid := byState(recs, StateInvalid, keep) // newest first
	if r := recs[keep]; r != nil && r.head != nil && r.state == StateInvalid {
		limit-- // keep's own place
	}
	for i := max(limit, 0); i < len(invalid); i++ {
		if err := s.deleteRecord(ctx, invalid[i]); err != nil {
			return err
		}
	}
	for _, r := range recs {
		if r.head == nil && len(r.chunks) > 0 {
			if err := s.deleteRecord(ctx, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete removes every record of the rollout from the cluster.
func (s *WorkloadStore) Delete(ctx context.Context, key Key) error {
	if err := key.Validate(); err != nil {
		return err
	}
	recs, err := s.listMeta(ctx, key)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := s.deleteRecord(ctx, r); err != nil {
			return fmt.Errorf("delete records of %s: %w", key.Describe(), err)
		}
	}
	return nil
}

// transitionBackoff paces the retries of a transition that met a conflict. Clusters whose
// kubeconfigs reach one API server (a virtual-cluster setup; the scale test bed, 150 Clusters per
// kwok API server) share their record Secrets there, and a wave writes them all at once: a
// hundred writers racing on one object need far more attempts, spread further apart, than
// conflictBackoff's handful (ten attempts ran out on the scale bed under load). Each attempt
// reads afresh and steps are idempotent; a cancelled ctx ends the retries at the next read.
var transitionBackoff = wait.Backoff{Steps: 40, Duration: 20 * time.Millisecond, Factor: 1.5, Jitter: 1.0, Cap: 2 * time.Second}

// transition runs step on a fresh view of the rollout's records, again from the start when a
// write meets a conflict: steps are idempotent, so re-running one converges.
func (s *WorkloadStore) transition(ctx context.Context, key Key, what string, step func(map[string]*record) error) error {
	err := retry.RetryOnConflict(transitionBackoff, func() error {
		recs, err := s.listMeta(ctx, key)
		if err != nil {
			return err
		}
		return step(recs)
	})
	if err != nil {
		return fmt.Errorf("%s of %s in namespace %s: %w", what, key.Describe(), s.namespace, err)
	}
	return nil
}

func (s *WorkloadStore) find(key Key, recs map[string]*record, revision string) (*record, error) {
	r := recs[revision]
	if r == nil || r.head == nil {
		return nil, fmt.Errorf("revision %s: %w of it for %s", revision, ErrNoRecord, key.Describe())
	}
	return r, nil
}

// byState returns the records in state (except revision except), newest first.
func byState(recs map[string]*record, state RevisionState, except string) []*record {
	var out []*record
	for _, r := range recs {
		if r.head != nil && r.state == state && r.revision != except {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *record) int {
		if c := b.changedAt.Compare(a.changedAt); c != 0 {
			return c
		}
		return compareStrings(b.revision, a.revision)
	})
	return out
}

func (s *WorkloadStore) supersedeOthers(ctx context.Context, recs map[string]*record, revision string) error {
	for _, r := range byState(recs, StateProvisioning, revision) {
		if err := s.setState(ctx, r, StateSuperseded, r.reason()); err != nil {
			return err
		}
	}
	return nil
}

// setState relabels a record's head and sets its reason ("" removes it).
func (s *WorkloadStore) setState(ctx context.Context, r *record, state RevisionState, reason string) error {
	if r.state == state && r.reason() == reason {
		return nil
	}
	var reasonValue any // nil deletes the annotation
	if reason != "" {
		reasonValue = reason
	}
	if err := s.patchMeta(ctx, r.head, map[string]any{LabelState: string(state)}, map[string]any{
		AnnotationStateChangedAt: s.changedStamp(r, state),
		AnnotationReason:         reasonValue,
	}); err != nil {
		return err
	}
	r.state = state
	return nil
}

// patchAnnotations sets annotations of a record Secret whatever its resourceVersion: for values
// whose last writer may win.
func (s *WorkloadStore) patchAnnotations(ctx context.Context, o metav1.Object, annotations map[string]any) error {
	sec, err := s.mergePatch(ctx, o, map[string]any{"annotations": annotations})
	if err != nil {
		return err
	}
	o.SetResourceVersion(sec.ResourceVersion)
	o.SetAnnotations(sec.Annotations)
	return nil
}

// patchMeta merge-patches labels and annotations of a Secret, guarded by the resourceVersion
// it was read at (a change in between is a conflict, and the transition starts over).
func (s *WorkloadStore) patchMeta(ctx context.Context, o metav1.Object, labels, annotations map[string]any) error {
	sec, err := s.mergePatch(ctx, o, map[string]any{
		"resourceVersion": o.GetResourceVersion(),
		"labels":          labels,
		"annotations":     annotations,
	})
	if err != nil {
		return err
	}
	o.SetResourceVersion(sec.ResourceVersion)
	o.SetLabels(sec.Labels)
	o.SetAnnotations(sec.Annotations)
	return nil
}

// mergePatch merge-patches the metadata of the record Secret o; it returns the Secret as the
// patch left it.
func (s *WorkloadStore) mergePatch(ctx context.Context, o metav1.Object, metadata map[string]any) (*corev1.Secret, error) {
	patch, err := json.Marshal(map[string]any{"metadata": metadata})
	if err != nil {
		return nil, err
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: o.GetName()}}
	if err := s.c.Patch(ctx, sec, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return nil, fmt.Errorf("update Secret %s/%s: %w", s.namespace, o.GetName(), err)
	}
	return sec, nil
}

// deleteRecord deletes the head first (the record is gone at once), then its chunks.
func (s *WorkloadStore) deleteRecord(ctx context.Context, r *record) error {
	if r.head != nil {
		if err := s.deleteName(ctx, r.head.GetName()); err != nil {
			return err
		}
		r.head = nil
	}
	for _, c := range r.chunks {
		if err := s.deleteName(ctx, c.GetName()); err != nil {
			return err
		}
	}
	r.chunks = nil
	return nil
}

func (s *WorkloadStore) deleteName(ctx context.Context, name string) error {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: name}}
	if err := s.c.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Secret %s/%s: %w", s.namespace, name, err)
	}
	return nil
}
