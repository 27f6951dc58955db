// Package delivery carries a revision of manifests to workload clusters. It is the engine's World:
// server-side apply and readiness waits (internal/apply), the records in each workload cluster
// and in the management cluster (internal/records), and one cached client per cluster
// (internal/fleet). Resources call Observe at refresh and plan time, Run at apply time and
// Destroy at delete time; they stay Terraform glue.
//
// How a revision reaches a cluster is a delivery engine's (port.go): direct (direct.go) or through
// Flux (flux.go), chosen once when the service is configured (WithFlux); the rest of the package
// is the same for both.
//
// Run takes the rollout's Lease, reads the fleet and plans under it as the plan did (planRun),
// executes the waves on the World (runWorld, world.go) and records how the run ended
// (finishRun). Whose fault a failure is, internal/blame decides (errors.go); what delivery adds
// is whether a cluster that failed has left the fleet.
package delivery

import (
	"fmt"
	"strings"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/health"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Spec is one rollout as configured.
type Spec struct {
	Key              records.Key
	ClusterNamespace string
	RecordNamespace  string
	Objects          *manifest.Set
	// Sensitive names (manifest.Key) the objects of Objects from sensitive_manifests: through
	// Flux they are published and recorded encrypted (fluxdelivery.Settings.Seal).
	Sensitive      []string
	Revision       string
	Policy         engine.Policy
	ForceConflicts bool
	HTTPChecks     []HTTPCheck
	// Health judges the new revision's objects of the kinds it has CEL expressions for, instead
	// of kstatus (verify.health_checks); restored backups are judged by kstatus alone.
	Health *health.Checker
	// ClusterGates re-reads each cluster's own health before its wave and when its change is
	// verified (verify.cluster_gates; gate.go).
	ClusterGates bool
	// GatePolicy is which Nodes the gate counts and how many may be unready
	// (verify.gate_node_selector, verify.gate_max_unready_nodes).
	GatePolicy blame.GatePolicy
	// CheckJob, when set, runs in each cluster after the new revision's objects are ready and
	// its HTTP checks pass (verify.check_job; checkjob.go). Through Flux it is part of the
	// revision's artifact, waited on by kustomize-controller (CheckJob.ForFlux).
	CheckJob *CheckJob
	// Ignore names fields left to other controllers (ignore_fields): apply leaves them to
	// their owners and drift does not count them (see apply.Applier.WithIgnore).
	Ignore apply.Ignore
	// Retry applies the revision even when it is recorded invalid.
	Retry bool
	// AdoptUnrecorded takes over, as adopted (pre-existing), the objects of this rollout found
	// on a cluster whose records of it are gone (unrecorded.go); without it such a cluster is
	// held back. It is `adopt = true` written in the configuration, not adopt's default.
	AdoptUnrecorded bool
	// Redact lists values (those at a rollout's sensitive_paths) that error messages of the
	// clusters' work must not repeat: they are replaced before an error is classified, logged,
	// recorded or returned.
	Redact []string
	// Values, when set, makes Objects a template: each cluster gets Objects with its own
	// variables substituted (Render), kept in Rendered by cluster name. The revision names the
	// template and these rules; each cluster's record holds what was rendered for it.
	Values   *Values
	Rendered map[string]*manifest.Set
	// Variables are, by cluster name, the variables Render substituted there: through Flux the
	// artifact is the template, and each cluster's Kustomization substitutes them itself.
	Variables map[string]map[string]string
	// Stages, when set, are resolved against the fleet into Policy.Stages each time it is read
	// (plan and apply); Policy.PromoteUntil names the last one this apply carries the revision to.
	Stages []StageSpec
	// Preview says which planned clusters a plan dry-runs the revision on, and for how long
	// (see Service.CheckAndPreview); apply does not use it.
	Preview PreviewSpec
	// Kustomize shapes each cluster's Kustomization in Flux mode (a module's depends_on as
	// Flux's dependsOn, ApplyOnce); direct delivery does not use it.
	Kustomize FluxKustomize
}

// State is what one picked cluster runs, in a word: the rollout's `summary`, `attention` and
// `gradual_rollout_status` show it.
type State string

// Cluster states.
const (
	StateCurrent      State = "current"      // verified on Revision, objects as applied
	StateDrifted      State = "drifted"      // on Revision per the records, but objects are missing or edited
	StateProvisioning State = "provisioning" // a run stopped while changing it
	StatePending      State = "pending"      // nothing applied yet
	// StateValuesChanged: on Revision, but the manifests render differently for the cluster now
	// (a label, annotation or topology variable it takes a value from changed).
	StateValuesChanged State = "values-changed"
	// StateRecordsMissing: the cluster holds no record of the rollout, but objects of it are
	// there under its field manager (the records were deleted): what runs is unknown, and the
	// cluster is held back until the user chooses (unrecorded.go).
	StateRecordsMissing State = "records-missing"
)

// ClusterState is what one picked cluster runs.
type ClusterState struct {
	Revision string
	State    State
	Backup   string
	// Drift lists the objects that are missing or edited (for StateDrifted); for
	// StateValuesChanged, the objects that render differently now; for StateRecordsMissing,
	// the objects of the rollout found there ("Kind ns/name").
	Drift []string
	// SkippedRecords names the record Secrets of this rollout on the cluster that were not read
	// (oversized, unreadable, or another rollout's under our labels), with the reason.
	SkippedRecords []string
	// recorded is the current record's objects (canonical JSON) while Observe compares them with
	// what the bundle renders now; never kept.
	recorded []byte
	// empty says its records hold nothing of the rollout, delivering directly: whether objects
	// of the rollout are there all the same is for markUnrecorded to find out (unrecorded.go).
	empty bool
}

// SkippedRecords lists, per cluster, the record Secrets the observation left unread, for a
// warning ("cluster: Secret ns/name: reason").
func (o *Observation) SkippedRecords() []string {
	var out []string
	for _, name := range sortedKeys(o.Clusters) {
		for _, s := range o.Clusters[name].SkippedRecords {
			out = append(out, name+": "+s)
		}
	}
	return out
}

// InvalidRevision is one entry of the management cluster's ledger.
type InvalidRevision struct {
	Revision   string
	Reason     string
	Clusters   []string
	RecordedAt time.Time
	// FromClusters says only the clusters' own records hold it: the run that saw the failure
	// could not write the ledger (the management cluster unreachable, its Lease lost). The next
	// apply writes it there (Run).
	FromClusters bool
}

// Observation is what the clusters and the records say about one rollout.
type Observation struct {
	Discovery *fleet.Discovery
	// Targets are the picked clusters with their records, for engine.PlanRollout.
	Targets []engine.Target
	// Clusters holds every eligible picked cluster.
	Clusters map[string]ClusterState
	// Skipped holds the picked clusters that cannot be changed now, with the reason.
	Skipped map[string]string
	// Backup is the revision most clusters would return to: the most common recorded backup.
	Backup string
	Ledger []InvalidRevision
	// Interrupted describes the last run when it did not finish; nil when it did.
	Interrupted *Interruption
	// Managed says a Terraform state holds the rollout already (records.Progress.Managed).
	Managed bool
	// LostContact names the clusters the last run of LostContactRevision lost contact with
	// after its change began (engine.StatusLostContact), with the reason: the next run of the
	// same revision does not go past them without retry_invalid.
	LostContact         map[string]string
	LostContactRevision string
	// Leaving are the clusters earlier runs changed that the rollout no longer picks (relabelled,
	// or removed from `names`), sorted: the next apply deletes or keeps their objects by
	// deletion_policy and removes their records. Placed is every cluster earlier runs changed
	// whose Cluster still exists.
	Leaving, Placed []string
	// Previous names, when the rollout moves from another engine (Service.MovingFrom), the
	// clusters that engine still holds, with the revision its records hold there; Moving, those
	// of them it is in charge of (the new engine verified nothing there yet). See move.go.
	Previous, Moving map[string]string
}

// Interruption is a run that did not finish, as its progress record left it.
type Interruption struct {
	// Phase is records.PhaseRunning (the process was killed, or is running now) or
	// records.PhaseInterrupted (cancelled, e.g. Ctrl-C or a timeout).
	Phase     records.Phase
	Revision  string
	Wave      int
	Waves     int
	Holder    string
	UpdatedAt time.Time
	// Clusters are the ones it left in flight.
	Clusters []string
}

// String says what the interruption left, for plan warnings.
func (i *Interruption) String() string {
	s := fmt.Sprintf("The last apply of revision %s (by %s) did not finish: its progress record says %s", i.Revision, i.Holder, i.Phase)
	if i.Waves > 0 {
		s += fmt.Sprintf(" at wave %d of %d", i.Wave, i.Waves)
	}
	if !i.UpdatedAt.IsZero() {
		s += ", last updated " + i.UpdatedAt.UTC().Format(time.RFC3339)
	}
	s += "."
	if len(i.Clusters) > 0 {
		s += " Clusters it left in flight: " + strings.Join(i.Clusters, ", ") + "; this apply settles them first (applies its revision again, or completes a rollback)."
	}
	return s
}

// LostContactRefusal is the refusal of revision when the last run of it lost contact with
// clusters after its change began (nil when it did not, or retry is set): plan and apply say
// it in the same words.
func (o *Observation) LostContactRefusal(revision, what string, retry bool) error {
	if retry || len(o.LostContact) == 0 || o.LostContactRevision != revision {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The last apply of revision %s of %s lost contact with these clusters after its change began: they answered "+
		"before their wave and could not be written, read or verified after it.", revision, what)
	for _, name := range sortedKeys(o.LostContact) {
		fmt.Fprintf(&b, "\n  - %s: %s", name, o.LostContact[name])
	}
	b.WriteString("\n\nThat is not recorded as the revision's failure (API errors are retried, not blamed), but the rollout does not " +
		"take the same revision further on that evidence. Look at those clusters first (a revision can break a cluster's admission " +
		"or API server). Then change the manifests, or (gradual_rollout) set retry_invalid = true to apply this revision again on purpose.")
	return usererr.New("Clusters Lost Contact After This Revision", b.String())
}

// InvalidKnown reports whether the ledger lists revision.
func (o *Observation) InvalidKnown(revision string) bool {
	_, ok := o.Invalid(revision)
	return ok
}

// Invalid returns the ledger entry for revision, if any.
func (o *Observation) Invalid(revision string) (InvalidRevision, bool) {
	for _, l := range o.Ledger {
		if l.Revision == revision {
			return l, true
		}
	}
	return InvalidRevision{}, false
}

// InvalidRefusal is the one wording of a revision refused because the ledger holds it invalid,
// at plan time and at apply. what names whose revision it is ("rollout fleet/web", "module dns
// (version 1.2) of assignment fleet/base"); retry says whether `retry_invalid` can apply it
// anyway. The summary is "Revision Recorded Invalid" for every resource.
func InvalidRefusal(what, revision, recordNamespace string, entry InvalidRevision, retry bool) *usererr.Error {
	detail := fmt.Sprintf("Revision %s of %s was recorded invalid", revision, what)
	if !entry.RecordedAt.IsZero() {
		detail += " at " + entry.RecordedAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	detail += fmt.Sprintf(" after it failed on %s:\n\n  %s\n\n"+
		"The ledger lives in the management cluster (namespace %q), so it holds across lost or replaced state. ",
		strings.Join(entry.Clusters, ", "), entry.Reason, recordNamespace)
	if retry {
		detail += "Change the manifests (a new revision), or, once what made it fail is fixed outside the manifests, " +
			"set retry_invalid = true to apply this revision again on purpose."
	} else {
		detail += "Change the manifests to apply a new revision."
	}
	return usererr.New("Revision Recorded Invalid", detail)
}
