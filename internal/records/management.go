package records

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// conflictBackoff paces retries of read-modify-writes that met a conflict: enough attempts for
// a handful of writers racing on one object, a couple of seconds at most.
var conflictBackoff = wait.Backoff{Steps: 10, Duration: 10 * time.Millisecond, Factor: 1.8, Jitter: 0.5, Cap: time.Second}

// DefaultMaxLedger is how many invalid revisions a rollout's ledger keeps (oldest go first).
const DefaultMaxLedger = 100

// Phase is where a rollout run stands.
type Phase string

const (
	PhaseIdle        Phase = "idle"
	PhaseRunning     Phase = "running"
	PhaseFailed      Phase = "failed"
	PhaseSucceeded   Phase = "succeeded"
	PhaseInterrupted Phase = "interrupted"
)

// ClusterOutcome is what the last run did to one cluster.
type ClusterOutcome struct {
	Revision string `json:"revision,omitempty"`
	// State is free-form for the engine: provisioning, current, invalid, restored, skipped, ...
	State      string    `json:"state,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
}

// Progress records the rollout run in progress, or the last one.
type Progress struct {
	Phase    Phase  `json:"phase"`
	Revision string `json:"revision,omitempty"`
	// Wave is 1-based; Waves is how many the run planned.
	Wave      int       `json:"wave,omitempty"`
	Waves     int       `json:"waves,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	// UpdatedAt is stamped by SaveProgress when zero.
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
	// Holder is the identity of the process that ran it (its Lease holder).
	Holder string `json:"holder,omitempty"`
	// Managed says a Terraform state holds the rollout: one of its runs completed (a Create
	// that completes is saved in state) or updated it. Once set it stays set until the records
	// are deleted (destroy). A Create finding it set refuses, and says to import instead.
	Managed  bool                      `json:"managed,omitempty"`
	Clusters map[string]ClusterOutcome `json:"clusters,omitempty"`
	// LostContact names the clusters the run lost contact with after their change began, with
	// the reason. It is written the moment contact is lost, before anything else happens to
	// the cluster (its restore, the next wave), and no later event of the cluster overwrites
	// it: a run killed mid-restore still leaves the next plan the evidence to stop on.
	LostContact map[string]string `json:"lostContact,omitempty"`
	// Placed lists, sorted, every cluster a run of the rollout may have changed, across runs,
	// until the rollout leaves it: the clusters that left its selector are found from it (the
	// workload records stay the truth; this is their index).
	Placed []string `json:"placed,omitempty"`
	// Config is the owning resource's configuration as it last applied it (opaque here), so
	// that `terraform import` can restore it.
	Config json.RawMessage `json:"config,omitempty"`
}

// InvalidEntry is a revision of the rollout that failed, and where.
type InvalidEntry struct {
	Revision string `json:"revision"`
	// Reason is the first reason recorded for the revision.
	Reason   string   `json:"reason"`
	Clusters []string `json:"clusters,omitempty"`
	// RecordedAt is when the revision was first recorded invalid.
	RecordedAt time.Time `json:"recordedAt"`
}

// Rollout is everything the management cluster records for one rollout.
type Rollout struct {
	// Progress is nil when no run was ever recorded.
	Progress *Progress
	// Ledger of invalid revisions, oldest first.
	Ledger []InvalidEntry
}

// ManagementStore keeps each rollout's progress and invalid-revision ledger in one Secret of
// the management cluster (see the package doc for the layout).
//
// The record (progress, with the configuration it keeps for import, and the ledger) is stored
// like the workload records: gzip-compressed JSON, cut into chunks of at most ChunkSize bytes.
// The head Secret holds the first chunk; further chunks live in Secrets named after the head
// and the digest of the compressed data, written before the head, which carries their count
// and the digest. Records of an earlier version (uncompressed "progress" and "ledger" keys)
// are still read, and rewritten compressed on the next change.
type ManagementStore struct {
	c         client.Client
	namespace string
	// Clock stamps progress and ledger entries; the system clock when nil.
	Clock Clock
	// MaxLedger bounds the ledger; DefaultMaxLedger when zero.
	MaxLedger int

	chunkSize int  // ChunkSize; smaller in tests
	unlocked  bool // tests: writers act as separate processes would (no in-process lock)
}

// NewManagementStore keeps records through c in namespace (DefaultNamespace when empty).
func NewManagementStore(c client.Client, namespace string) *ManagementStore {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	return &ManagementStore{c: withRecordsFieldManager(c), namespace: namespace, chunkSize: ChunkSize}
}

// managementPayload is what the head and chunks of a management record hold, compressed.
// Progress.Config is not in it: the configuration is kept apart (see configRef), so that the
// frequent progress writes do not compress it again and Ledger does not read it.
type managementPayload struct {
	Progress *Progress      `json:"progress,omitempty"`
	Ledger   []InvalidEntry `json:"ledger,omitempty"`
}

// configRef, in the head's AnnotationConfig, says where Progress.Config is: compressed and
// cut into Chunks Secrets named managementChunkName(<head>.config, Digest, i), i from 0.
type configRef struct {
	// Digest of the compressed data.
	Digest string `json:"digest"`
	Chunks int    `json:"chunks"`
	// SHA256 of the configuration as given: an unchanged configuration is not written again.
	SHA256 string `json:"sha256"`
}

// AnnotationConfig on a management record's head holds its configRef (JSON).
const AnnotationConfig = "gradual.dev/config"

func configChunkPrefix(key Key) string { return key.ObjectName() + ".config" }

// Data keys of the management record's Secrets.
const (
	managementRecordKey = "record"
	// Keys of records written before they were compressed, still read.
	legacyProgressKey = "progress"
	legacyLedgerKey   = "ledger"
)

// recordLocks serialises this process's read-modify-writes of one management record, so that
// its own writers (a wave's clusters recording at once) do not turn into conflicts; other
// processes are kept apart by the resourceVersion guard.
var recordLocks sync.Map // namespace + "/" + key → *sync.Mutex

func recordLock(namespace string, key Key) *sync.Mutex {
	m, _ := recordLocks.LoadOrStore(namespace+"/"+key.String(), &sync.Mutex{})
	return m.(*sync.Mutex) //nolint:forcetypeassert // recordLocks holds nothing else
}

// Namespace is where the store keeps its records.
func (s *ManagementStore) Namespace() string { return s.namespace }

// Load reads the rollout's progress (with its configuration) and ledger.
func (s *ManagementStore) Load(ctx context.Context, key Key) (*Rollout, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	st, err := s.read(ctx, key, true)
	if err != nil {
		return nil, err
	}
	return st.r, nil
}

// LoadSummary reads the rollout's progress and ledger without the stored configuration
// (Progress.Config is nil): what a plan or refresh needs, without reading megabytes.
func (s *ManagementStore) LoadSummary(ctx context.Context, key Key) (*Rollout, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	st, err := s.read(ctx, key, false)
	if err != nil {
		return nil, err
	}
	if p := st.r.Progress; p != nil {
		p.Config = nil // a record written before compression has it inline
	}
	return st.r, nil
}

// LoadProgress returns the rollout's progress record, with its configuration, nil when none
// was ever saved.
func (s *ManagementStore) LoadProgress(ctx context.Context, key Key) (*Progress, error) {
	r, err := s.Load(ctx, key)
	if err != nil {
		return nil, err
	}
	return r.Progress, nil
}

// Ledger returns the rollout's invalid revisions, oldest first. It does not read the stored
// configuration.
func (s *ManagementStore) Ledger(ctx context.Context, key Key) ([]InvalidEntry, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	st, err := s.read(ctx, key, false)
	if err != nil {
		return nil, err
	}
	return st.r.Ledger, nil
}

// SaveProgress replaces the rollout's progress record (the ledger is kept).
func (s *ManagementStore) SaveProgress(ctx context.Context, key Key, p Progress) error {
	if p.UpdatedAt.IsZero() {
		p.UpdatedAt = s.now()
	}
	p.Clusters = maps.Clone(p.Clusters)
	for name, o := range p.Clusters {
		o.Reason = truncateReason(o.Reason)
		p.Clusters[name] = o
	}
	return s.modify(ctx, key, "save progress", func(r *Rollout) bool {
		r.Progress = &p
		return true
	})
}

// RecordInvalid adds e to the ledger. An entry for the same revision gains e's clusters and
// keeps its first reason and time.
func (s *ManagementStore) RecordInvalid(ctx context.Context, key Key, e InvalidEntry) error {
	if e.Revision == "" {
		return errors.New("record invalid revision: revision is empty")
	}
	if e.RecordedAt.IsZero() {
		e.RecordedAt = s.now()
	}
	e.Reason = truncateReason(e.Reason)
	return s.modify(ctx, key, "record revision "+e.Revision+" invalid", func(r *Rollout) bool {
		i := slices.IndexFunc(r.Ledger, func(x InvalidEntry) bool { return x.Revision == e.Revision })
		if i < 0 {
			e.Clusters = sortedUnique(e.Clusters)
			r.Ledger = append(r.Ledger, e)
			limit := s.MaxLedger
			if limit <= 0 {
				limit = DefaultMaxLedger
			}
			if len(r.Ledger) > limit {
				r.Ledger = r.Ledger[len(r.Ledger)-limit:]
			}
			return true
		}
		old := r.Ledger[i]
		merged := old
		merged.Clusters = sortedUnique(append(slices.Clone(old.Clusters), e.Clusters...))
		if merged.Reason == "" {
			merged.Reason = e.Reason
		}
		if slices.Equal(merged.Clusters, old.Clusters) && merged.Reason == old.Reason {
			return false
		}
		r.Ledger[i] = merged
		return true
	})
}

// ForgetInvalid removes revision from the ledger, so a deliberate retry can apply it again.
// Forgetting a revision that is not in the ledger does nothing.
func (s *ManagementStore) ForgetInvalid(ctx context.Context, key Key, revision string) error {
	return s.modify(ctx, key, "forget invalid revision "+revision, func(r *Rollout) bool {
		n := len(r.Ledger)
		r.Ledger = slices.DeleteFunc(r.Ledger, func(x InvalidEntry) bool { return x.Revision == revision })
		return len(r.Ledger) != n
	})
}

// Delete removes the rollout's progress and ledger.
func (s *ManagementStore) Delete(ctx context.Context, key Key) error {
	if err := key.Validate(); err != nil {
		return err
	}
	// A head someone else wrote is left alone, and the records with it (see get).
	if _, err := s.get(ctx, key); err != nil {
		return fmt.Errorf("delete records of %s: %w", key.Describe(), err)
	}
	// The head first: the record is gone at once; then every chunk.
	if err := s.deleteName(ctx, key.ObjectName()); err != nil {
		return fmt.Errorf("delete records of %s: %w", key.Describe(), err)
	}
	chunks, err := s.listChunks(ctx, key)
	if err != nil {
		return fmt.Errorf("delete records of %s: %w", key.Describe(), err)
	}
	for _, name := range chunks {
		if err := s.deleteName(ctx, name); err != nil {
			return fmt.Errorf("delete records of %s: %w", key.Describe(), err)
		}
	}
	return nil
}

// listChunks names the chunk Secrets of key's record, whichever write they belong to, except
// those someone else wrote (see ForeignWriters), which are left alone.
func (s *ManagementStore) listChunks(ctx context.Context, key Key) ([]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := s.c.List(ctx, list, client.InNamespace(s.namespace), client.MatchingLabels{LabelManagedBy: ManagedBy, LabelRollout: key.Hash()}, client.HasLabels{LabelChunk}); err != nil {
		return nil, fmt.Errorf("list record chunks in namespace %s: %w", s.namespace, err)
	}
	var out []string
	for _, o := range list.Items {
		if o.GetAnnotations()[AnnotationRolloutKey] == key.String() && strings.HasPrefix(o.GetName(), key.ObjectName()+".") && writtenBy(&o) == "" {
			out = append(out, o.GetName())
		}
	}
	return out, nil
}

func (s *ManagementStore) deleteName(ctx context.Context, name string) error {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: name}}
	if err := s.c.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Secret %s/%s: %w", s.namespace, name, err)
	}
	return nil
}

func (s *ManagementStore) now() time.Time { return clockOrSystem(s.Clock).Now() }

// get returns the rollout's Secret, nil when there is none.
func (s *ManagementStore) get(ctx context.Context, key Key) (*corev1.Secret, error) {
	sec := &corev1.Secret{}
	err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: key.ObjectName()}, sec)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read records of %s: Secret %s/%s: %w", key.Describe(), s.namespace, key.ObjectName(), err)
	}
	if got := sec.Annotations[AnnotationRolloutKey]; got != key.String() {
		return nil, fmt.Errorf("Secret %s/%s should hold the records of %s but belongs to %q", s.namespace, sec.Name, key.Describe(), got)
	}
	if by := writtenBy(sec); by != "" {
		return nil, fmt.Errorf("read records of %s: %w", key.Describe(), foreignWriteError(s.namespace, sec.Name, by))
	}
	return sec, nil
}

// errTorn is returned by decode when a chunk the head names is missing: a writer replaced the
// record between the reads. The read is tried again.
var errTorn = errors.New("record changed while it was read")

// stored is a management record as read.
type stored struct {
	sec *corev1.Secret // nil when there is none
	r   *Rollout
	// config is where Progress.Config is kept (nil: none, or a record written before
	// compression, whose progress holds it); configLoaded whether r.Progress.Config was read.
	config       *configRef
	configLoaded bool
}

// read returns the record, with the configuration when withConfig. A read torn by a
// concurrent write is tried again.
func (s *ManagementStore) read(ctx context.Context, key Key, withConfig bool) (*stored, error) {
	var err error
	for range 5 {
		var sec *corev1.Secret
		if sec, err = s.get(ctx, key); err != nil {
			return nil, err
		}
		if sec == nil {
			return &stored{r: &Rollout{}, configLoaded: true}, nil
		}
		var st *stored
		if st, err = s.decode(ctx, key, sec, withConfig); err == nil {
			return st, nil
		}
		if !errors.Is(err, errTorn) {
			break
		}
	}
	return nil, fmt.Errorf("records of %s: Secret %s/%s: %w", key.Describe(), s.namespace, key.ObjectName(), err)
}

// decode reads the record from its head Secret and chunks, or from the uncompressed keys of a
// record written before compression.
func (s *ManagementStore) decode(ctx context.Context, key Key, sec *corev1.Secret, withConfig bool) (*stored, error) {
	st := &stored{sec: sec, r: &Rollout{}, configLoaded: true}
	head, ok := sec.Data[managementRecordKey]
	if !ok {
		if raw := sec.Data[legacyProgressKey]; len(raw) > 0 {
			st.r.Progress = &Progress{}
			if err := json.Unmarshal(raw, st.r.Progress); err != nil {
				return nil, fmt.Errorf("progress: %w", err)
			}
		}
		if raw := sec.Data[legacyLedgerKey]; len(raw) > 0 {
			if err := json.Unmarshal(raw, &st.r.Ledger); err != nil {
				return nil, fmt.Errorf("ledger: %w", err)
			}
		}
		return st, nil
	}
	n, digest := 1, sec.Annotations[AnnotationDigest]
	if v := sec.Annotations[AnnotationChunks]; v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			return nil, fmt.Errorf("bad %s annotation %q", AnnotationChunks, v)
		}
	}
	rest, err := s.readChunks(ctx, sec.Name, digest, 1, n)
	if err != nil {
		return nil, err
	}
	raw, err := decompressChunks(append([][]byte{head}, rest...), digest, MaxRecordSize)
	if err != nil {
		return nil, err
	}
	var p managementPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("decode record: %w", err)
	}
	st.r.Progress, st.r.Ledger = p.Progress, p.Ledger
	if v := sec.Annotations[AnnotationConfig]; v != "" {
		st.config = &configRef{}
		if err := json.Unmarshal([]byte(v), st.config); err != nil || st.config.Chunks < 1 {
			return nil, fmt.Errorf("bad %s annotation %q", AnnotationConfig, v)
		}
		st.configLoaded = false
		if withConfig && st.r.Progress != nil {
			chunks, err := s.readChunks(ctx, configChunkPrefix(key), st.config.Digest, 0, st.config.Chunks)
			if err != nil {
				return nil, err
			}
			if st.r.Progress.Config, err = decompressChunks(chunks, st.config.Digest, MaxRecordSize); err != nil {
				return nil, fmt.Errorf("configuration: %w", err)
			}
			st.configLoaded = true
		}
	}
	return st, nil
}

// readChunks reads chunks from to n-1 of the data with digest stored under prefix.
func (s *ManagementStore) readChunks(ctx context.Context, prefix, digest string, from, n int) ([][]byte, error) {
	var out [][]byte
	for i := from; i < n; i++ {
		chunk := &corev1.Secret{}
		name := managementChunkName(prefix, digest, i)
		err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, chunk)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: chunk %d of %d (Secret %s) is missing", errTorn, i, n, name)
		}
		if err != nil {
			return nil, fmt.Errorf("read chunk %d of %d (Secret %s): %w", i, n, name, err)
		}
		if by := writtenBy(chunk); by != "" {
			return nil, fmt.Errorf("chunk %d of %d: %w", i, n, foreignWriteError(s.namespace, name, by))
		}
		out = append(out, chunk.Data[managementRecordKey])
	}
	return out, nil
}

// writeChunks creates chunks from on of the data with digest under prefix, and returns their
// names. Chunks are named by the digest, so an existing one holds these very bytes.
func (s *ManagementStore) writeChunks(ctx context.Context, key Key, prefix, digest string, chunks [][]byte, from int) ([]string, error) {
	var names []string
	for i := from; i < len(chunks); i++ {
		name := managementChunkName(prefix, digest, i)
		chunk := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Namespace:   s.namespace,
				Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelRollout: key.Hash(), LabelChunk: strconv.Itoa(i)},
				Annotations: map[string]string{AnnotationRolloutKey: key.String(), AnnotationDigest: digest},
			},
			Type: RolloutChunkSecretType,
			Data: map[string][]byte{managementRecordKey: chunks[i]},
		}
		err := createInNamespace(ctx, s.c, chunk)
		if apierrors.IsAlreadyExists(err) {
			// Named by the digest: the chunk is there already, unless someone else put it there.
			err = s.checkWriter(ctx, name)
		}
		if err != nil {
			return names, fmt.Errorf("create Secret %s/%s: %w", s.namespace, name, err)
		}
		names = append(names, name)
	}
	return names, nil
}

// checkWriter fails when Secret name was written by someone other than the provider (see
// ForeignWriters), or cannot be read.
func (s *ManagementStore) checkWriter(ctx context.Context, name string) error {
	sec := &metav1.PartialObjectMetadata{}
	sec.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, sec); err != nil {
		return err
	}
	if by := writtenBy(sec); by != "" {
		return foreignWriteError(s.namespace, name, by)
	}
	return nil
}

func chunkNames(prefix, digest string, from, n int) []string {
	var out []string
	for i := from; i < n; i++ {
		out = append(out, managementChunkName(prefix, digest, i))
	}
	return out
}

// modify is the read-modify-write of the rollout's record: change reports whether it changed
// anything. New chunks are written first (the configuration's only when it changed), then the
// head, guarded by the resourceVersion read (creation by the name); on a conflict the chunks
// written are removed and everything is read and changed again. Once the head is written, the
// chunks of what it replaced are deleted.
func (s *ManagementStore) modify(ctx context.Context, key Key, what string, change func(*Rollout) bool) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if !s.unlocked {
		lock := recordLock(s.namespace, key)
		lock.Lock()
		defer lock.Unlock()
	}
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		st, err := s.read(ctx, key, false)
		if err != nil {
			return err
		}
		readProgress := st.r.Progress
		if !change(st.r) {
			return nil
		}
		return s.write(ctx, key, st, readProgress)
	})
	if err != nil {
		return fmt.Errorf("%s of %s in namespace %s: %w", what, key.Describe(), s.namespace, err)
	}
	return nil
}

// write stores st.r, the record as read (st) and changed since; readProgress is its Progress
// as read, before the change. The chunks come first, the head last (a conflict on the head is
// returned as such, for modify to read and change again); a write that fails removes the
// chunks it wrote, and one that succeeds deletes those of what it replaced.
func (s *ManagementStore) write(ctx context.Context, key Key, st *stored, readProgress *Progress) error {
	config, written, err := s.writeConfig(ctx, key, st, readProgress)
	if err != nil {
		return err
	}
	var replaced []string
	if old := st.config; old != nil && (config == nil || config.Digest != old.Digest) {
		replaced = append(replaced, chunkNames(configChunkPrefix(key), old.Digest, 0, old.Chunks)...)
	}
	chunks, digest, err := compressPayload(st.r, s.chunkSize)
	if err != nil {
		return err
	}
	names, err := s.writeChunks(ctx, key, key.ObjectName(), digest, chunks, 1)
	written = append(written, names...)
	if err != nil {
		s.dropChunks(ctx, key, written)
		return err
	}
	sec, replacedHead, err := s.nextHead(key, st.sec, chunks, digest, config)
	if err != nil {
		return err
	}
	replaced = append(replaced, replacedHead...)
	if err := s.putHead(ctx, sec); err != nil {
		s.dropChunks(ctx, key, written)
		return err
	}
	for _, name := range replaced {
		// Best effort: a chunk left behind is removed with the record (Delete).
		_ = s.deleteName(ctx, name)
	}
	return nil
}

// writeConfig returns where the record's configuration is kept once written, and the chunks it
// wrote for it: nil when there is no configuration. The configuration is written only when it
// changed, since it is large and the progress is written often; a write that fails removes
// what it wrote.
func (s *ManagementStore) writeConfig(ctx context.Context, key Key, st *stored, readProgress *Progress) (*configRef, []string, error) {
	p := st.r.Progress
	switch {
	case p == nil:
		return nil, nil, nil
	case p == readProgress && !st.configLoaded:
		// The progress was read without its configuration (it is kept apart) and changed in
		// place: the configuration kept is still its own.
		return st.config, nil, nil
	case len(p.Config) == 0:
		return nil, nil, nil
	}
	sum := sha256.Sum256(p.Config)
	if st.config != nil && st.config.SHA256 == hex.EncodeToString(sum[:]) {
		return st.config, nil, nil
	}
	chunks, digest, err := compressChunks(p.Config, s.chunkSize)
	if err != nil {
		return nil, nil, err
	}
	config := &configRef{Digest: digest, Chunks: len(chunks), SHA256: hex.EncodeToString(sum[:])}
	written, err := s.writeChunks(ctx, key, configChunkPrefix(key), digest, chunks, 0)
	if err != nil {
		s.dropChunks(ctx, key, written)
		return nil, nil, err
	}
	return config, written, nil
}

// compressPayload compresses the record's progress and ledger into chunks of at most chunkSize,
// and returns them with their digest. The configuration is left out: it is kept apart (see
// configRef).
func compressPayload(r *Rollout, chunkSize int) ([][]byte, string, error) {
	payload := managementPayload{Ledger: r.Ledger}
	if p := r.Progress; p != nil {
		cp := *p
		cp.Config = nil
		payload.Progress = &cp
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, "", err
	}
	return compressChunks(raw, chunkSize)
}

// nextHead returns the head Secret to write for the record's chunks (with digest) and config: sec,
// the head as read, changed, or a new one when sec is nil. replaced lists the chunks of the
// head it replaces, for deletion once it is written.
func (s *ManagementStore) nextHead(key Key, sec *corev1.Secret, chunks [][]byte, digest string, config *configRef) (_ *corev1.Secret, replaced []string, _ error) {
	if sec != nil {
		if old := sec.Annotations[AnnotationDigest]; old != digest {
			n, _ := strconv.Atoi(sec.Annotations[AnnotationChunks])
			replaced = chunkNames(sec.Name, old, 1, n)
		}
	} else {
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:        key.ObjectName(),
				Namespace:   s.namespace,
				Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelRollout: key.Hash()},
				Annotations: map[string]string{AnnotationRolloutKey: key.String()},
			},
			Type: RolloutSecretType,
		}
	}
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	sec.Annotations[AnnotationChunks] = strconv.Itoa(len(chunks))
	sec.Annotations[AnnotationDigest] = digest
	delete(sec.Annotations, AnnotationConfig)
	if config != nil {
		ref, err := json.Marshal(config)
		if err != nil {
			return nil, nil, err
		}
		sec.Annotations[AnnotationConfig] = string(ref)
	}
	sec.Data = map[string][]byte{managementRecordKey: chunks[0]}
	return sec, replaced, nil
}

// putHead writes the head Secret: an update guarded by the resourceVersion read, or a creation.
// A creation that finds the head there already is a conflict, so that the record another writer
// created first is read and changed instead.
func (s *ManagementStore) putHead(ctx context.Context, sec *corev1.Secret) error {
	if sec.ResourceVersion != "" {
		return s.c.Update(ctx, sec)
	}
	err := createInNamespace(ctx, s.c, sec)
	if apierrors.IsAlreadyExists(err) {
		return apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, sec.Name, err)
	}
	return err
}

// dropChunks deletes chunks a write wrote before it failed, unless the head written since names
// them (the same content written by another process).
func (s *ManagementStore) dropChunks(ctx context.Context, key Key, names []string) {
	if len(names) == 0 {
		return
	}
	sec, err := s.get(ctx, key)
	if err != nil {
		return
	}
	keep := map[string]bool{}
	if sec != nil {
		n, _ := strconv.Atoi(sec.Annotations[AnnotationChunks])
		for _, name := range chunkNames(sec.Name, sec.Annotations[AnnotationDigest], 1, n) {
			keep[name] = true
		}
		var ref configRef
		if json.Unmarshal([]byte(sec.Annotations[AnnotationConfig]), &ref) == nil {
			for _, name := range chunkNames(configChunkPrefix(key), ref.Digest, 0, ref.Chunks) {
				keep[name] = true
			}
		}
	}
	for _, name := range names {
		if !keep[name] {
			_ = s.deleteName(ctx, name)
		}
	}
}

func sortedUnique(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}
