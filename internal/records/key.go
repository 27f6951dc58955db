package records

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultNamespace holds the records unless a store is given another namespace.
const DefaultNamespace = "gradual-system"

// Labels, annotations and types of the record objects.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "gradual"
	LabelRollout   = "gradual.dev/rollout"
	LabelRevision  = "gradual.dev/revision"
	LabelState     = "gradual.dev/state"
	LabelChunk     = "gradual.dev/chunk"

	AnnotationRolloutKey     = "gradual.dev/rollout-key"
	AnnotationAppliedAt      = "gradual.dev/applied-at"
	AnnotationStateChangedAt = "gradual.dev/state-changed-at"
	AnnotationReason         = "gradual.dev/reason"
	AnnotationChunks         = "gradual.dev/chunks"
	AnnotationDigest         = "gradual.dev/digest"

	// RevisionSecretType is the type of workload-cluster revision Secrets.
	RevisionSecretType = "gradual.dev/revision.v1"
	// RolloutSecretType is the type of the management-cluster progress and ledger Secret.
	RolloutSecretType = "gradual.dev/rollout.v1"
	// RolloutChunkSecretType is the type of the Secrets holding the chunks of a management
	// record beyond its head.
	RolloutChunkSecretType = "gradual.dev/rollout-chunk.v1"
)

// readableLength bounds the human-readable part of object names; the hash that follows keeps
// them unique.
const readableLength = 40

// Key names a rollout: the kind of owner ("rollout", "module-assignment", ...) and the owner's
// namespace and name in the management cluster. One workload cluster holds the records of
// many rollouts, told apart by their keys.
type Key struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// String is "kind/namespace/name", the form stored in the rollout-key annotation.
func (k Key) String() string { return k.Kind + "/" + k.Namespace + "/" + k.Name }

// The kinds of keys: a rollout, a module assignment, and one module of an assignment (named
// "assignment.module").
const (
	KindRollout    = "rollout"
	KindAssignment = "module-assignment"
	KindModule     = "module"
)

// Describe is the key as messages show it: "rollout fleet/ingress", and for a module of an
// assignment "module-assignment fleet/base (module dns)".
func (k Key) Describe() string {
	if k.Kind == KindModule {
		if a, m, ok := strings.Cut(k.Name, "."); ok {
			return fmt.Sprintf("%s %s/%s (module %s)", KindAssignment, k.Namespace, a, m)
		}
	}
	return k.Kind + " " + k.Namespace + "/" + k.Name
}

// Validate reports a key that cannot name records.
func (k Key) Validate() error {
	switch {
	case k.Kind == "" || k.Name == "":
		return fmt.Errorf("rollout key %q: kind and name are required", k.String())
	case strings.Contains(k.Kind, "/") || strings.Contains(k.Namespace, "/") || strings.Contains(k.Name, "/"):
		return fmt.Errorf("rollout key %q: kind, namespace and name must not contain '/'", k.String())
	}
	return nil
}

// Hash is the first 16 hex digits of SHA-256 of String(): the value of the gradual.dev/rollout
// label and the unique part of object names.
func (k Key) Hash() string {
	sum := sha256.Sum256([]byte(k.String()))
	return hex.EncodeToString(sum[:])[:16]
}

// base is "<readable>.<hash>", a valid DNS subdomain whatever the key holds.
func (k Key) base() string {
	var b strings.Builder
	for _, r := range strings.ToLower(k.Kind + "-" + k.Namespace + "-" + k.Name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	readable := b.String()
	if len(readable) > readableLength {
		readable = readable[:readableLength]
	}
	readable = strings.Trim(readable, "-")
	if readable == "" {
		readable = "x"
	}
	return readable + "." + k.Hash()
}

// ObjectName is the name of the rollout's management-cluster Secret and Lease.
func (k Key) ObjectName() string { return "gradual." + k.base() }

// revisionSecretName is the name of the head Secret of a revision record.
func (k Key) revisionSecretName(revision string) string {
	return "gradual.v1." + k.base() + "." + revision
}

// managementChunkName names chunk i (1-based beyond the head) of the management record whose
// compressed data has digest: chunks of different writes never share a name, so a write that
// loses a race never tears the record another write committed.
func managementChunkName(head, digest string, i int) string {
	d := strings.TrimPrefix(digest, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	return fmt.Sprintf("%s.%s.%d", head, d, i)
}

// chunkSecretName names chunk i (1-based beyond the head) of a revision record.
func chunkSecretName(head string, i int) string { return fmt.Sprintf("%s.%d", head, i) }

// validateRevision accepts revision names that can be a DNS label and a label value, as the
// content hashes of internal/manifest are.
func validateRevision(revision string) error {
	if revision == "" {
		return errors.New("revision is empty")
	}
	if errs := validation.IsDNS1123Label(revision); len(errs) > 0 {
		return fmt.Errorf("revision %q cannot name a record: %s", revision, strings.Join(errs, "; "))
	}
	return nil
}

// ParseKey reads a key back from its String form.
func ParseKey(s string) (Key, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return Key{}, fmt.Errorf("rollout key %q: want kind/namespace/name", s)
	}
	k := Key{Kind: parts[0], Namespace: parts[1], Name: parts[2]}
	return k, k.Validate()
}

// LegacyFieldManager is the server-side apply field manager that every rollout and module
// assignment shared before each key got its own (Key.FieldManager). Objects applied then are
// still managed by it: it is ours, of no key in particular, and the next apply of a key takes
// its fields over.
const LegacyFieldManager = "gradual"

// fieldManagerPrefix starts the field manager of every key.
const fieldManagerPrefix = LegacyFieldManager + "/"

// MaxFieldManagerLength is the API server's limit on a field manager's name.
const MaxFieldManagerLength = 128

// FieldManager is the server-side apply field manager that k applies with:
// "gradual/<kind>/<namespace>/<name>". One longer than MaxFieldManagerLength is shortened
// deterministically: its beginning, "~" and Hash(), exactly MaxFieldManagerLength long, so it
// stays unique and recognizably ours, though ParseFieldManager cannot read the key back from
// it. (A full name that happens to look shortened is shortened too, so none is ambiguous.)
func (k Key) FieldManager() string {
	m := fieldManagerPrefix + k.String()
	if len(m) <= MaxFieldManagerLength && !shortened(m) {
		return m
	}
	suffix := "~" + k.Hash()
	return m[:MaxFieldManagerLength-len(suffix)] + suffix
}

// shortened reports whether m has the form of a shortened field manager: MaxFieldManagerLength
// long, ending in "~" and 16 hex digits.
func shortened(m string) bool {
	const hashLength = 16
	if len(m) != MaxFieldManagerLength || m[len(m)-hashLength-1] != '~' {
		return false
	}
	_, err := hex.DecodeString(m[len(m)-hashLength:])
	return err == nil
}

// IsFieldManager reports whether m is a field manager of this provider: a key's
// (Key.FieldManager) or the legacy one.
func IsFieldManager(m string) bool {
	return m == LegacyFieldManager || strings.HasPrefix(m, fieldManagerPrefix)
}

// ParseFieldManager reads the key back from its field manager. It fails for the legacy
// manager, for one that is not ours and for a shortened one (whose key is not all in it).
func ParseFieldManager(m string) (Key, bool) {
	rest, ok := strings.CutPrefix(m, fieldManagerPrefix)
	if !ok || shortened(m) {
		return Key{}, false
	}
	k, err := ParseKey(rest)
	if err != nil || k.FieldManager() != m {
		return Key{}, false
	}
	return k, true
}

// DescribeFieldManager names the owner behind field manager m for messages: "rollout
// fleet/web" for a key's, "another rollout or module assignment (field manager "...")" for a
// shortened one, and the manager itself, quoted, for anyone else's.
func DescribeFieldManager(m string) string {
	if k, ok := ParseFieldManager(m); ok {
		return k.Describe()
	}
	if IsFieldManager(m) {
		return fmt.Sprintf("another rollout or module assignment (field manager %q)", m)
	}
	return fmt.Sprintf("field manager %q", m)
}
