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

// MaxRecordSize bounds a decompressed record, so a corrupt or hostile Secret cannot exhaust
// memory.
const MaxRecordSize = 256 << 20

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
// and the SHA-256 of the whole compressed payload.
func encodePayload(p payload, chunkSize int) ([][]byte, string, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, "", fmt.Errorf("encode record of revision %s: %w", p.Revision, err)
	}
	return compressChunks(raw, chunkSize)
}

// decodePayload joins chunks, checks them against digest and decompresses them.
func decodePayload(chunks [][]byte, digest string) (payload, error) {
	var p payload
	raw, err := decompressChunks(chunks, digest)
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
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	data := buf.Bytes()
	sum := sha256.Sum256(data)
	for len(data) > chunkSize {
		chunks = append(chunks, data[:chunkSize])
		data = data[chunkSize:]
	}
	chunks = append(chunks, data)
	return chunks, "sha256:" + hex.EncodeToString(sum[:]), nil
}

// decompressChunks joins chunks, checks them against digest (unless it is empty) and
// decompresses them, refusing more than MaxRecordSize bytes.
func decompressChunks(chunks [][]byte, digest string) ([]byte, error) {
	data := bytes.Join(chunks, nil)
	sum := sha256.Sum256(data)
	if got := "sha256:" + hex.EncodeToString(sum[:]); digest != "" && got != digest {
		return nil, fmt.Errorf("record data does not match its digest (%s, expected %s): torn or edited by hand", got, digest)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("record data is not gzip: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, MaxRecordSize+1))
	if err != nil {
		return nil, fmt.Errorf("decompress record: %w", err)
	}
	if len(raw) > MaxRecordSize {
		return nil, fmt.Errorf("record decompresses to more than %d bytes", MaxRecordSize)
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
