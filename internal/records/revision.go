package records

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
)

// RevisionState is where a revision record stands in a workload cluster.
type RevisionState string

const (
	// StateProvisioning: the revision is being applied (or, after MarkRollingBack, a revision is
	// being rolled back). A provisioning record left behind means an interrupted change.
	StateProvisioning RevisionState = "provisioning"
	// StateCurrent: the revision is applied and verified. At most one record is current.
	StateCurrent RevisionState = "current"
	// StateBackup: the last good revision before the current one, what a failure restores.
	StateBackup RevisionState = "backup"
	// StateInvalid: the revision failed here and the cluster is no longer on it; Reason says
	// why. (A record marked invalid whose change is not yet undone keeps its state, with its
	// Reason set: see WorkloadStore.MarkInvalid.)
	StateInvalid RevisionState = "invalid"
	// StateSuperseded: a provisioning revision replaced by another before it settled. Its
	// objects may still be on the cluster: pruning should consider its inventory.
	StateSuperseded RevisionState = "superseded"
)

// ChunkSize is the most compressed record bytes one Secret holds: Secrets are limited to 1 MiB,
// and the rest is left for metadata.
const ChunkSize = 900 << 10

// Bounds on reading a workload revision record. Records are not trusted blindly: anyone who can
// write Secrets in a workload cluster's records namespace can plant one carrying a rollout's
// labels, and every refresh of every cluster of a wave reads them. A record beyond these bounds
// is not decoded (see WorkloadStore.Load), and the store never writes one (MarkProvisioning
// refuses it), so no record it wrote is ever refused.
const (
	// MaxSecretDataSize bounds the record data one Secret may hold: the API server refuses a
	// Secret whose data exceeds 1 MiB, and the store's chunks hold at most ChunkSize bytes, so
	// more was written neither through an API server nor by the store.
	MaxSecretDataSize = 1 << 20
	// MaxRevisionRecordSize bounds the decompressed JSON of one revision record: the bundle's
	// canonical manifests, its inventory and the content saved of adopted objects (at most 256
	// KiB each). Bundles are a few megabytes at most in practice (the project tests 1.15 MB of
	// CRDs, which a record holds about twice over when every object was adopted), so 32 MiB
	// leaves ample room, while a planted record costs a read at most that much memory instead
	// of the gigabyte a 1 MiB gzip bomb expands to. Decompression stops at the bound
	// (io.LimitReader): a bomb is never expanded further.
	MaxRevisionRecordSize = 32 << 20
	// MaxRecordChunks bounds the Secrets of one revision record: enough for a record of
	// MaxRevisionRecordSize that gzip could not shrink at all, in chunks of ChunkSize.
	MaxRecordChunks = MaxRevisionRecordSize/ChunkSize + 2
)

// MaxRecordSize bounds a decompressed management record (progress and ledger) or the
// configuration stored with it, so a corrupt Secret cannot exhaust memory. The management
// cluster is the provider's own; workload records have the tighter MaxRevisionRecordSize.
const MaxRecordSize = 256 << 20

// readLimits bound what reading one record may take. Stores hold the package's bounds; tests
// lower them.
type readLimits struct {
	secretData int   // record data of one Secret
	chunks     int   // Secrets of one record
	size       int64 // decompressed
}

// revisionLimits are the bounds of workload revision records.
var revisionLimits = readLimits{secretData: MaxSecretDataSize, chunks: MaxRecordChunks, size: MaxRevisionRecordSize}

// MaxReasonLength bounds a stored failure reason (annotations share 256 KiB per object).
const MaxReasonLength = 16 << 10

// ObjectRef names one applied object: internal/manifest's, the one definition of an object's
// identity, so that records, apply, prune and claims agree on what is the same object.
type ObjectRef = manifest.ObjectRef

// Revision is the record of one revision of a rollout in one workload cluster.
type Revision struct {
	// Revision is the content hash naming the revision; it must be a DNS label.
	Revision string `json:"revision"`
	// State, AppliedAt, StateChangedAt and Reason live in the record Secret's metadata; the
	// store fills them in on reads.
	State RevisionState `json:"state,omitempty"`
	// Manifests is the canonical JSON of the revision's objects (internal/manifest's
	// Set.Canonical), enough to apply the revision again on restore.
	Manifests json.RawMessage `json:"manifests,omitempty"`
	// Inventory lists the objects the revision applies, for pruning.
	Inventory []ObjectRef `json:"inventory,omitempty"`
	// Adopted lists the objects of the inventory that were on the cluster before the rollout
	// first applied them (see Adopted): restore, prune and destroy give them back instead of
	// deleting them. Each record carries forward what earlier records adopted.
	Adopted []Adopted `json:"adopted,omitempty"`
	// AppliedAt is when the revision was last marked provisioning; MarkProvisioning stamps it
	// with the store's clock when zero.
	AppliedAt time.Time `json:"appliedAt,omitzero"`
	// StateChangedAt is when the record entered State.
	StateChangedAt time.Time `json:"stateChangedAt,omitzero"`
	// Reason says why the revision failed here: set on invalid records, and on records marked
	// invalid whose change is not yet undone (provisioning, current or superseded ones; they
	// become invalid once the cluster is restored). Empty on records not marked invalid.
	Reason string `json:"reason,omitempty"`
	// RolloutKey is the rollout the record belongs to.
	RolloutKey Key `json:"rolloutKey"`
}

// SkippedRecord is a Secret a read of a rollout's records passed over, and why, so that the
// caller can warn, naming it. Either it carries the rollout's labels but is no record of the
// rollout (another rollout's key, no key, a name or labels the store never gives its records:
// planted, or copied by hand), and it is left out of the State and never read, changed or
// deleted; or it is a record of the rollout whose contents could not be read safely (larger
// than the bounds above, torn, corrupt, or holding another rollout's payload), and it stays in
// the State with what its metadata say (revision, state, reason, times) but no Manifests,
// Inventory or Adopted. The latter is only ever an invalid or superseded record: a current,
// backup or provisioning record that cannot be read fails the read instead, since restore and
// pruning depend on its contents.
type SkippedRecord struct {
	// Namespace and Name of the Secret.
	Namespace string
	Name      string
	// Revision its labels name, "" when none.
	Revision string
	Reason   string
}

// String is "Secret <namespace>/<name>: <reason>", for a warning.
func (r SkippedRecord) String() string {
	return "Secret " + r.Namespace + "/" + r.Name + ": " + r.Reason
}

// Adopted is an object a rollout found on a cluster before it first applied it: someone else
// made it (kubectl, Helm, another tool), so the rollout must never delete it.
type Adopted struct {
	Object ObjectRef `json:"object"`
	// Managers are the field managers it had then (empty: it predates field management).
	Managers []string `json:"managers,omitempty"`
	// Saved is its content then, without status and server-set metadata: what a revision that
	// fails before any good one puts back. Empty when it was too large to keep (SavedSize
	// says how large); it is then only given back, as the failed revision left it.
	Saved     json.RawMessage `json:"saved,omitempty"`
	SavedSize int             `json:"savedSize,omitempty"`
}

// AdoptedOf is every object the records of a rollout on one cluster say it adopted, by
// identity, the oldest record of each (its Saved content is the earliest).
func (s *State) AdoptedOf() map[manifest.Identity]Adopted {
	out := map[manifest.Identity]Adopted{}
	all := s.all()
	slices.SortStableFunc(all, func(a, b Revision) int { return a.AppliedAt.Compare(b.AppliedAt) })
	for _, r := range all {
		for _, a := range r.Adopted {
			if _, ok := out[a.Object.Identity()]; !ok {
				out[a.Object.Identity()] = a
			}
		}
	}
	return out
}

// State is what a workload cluster records for one rollout.
type State struct {
	Current      *Revision
	Backup       *Revision
	Provisioning *Revision
	// Invalid records (settled: the cluster is no longer on them), oldest first. Records marked
	// invalid but not yet undone stay in their slot with Reason set; InvalidReason and
	// InvalidRevisions see both.
	Invalid []Revision
	// Superseded records (and any surplus current/backup/provisioning record an interrupted
	// or concurrent writer left), oldest first.
	Superseded []Revision
	// Skipped lists, by name, the Secrets the read passed over (see SkippedRecord): callers
	// should warn about each.
	Skipped []SkippedRecord
}

// LastGood is the revision a failed change returns to: the current record unless it is marked
// invalid, else the backup. Nil when there is none (restoring removes everything).
func (s *State) LastGood() *Revision {
	if s.Current != nil && s.Current.Reason == "" {
		return s.Current
	}
	return s.Backup
}

// all lists every record of the state.
func (s *State) all() []Revision {
	var out []Revision
	for _, r := range []*Revision{s.Current, s.Backup, s.Provisioning} {
		if r != nil {
			out = append(out, *r)
		}
	}
	out = append(out, s.Invalid...)
	return append(out, s.Superseded...)
}

// InvalidReason reports whether revision is recorded invalid here, settled or not yet undone,
// and why.
func (s *State) InvalidReason(revision string) (string, bool) {
	for _, r := range s.all() {
		if r.Revision == revision && r.Reason != "" {
			return r.Reason, true
		}
	}
	return "", false
}

// InvalidRevisions maps every revision recorded invalid here (settled or not yet undone) to
// its reason.
func (s *State) InvalidRevisions() map[string]string {
	out := map[string]string{}
	for _, r := range s.all() {
		if r.Reason != "" {
			out[r.Revision] = r.Reason
		}
	}
	return out
}

// payload is the immutable part of a record, the part that is compressed into Secret data.
type payload struct {
	RolloutKey Key             `json:"rolloutKey"`
	Revision   string          `json:"revision"`
	Manifests  json.RawMessage `json:"manifests,omitempty"`
	Inventory  []ObjectRef     `json:"inventory,omitempty"`
	Adopted    []Adopted       `json:"adopted,omitempty"`
}

// encodePayload returns the compressed JSON of p cut into chunks of at most chunkSize bytes,
// and the SHA-256 of the whole compressed payload. It refuses a record that lim would not let
// a read decode.
func encodePayload(p payload, chunkSize int, lim readLimits) ([][]byte, string, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, "", fmt.Errorf("encode record of revision %s: %w", p.Revision, err)
	}
	if int64(len(raw)) > lim.size {
		return nil, "", fmt.Errorf("the record of revision %s would be %d bytes, more than the %d a record may hold: the bundle is too large", p.Revision, len(raw), lim.size)
	}
	chunks, digest, err := compressChunks(raw, chunkSize)
	if err == nil && len(chunks) > lim.chunks {
		return nil, "", fmt.Errorf("the record of revision %s would take %d Secrets, more than the %d a record may: the bundle is too large", p.Revision, len(chunks), lim.chunks)
	}
	return chunks, digest, err
}

// decodePayload checks chunks against digest and decompresses them (see decompressChunks),
// refusing more than maxSize bytes.
func decodePayload(chunks [][]byte, digest string, maxSize int64) (payload, error) {
	var p payload
	raw, err := decompressChunks(chunks, digest, maxSize)
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, fmt.Errorf("decode record: %w", err)
	}
	return p, nil
}

// compressChunks gzips raw and cuts the result into chunks of at most chunkSize bytes (at
// least one chunk); digest is "sha256:<hex>" of the whole compressed data. Every record kept in
// Secrets (workload revisions, management progress and ledger) is stored this way.
func compressChunks(raw []byte, chunkSize int) (chunks [][]byte, digest string, err error) {
	lastCompressed.Lock()
	if lastCompressed.chunkSize == chunkSize && bytes.Equal(lastCompressed.raw, raw) {
		defer lastCompressed.Unlock()
		return slices.Clone(lastCompressed.chunks), lastCompressed.digest, nil
	}
	lastCompressed.Unlock()
	var buf bytes.Buffer
	zw, ok := gzipWriters.Get().(*gzip.Writer)
	if !ok {
		zw = gzip.NewWriter(nil)
	}
	zw.Reset(&buf)
	_, err = zw.Write(raw)
	if err == nil {
		err = zw.Close()
	}
	gzipWriters.Put(zw) // it keeps buf until its next Reset, and never writes to it again
	if err != nil {
		return nil, "", err
	}
	data := buf.Bytes()
	sum := sha256.Sum256(data)
	for len(data) > chunkSize {
		chunks = append(chunks, data[:chunkSize])
		data = data[chunkSize:]
	}
	chunks = append(chunks, data)
	digest = "sha256:" + hex.EncodeToString(sum[:])
	lastCompressed.Lock()
	lastCompressed.raw, lastCompressed.chunkSize, lastCompressed.chunks, lastCompressed.digest = bytes.Clone(raw), chunkSize, chunks, digest
	lastCompressed.Unlock()
	return slices.Clone(chunks), digest, nil
}

// gzipWriters and gzipReaders are reused between records: a new gzip.Writer allocates and
// clears about 800 KiB of compressor state before it compresses a byte, which made a record of
// a few KiB cost 16 times what compressing it does (0.43 ms against 0.027 ms), and the garbage
// of 1,000 clusters' records and progress writes kept the collector busy. A reader holds its
// window (32 KiB) the same way.
var (
	gzipWriters sync.Pool // *gzip.Writer
	gzipReaders sync.Pool // *gzip.Reader
)

// lastCompressed is compressChunks' last input and result. A run records the same revision on
// every cluster it reaches, so most records repeat the one before: gzip ran once per cluster
// for the same bytes (a twentieth of the provider's CPU at 1,000 clusters). The chunks are
// never written to after they are made, so they are shared, in a fresh slice each time.
var lastCompressed struct {
	sync.Mutex
	raw       []byte
	chunkSize int
	chunks    [][]byte
	digest    string
}

// decompressChunks checks chunks, taken as one stream, against digest (unless it is empty) and
// decompresses them, refusing more than maxSize bytes: decompression stops one byte past
// maxSize, so a record that expands further (a gzip bomb) never costs more memory than that.
// The chunks are read in place, never joined into a copy.
func decompressChunks(chunks [][]byte, digest string, maxSize int64) ([]byte, error) {
	h := sha256.New()
	readers := make([]io.Reader, len(chunks))
	for i, c := range chunks {
		h.Write(c)
		readers[i] = bytes.NewReader(c)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); digest != "" && got != digest {
		return nil, fmt.Errorf("record data does not match its digest (%s, expected %s): torn or edited by hand", got, digest)
	}
	in := io.MultiReader(readers...)
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(in)
	} else {
		err = zr.Reset(in)
	}
	if err != nil {
		return nil, fmt.Errorf("record data is not gzip: %w", err)
	}
	defer gzipReaders.Put(zr)
	raw, err := io.ReadAll(io.LimitReader(zr, maxSize+1))
	if err != nil {
		return nil, fmt.Errorf("decompress record: %w", err)
	}
	if int64(len(raw)) > maxSize {
		return nil, fmt.Errorf("record decompresses to more than %d bytes", maxSize)
	}
	return raw, nil
}

// truncateReason keeps reasons within MaxReasonLength, saying so when it cuts.
func truncateReason(reason string) string {
	const marker = " … (truncated)"
	if len(reason) <= MaxReasonLength {
		return reason
	}
	cut := MaxReasonLength - len(marker)
	for cut > 0 && !utf8Start(reason[cut]) {
		cut--
	}
	return reason[:cut] + marker
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// ErrNoRecord is wrapped by transitions asked about a revision that has no record.
var ErrNoRecord = errors.New("no record")
