package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
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
	Holder   string                    `json:"holder,omitempty"`
	Clusters map[string]ClusterOutcome `json:"clusters,omitempty"`
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
type ManagementStore struct {
	c         client.Client
	namespace string
	// Clock stamps progress and ledger entries; the system clock when nil.
	Clock Clock
	// MaxLedger bounds the ledger; DefaultMaxLedger when zero.
	MaxLedger int
}

// NewManagementStore keeps records through c in namespace (DefaultNamespace when empty).
func NewManagementStore(c client.Client, namespace string) *ManagementStore {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	return &ManagementStore{c: c, namespace: namespace}
}

// Namespace is where the store keeps its records.
func (s *ManagementStore) Namespace() string { return s.namespace }

// Load reads the rollout's progress and ledger with one request.
func (s *ManagementStore) Load(ctx context.Context, key Key) (*Rollout, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	sec, err := s.get(ctx, key)
	if err != nil || sec == nil {
		return &Rollout{}, err
	}
	return s.decode(key, sec)
}

// LoadProgress returns the rollout's progress record, nil when none was ever saved.
func (s *ManagementStore) LoadProgress(ctx context.Context, key Key) (*Progress, error) {
	r, err := s.Load(ctx, key)
	if err != nil {
		return nil, err
	}
	return r.Progress, nil
}

// Ledger returns the rollout's invalid revisions, oldest first.
func (s *ManagementStore) Ledger(ctx context.Context, key Key) ([]InvalidEntry, error) {
	r, err := s.Load(ctx, key)
	if err != nil {
		return nil, err
	}
	return r.Ledger, nil
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
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: key.ObjectName()}}
	if err := s.c.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete records of %s: Secret %s/%s: %w", key.Describe(), s.namespace, sec.Name, err)
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
	return sec, nil
}

func (s *ManagementStore) decode(key Key, sec *corev1.Secret) (*Rollout, error) {
	r := &Rollout{}
	if raw := sec.Data["progress"]; len(raw) > 0 {
		r.Progress = &Progress{}
		if err := json.Unmarshal(raw, r.Progress); err != nil {
			return nil, fmt.Errorf("records of %s: Secret %s/%s: progress: %w", key.Describe(), s.namespace, sec.Name, err)
		}
	}
	if raw := sec.Data["ledger"]; len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.Ledger); err != nil {
			return nil, fmt.Errorf("records of %s: Secret %s/%s: ledger: %w", key.Describe(), s.namespace, sec.Name, err)
		}
	}
	return r, nil
}

// modify is the read-modify-write of the rollout's Secret: change reports whether it changed
// anything. The write is guarded by the resourceVersion read (creation by the name), and on a
// conflict everything is read and changed again.
func (s *ManagementStore) modify(ctx context.Context, key Key, what string, change func(*Rollout) bool) error {
	if err := key.Validate(); err != nil {
		return err
	}
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		sec, err := s.get(ctx, key)
		if err != nil {
			return err
		}
		r := &Rollout{}
		if sec != nil {
			if r, err = s.decode(key, sec); err != nil {
				return err
			}
		}
		if !change(r) {
			return nil
		}
		data := map[string][]byte{}
		if r.Progress != nil {
			if data["progress"], err = json.Marshal(r.Progress); err != nil {
				return err
			}
		}
		if len(r.Ledger) > 0 {
			if data["ledger"], err = json.Marshal(r.Ledger); err != nil {
				return err
			}
		}
		if sec != nil {
			sec.Data = data
			return s.c.Update(ctx, sec)
		}
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:        key.ObjectName(),
				Namespace:   s.namespace,
				Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelRollout: key.Hash()},
				Annotations: map[string]string{AnnotationRolloutKey: key.String()},
			},
			Type: RolloutSecretType,
			Data: data,
		}
		err = createInNamespace(ctx, s.c, sec)
		if apierrors.IsAlreadyExists(err) {
			// Another writer created it first: read theirs and change it instead.
			return apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, sec.Name, err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("%s of %s in namespace %s: %w", what, key.Describe(), s.namespace, err)
	}
	return nil
}

func sortedUnique(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}
