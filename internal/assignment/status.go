package assignment

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// State is a cluster's state, as an assignment's summary counts them: the worst state of the
// cluster's modules (see ClusterStatus.State).
type State string

// Cluster states.
const (
	StateCurrent        = State(delivery.StateCurrent) // every module applied on its revision, objects as applied
	StateKept     State = "kept"                       // ApplyOnce: runs an older version of a module, on purpose
	StateOutdated State = "outdated"                   // a module runs another revision, or none yet (the cluster has others)
	StateJoining  State = "joining"                    // picked, but no module applied yet
	// StateValuesChanged: a module renders differently for the cluster now than what it got (a
	// label, annotation or topology variable it takes a value from changed); the plan updates it.
	StateValuesChanged       = State(delivery.StateValuesChanged)
	StateProvisioning        = State(delivery.StateProvisioning) // an apply stopped while changing a module there
	StateDrifted             = State(delivery.StateDrifted)      // a module's objects are missing or edited
	StateBlocked             = State(records.BindingBlocked)     // a module it depends on is not applied there
	StateFailed              = State(records.BindingFailed)      // a module failed there and was restored
	StateSkipped       State = "skipped"                         // picked, but cannot be changed now
	StateLeaving       State = "leaving"                         // bound, but no longer picked
	// StateRecordsMissing: a module's records are gone from the cluster while its objects are
	// there (delivery.StateRecordsMissing): what runs is unknown, and the module is held back.
	StateRecordsMissing = State(delivery.StateRecordsMissing)
)

// severity orders states from fine to worst; a cluster shows its worst module's. Records
// missing is the worst: nothing can be said of the module there until the user chooses.
var severity = []State{StateCurrent, StateKept, StateOutdated, StateJoining, StateValuesChanged, StateProvisioning, StateDrifted, StateBlocked, StateFailed,
	StateRecordsMissing}

// ModuleStatus is one module on one cluster: its binding and what its records say now.
type ModuleStatus struct {
	Module    string    `json:"module"`
	Revision  string    `json:"revision,omitempty"`
	AppliedAt time.Time `json:"appliedAt,omitzero"`
	// Result is the binding's result ("" when the module is not bound there).
	Result records.BindingResult `json:"result,omitempty"`
	Reason string                `json:"reason,omitempty"`
	// State is the module's delivery state on the cluster (current, drifted, values-changed,
	// provisioning, pending).
	State delivery.State `json:"state,omitempty"`
	// Drift lists the drifted objects with the fields that differ, never their values; for
	// values-changed, the objects that render differently now.
	Drift []string `json:"drift,omitempty"`
}

// ClusterStatus is one picked (or leaving) cluster of an assignment.
type ClusterStatus struct {
	Name    string         `json:"name"`
	State   State          `json:"state"`
	Detail  string         `json:"detail,omitempty"`
	Modules []ModuleStatus `json:"modules,omitempty"`
}

// Status describes every cluster of the observation: eligible clusters with each configured
// module, skipped ones with their reason, leaving ones. Sorted by name.
func Status(obs *Observation, spec Spec) []ClusterStatus {
	out := make([]ClusterStatus, 0, len(obs.Eligible)+len(obs.Skipped)+len(obs.Leaving))
	for _, cluster := range obs.Eligible {
		cs := ClusterStatus{Name: cluster}
		for _, m := range spec.Modules {
			ms := ModuleStatus{Module: m.Name}
			if b, ok := obs.Binding(cluster, m.Name); ok {
				ms.Revision, ms.AppliedAt, ms.Result, ms.Reason = b.Revision, b.AppliedAt, b.Result, b.Reason
			}
			if o := obs.Modules[m.Name]; o != nil {
				st := o.Clusters[cluster]
				ms.State = st.State
				ms.Drift = slices.Sorted(slices.Values(st.Drift))
			}
			cs.Modules = append(cs.Modules, ms)
		}
		cs.State, cs.Detail = judge(cs.Modules, spec)
		out = append(out, cs)
	}
	for cluster, reason := range obs.Skipped {
		out = append(out, ClusterStatus{Name: cluster, State: StateSkipped, Detail: "skipped: " + reason})
	}
	for _, cluster := range obs.Leaving {
		what := "its modules are removed (deletion_policy = \"delete\")"
		if spec.Orphan {
			what = "its objects stay, its records and bindings go (deletion_policy = \"orphan\")"
		}
		out = append(out, ClusterStatus{Name: cluster, State: StateLeaving, Detail: "leaving: no longer matches the selector; " + what})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// judge returns a cluster's state (its worst module's) and what is wrong, one clause per module
// that is not fine ("" when all are).
func judge(mods []ModuleStatus, spec Spec) (State, string) {
	state, bound := StateCurrent, false
	var notes []string
	for _, ms := range mods {
		if ms.Result != "" {
			bound = true
		}
		s, note := judgeModule(ms, spec)
		if slices.Index(severity, s) > slices.Index(severity, state) {
			state = s
		}
		if note != "" {
			notes = append(notes, fmt.Sprintf("module %s %s", ms.Module, note))
		}
	}
	if !bound && len(mods) > 0 && state != StateRecordsMissing {
		return StateJoining, "joining: no module applied yet"
	}
	if len(notes) == 0 {
		return state, ""
	}
	return state, string(state) + ": " + strings.Join(notes, "; ")
}

func judgeModule(ms ModuleStatus, spec Spec) (State, string) {
	m, _ := spec.Module(ms.Module)
	switch {
	case ms.State == delivery.StateRecordsMissing:
		// First: its binding may say applied, but the cluster's records of it are gone.
		return StateRecordsMissing, delivery.RecordsMissingReason(ms.Drift)
	case ms.Result == "":
		return StateOutdated, "not applied yet"
	case ms.Result == records.BindingFailed:
		return StateFailed, fmt.Sprintf("failed on revision %s: %s", ms.Revision, ms.Reason)
	case ms.Result == records.BindingBlocked:
		return StateBlocked, "blocked: " + ms.Reason
	case ms.State == delivery.StateProvisioning:
		return StateProvisioning, "interrupted: an apply stopped while changing it"
	case ms.State == delivery.StateDrifted:
		if len(ms.Drift) == 0 {
			return StateDrifted, "drifted: objects missing or edited"
		}
		return StateDrifted, "drifted: " + shortList(ms.Drift)
	case ms.State == delivery.StateValuesChanged:
		return StateValuesChanged, "renders differently for this cluster now: " + shortList(ms.Drift)
	case ms.Revision != m.Revision && spec.Mode == ApplyOnce:
		return StateKept, "" // on purpose; KeptOldWarning counts them
	case ms.Revision != m.Revision:
		return StateOutdated, fmt.Sprintf("runs revision %s, not %s", ms.Revision, m.Revision)
	}
	return StateCurrent, ""
}

// shortList joins a few of items with ", ", then says how many more there are.
func shortList(items []string) string {
	const shown = 5
	if len(items) > shown {
		items = append(slices.Clone(items[:shown]), fmt.Sprintf("and %d more", len(items)-shown))
	}
	return strings.Join(items, ", ")
}

// Summarize counts clusters by state and lists, per cluster needing attention, what is wrong.
// Current and kept clusters need none; skipped ones are listed too, with the reason.
func Summarize(status []ClusterStatus) (map[string]int64, map[string]string) {
	summary, attention := map[string]int64{}, map[string]string{}
	for _, cs := range status {
		summary[string(cs.State)]++
		if cs.Detail != "" && cs.State != StateSkipped {
			attention[cs.Name] = cs.Detail
		}
	}
	return summary, attention
}

// ObservationFrom rebuilds an observation from the status an earlier refresh or apply recorded
// and the skipped clusters, so that a plan can work from the state Terraform holds (as apply
// plans again with the same state and must come to the same waves) rather than a fresh read.
func ObservationFrom(status []ClusterStatus, skipped map[string]string, spec Spec) *Observation {
	obs := &Observation{Skipped: map[string]string{}, Bindings: map[string][]records.ModuleBinding{}, Modules: map[string]*delivery.Observation{}}
	for _, m := range spec.Modules {
		obs.Modules[m.Name] = &delivery.Observation{Clusters: map[string]delivery.ClusterState{}}
	}
	for _, cs := range status {
		switch cs.State {
		case StateLeaving:
			// As the refresh found them: the plan lets go of these, and apply of no other.
			obs.Leaving = append(obs.Leaving, cs.Name)
			continue
		case StateSkipped:
			continue
		}
		obs.Eligible = append(obs.Eligible, cs.Name)
		for _, ms := range cs.Modules {
			if ms.Result != "" {
				obs.Bindings[cs.Name] = append(obs.Bindings[cs.Name], records.ModuleBinding{
					Module: ms.Module, Revision: ms.Revision, AppliedAt: ms.AppliedAt, Result: ms.Result, Reason: ms.Reason})
			}
			if o := obs.Modules[ms.Module]; o != nil {
				o.Clusters[cs.Name] = delivery.ClusterState{Revision: ms.Revision, State: ms.State, Drift: ms.Drift}
				if ms.State == "" || ms.State == delivery.StatePending {
					o.Clusters[cs.Name] = delivery.ClusterState{State: delivery.StatePending}
				}
			}
		}
	}
	for name, reason := range skipped {
		obs.Skipped[name] = reason
	}
	sort.Strings(obs.Eligible)
	return obs
}

// Drifted returns the cluster → module pairs status shows drifted, or rendering differently
// now (values-changed): Reconcile applies both again.
func Drifted(status []ClusterStatus) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, cs := range status {
		for _, ms := range cs.Modules {
			if ms.State == delivery.StateDrifted || ms.State == delivery.StateValuesChanged {
				if out[cs.Name] == nil {
					out[cs.Name] = map[string]bool{}
				}
				out[cs.Name][ms.Module] = true
			}
		}
	}
	return out
}

// Waves cuts, per module, the clusters the plan gives it into waves, as apply will carry them
// out (delivery follows them): update_limit counts the clusters the module goes to.
func Waves(p BindingPlan, spec Spec) map[string][][]string {
	out := map[string][][]string{}
	for _, m := range spec.Modules {
		clusters := p.Apply[m.Name]
		if len(clusters) == 0 {
			continue
		}
		targets := make([]engine.Target, 0, len(clusters))
		for _, c := range clusters {
			targets = append(targets, engine.Target{Name: c, Drifted: true})
		}
		out[m.Name] = engine.PlanRollout(targets, m.Revision, spec.Policy).Waves
	}
	return out
}

// ModuleCanaryGaps are the listed canaries one module's canary waves miss.
type ModuleCanaryGaps struct {
	Module string
	Gaps   []engine.CanaryGap
}

// CanaryGaps lists, per module with clusters to change (in spec order), the listed canaries that
// are not in its canary waves, as engine.Plan.CanaryGaps judges them: a canary skipped or not
// picked is a gap; one that has the module already (current, or kept by ApplyOnce) counts as
// done. Nil when canary_optional is set or no canary is listed. obs is the observation p was
// planned from.
func CanaryGaps(obs *Observation, p BindingPlan, spec Spec) []ModuleCanaryGaps {
	if spec.Policy.CanaryOptional || len(spec.Policy.Canary) == 0 {
		return nil
	}
	var out []ModuleCanaryGaps
	for _, m := range spec.Modules {
		changing := map[string]bool{}
		for _, c := range p.Apply[m.Name] {
			changing[c] = true
		}
		if len(changing) == 0 {
			continue
		}
		// Every picked cluster, so that the engine can tell a canary that has the module from one
		// that is not picked. These waves only judge the canaries: Waves cuts the ones apply runs,
		// with update_limit counting the clusters the module goes to.
		targets := make([]engine.Target, 0, len(obs.Eligible)+len(obs.Skipped))
		for _, c := range obs.Eligible {
			t := engine.Target{Name: c, Drifted: true}
			if !changing[c] {
				t = engine.Target{Name: c, Record: engine.TargetRecord{Current: m.Revision}}
			}
			targets = append(targets, t)
		}
		for _, c := range sortedNames(obs.Skipped) {
			targets = append(targets, engine.Target{Name: c, SkipReason: obs.Skipped[c]})
		}
		if gaps := engine.PlanRollout(targets, m.Revision, spec.Policy).CanaryGaps(spec.Policy); len(gaps) > 0 {
			out = append(out, ModuleCanaryGaps{Module: m.Name, Gaps: gaps})
		}
	}
	return out
}

// CanaryRefusal is the refusal of gaps (nil for none), in the rollout's words
// (delivery.CanaryGapsDetail), module by module; title and then end it for plan or apply.
func CanaryRefusal(gaps []ModuleCanaryGaps, title, then string) error {
	if len(gaps) == 0 {
		return nil
	}
	var b strings.Builder
	for i, g := range gaps {
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "Module %s: %s", g.Module, delivery.CanaryGapsDetail(g.Gaps))
	}
	return usererr.New(title, b.String()+"\n\n"+then)
}

// CanaryWaves counts the leading waves of a module that hold its canaries (they have waves of
// their own), so that `waves` can name them.
func CanaryWaves(waves [][]string, canary []string) int {
	n := 0
	for _, w := range waves {
		if len(w) == 0 || !slices.Contains(canary, w[0]) {
			break
		}
		n++
	}
	return n
}
