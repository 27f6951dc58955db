package assignment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Logf logs one line of a run.
type Logf func(msg string, fields map[string]any)

// CheckClaims refuses modules whose objects another owner (another assignment's module, a
// rollout, or another module of this assignment) already manages on the clusters that would
// get them. It changes nothing.
func CheckClaims(ctx context.Context, svc *delivery.Service, spec Spec, apply map[string][]string) error {
	var all []delivery.Claim
	for _, m := range spec.Modules {
		if len(apply[m.Name]) == 0 {
			continue
		}
		claims, err := svc.Claims(ctx, spec.moduleSpec(m), apply[m.Name], nil)
		if err != nil {
			return err
		}
		all = append(all, claims...)
	}
	if len(all) == 0 {
		return nil
	}
	return delivery.ClaimsError(all, spec.Key.Describe(), Describe)
}

// Adoptions lists, per module, the objects that exist already on the clusters that would get
// it, made by someone else: apply adopts them (delivery.Service.Adoptions). It changes nothing.
func Adoptions(ctx context.Context, svc *delivery.Service, spec Spec, apply map[string][]string) ([]delivery.Found, error) {
	var all []delivery.Found
	for _, m := range spec.Modules {
		if len(apply[m.Name]) == 0 {
			continue
		}
		found, err := svc.Adoptions(ctx, spec.moduleSpec(m), apply[m.Name])
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", m.Name, err)
		}
		all = append(all, found...)
	}
	return all, nil
}

// CheckManifests asks each cluster that gets a module whether it can take the module's objects
// (with those of the modules it depends on, so a CRD from a dependency counts). It changes nothing.
func CheckManifests(ctx context.Context, svc *delivery.Service, spec Spec, apply map[string][]string) error {
	for _, m := range spec.Modules {
		if len(apply[m.Name]) == 0 {
			continue
		}
		ms := spec.moduleSpec(m)
		ms.Objects = withDependencies(spec, m)
		if err := svc.Check(ctx, ms, apply[m.Name]); err != nil {
			return fmt.Errorf("module %s: %w", m.Name, err)
		}
	}
	return nil
}

// RunRequest is one apply of an assignment.
type RunRequest struct {
	Spec  Spec
	Query fleet.Query
	// Planned, when PlannedKnown, is what the plan showed, per module the clusters that get its
	// revision: the run applies each module to those clusters only (as far as they still need
	// it), so that apply does what the reviewed plan said.
	Planned      map[string][]string
	PlannedKnown bool
	// Waves, when PlannedKnown, are the waves the plan showed per module (as counts): each
	// module goes out in exactly those waves, less the clusters it is blocked on.
	Waves map[string][][]string
	// Config is kept in the management cluster so import can restore it.
	Config []byte
	// Leaving are the clusters the plan listed as leaving: the run lets go of those that still
	// leave and of no other (a cluster that started leaving after the plan waits for the next).
	Leaving []string
	// Create says the run is the resource's Create: it refuses an assignment a Terraform state
	// holds already, with ImportHint (the import command) in the error.
	Create     bool
	ImportHint string
	Logf       Logf
}

// RunResult is what a run left.
type RunResult struct {
	Bindings map[string][]records.ModuleBinding
	Skipped  map[string]string
	Warnings []string
	// Applied lists, per module, the clusters the run applied it to (whatever the outcome).
	Applied map[string][]string
}

// Run applies the assignment: modules in depends_on order, each through delivery.Run on the
// clusters that need it and whose dependencies are applied; then modules no longer configured
// and clusters that stopped matching lose theirs by deletion policy; bindings follow every step.
func Run(ctx context.Context, svc *delivery.Service, req RunRequest) (_ *RunResult, err error) {
	spec := req.Spec
	if req.Logf == nil {
		req.Logf = func(string, map[string]any) {}
	}
	mc := svc.ManagementClient()
	runCtx, release, err := svc.HoldLease(ctx, spec.RecordNamespace, spec.Key, records.HolderIdentity(), "Assignment Already Running",
		"Another apply of "+spec.Key.Describe()+" holds its Lease. Wait for it to finish; if that process died, the Lease expires on its own.")
	if err != nil {
		return nil, err
	}
	defer release()
	ctx = runCtx // cancelled, with the reason, if the Lease is lost
	defer func() { err = delivery.LeaseLost(runCtx, err, "Assignment "+spec.Key.Describe()) }()
	mstore := records.NewManagementStore(mc, spec.RecordNamespace)
	prev, err := mstore.LoadProgress(ctx, spec.Key)
	if err != nil {
		return nil, fmt.Errorf("read the progress record of %s: %w", spec.Key.Describe(), err)
	}
	managed := prev != nil && prev.Managed
	if req.Create && managed {
		return nil, delivery.AlreadyExists(spec.Key.Describe(), "Module Assignment Already Exists", req.ImportHint)
	}
	// Managed (records.Progress) stays set once a state holds the assignment: an update says so,
	// a create once it completes.
	managed = managed || !req.Create
	if err := mstore.SaveProgress(ctx, spec.Key, records.Progress{Phase: records.PhaseRunning, StartedAt: time.Now(), Config: req.Config, Managed: managed}); err != nil {
		return nil, fmt.Errorf("record %s: %w", spec.Key.Describe(), err)
	}
	obs, err := Observe(ctx, svc, req.Query, spec, false)
	if err != nil {
		return nil, err
	}
	plan := PlanAssignment(obs, spec, nil)
	candidates := map[string][]string{}
	for _, m := range spec.Modules {
		from := plan.Apply[m.Name]
		if spec.Mode == Reconcile {
			from = obs.Eligible // delivery repairs drift on clusters already current
		}
		if !req.PlannedKnown {
			candidates[m.Name] = from
			continue
		}
		// The plan's clusters, as far as they are still eligible: one that joined since waits
		// for the next plan, one the plan repairs is applied again even if it looks current.
		eligible := map[string]bool{}
		for _, c := range obs.Eligible {
			eligible[c] = true
		}
		var cs []string
		for _, c := range req.Planned[m.Name] {
			if eligible[c] {
				cs = append(cs, c)
			}
		}
		candidates[m.Name] = cs
	}
	if err := CheckClaims(ctx, svc, spec, candidates); err != nil {
		return &RunResult{Bindings: obs.Bindings, Skipped: obs.Skipped}, err
	}

	bstore := records.NewBindingStore(mc, spec.RecordNamespace)
	res := &RunResult{Skipped: obs.Skipped, Applied: map[string][]string{}}
	var failures []string
	result := map[string]map[string]records.ModuleBinding{} // cluster → module → binding now
	for cluster, bs := range obs.Bindings {
		result[cluster] = map[string]records.ModuleBinding{}
		for _, b := range bs {
			result[cluster][b.Module] = b
		}
	}
	set := func(cluster string, b records.ModuleBinding) error {
		if result[cluster] == nil {
			result[cluster] = map[string]records.ModuleBinding{}
		}
		result[cluster][b.Module] = b
		if err := delivery.Fenced(ctx); err != nil {
			return err // the Lease is lost: another apply may be writing these bindings now
		}
		return bstore.Update(context.WithoutCancel(ctx), spec.Key, cluster, func(old []records.ModuleBinding) []records.ModuleBinding {
			out := slices.DeleteFunc(old, func(o records.ModuleBinding) bool { return o.Module == b.Module })
			return append(out, b)
		})
	}
	for _, m := range spec.Modules {
		if ctx.Err() != nil {
			break
		}
		var run []string
		for _, cluster := range candidates[m.Name] {
			if dep, why := blockedBy(result[cluster], m); dep != "" {
				if err := set(cluster, records.ModuleBinding{Module: m.Name, Revision: m.Revision, Result: records.BindingBlocked,
					Reason: fmt.Sprintf("depends on module %s, which is %s", dep, why)}); err != nil {
					return res, err
				}
				continue
			}
			run = append(run, cluster)
		}
		if len(run) == 0 {
			continue
		}
		res.Applied[m.Name] = run
		req.Logf(fmt.Sprintf("module %s revision %s: %d cluster(s)", m.Name, m.Revision, len(run)), map[string]any{"assignment": spec.Key.String(), "clusters": run})
		dr := delivery.RunRequest{Spec: spec.moduleSpec(m), Query: req.Query, Only: run, OnlyKnown: true, Logf: req.Logf}
		if waves, ok := req.Waves[m.Name]; ok && req.PlannedKnown {
			dr.Planned, dr.PlannedKnown = onlyIn(waves, run), true
		}
		out, err := svc.Run(ctx, dr)
		if out != nil {
			for _, o := range out.Result.Outcomes {
				prev, bound := result[o.Target][m.Name]
				switch o.Status {
				case engine.StatusSucceeded:
					err = errors.Join(err, set(o.Target, records.ModuleBinding{Module: m.Name, Revision: m.Revision, AppliedAt: time.Now().UTC().Truncate(time.Second), Result: records.BindingApplied}))
				case engine.StatusAlreadyCurrent:
					if !bound || prev.Revision != m.Revision || prev.Result != records.BindingApplied {
						err = errors.Join(err, set(o.Target, records.ModuleBinding{Module: m.Name, Revision: m.Revision, AppliedAt: time.Now().UTC().Truncate(time.Second), Result: records.BindingApplied}))
					}
				case engine.StatusFailed, engine.StatusRolledBack, engine.StatusCancelled, engine.StatusUnsettled, engine.StatusRestored:
					err = errors.Join(err, set(o.Target, records.ModuleBinding{Module: m.Name, Revision: m.Revision, Result: records.BindingFailed, Reason: o.Error}))
				}
			}
			for _, w := range slices.Concat(out.Result.Warnings(), out.Adopted, out.Kept) {
				res.Warnings = append(res.Warnings, fmt.Sprintf("module %s: %s", m.Name, w))
			}
		}
		if err != nil {
			failures = append(failures, fmt.Sprintf("module %s: %v", m.Name, err))
		}
	}
	if ctx.Err() == nil {
		// Only the clusters the plan listed are let go of; the others wait for the next plan.
		plan.Leaving = delivery.PlannedLeaving(req.Leaving, plan.Leaving)
		res.Warnings = append(res.Warnings, letGo(ctx, svc, spec, obs, plan, bstore, &failures)...)
	} else {
		failures = append(failures, "cancelled: "+context.Cause(ctx).Error())
	}
	after, lerr := bstore.List(context.WithoutCancel(ctx), spec.Key)
	if lerr != nil {
		return res, lerr
	}
	res.Bindings = onlyConfigured(after, spec)
	phase := records.PhaseSucceeded
	if len(failures) > 0 {
		phase = records.PhaseFailed
	}
	if delivery.Fenced(ctx) == nil {
		_ = mstore.SaveProgress(context.WithoutCancel(ctx), spec.Key, records.Progress{Phase: phase, UpdatedAt: time.Now(), Config: req.Config,
			Managed: managed || len(failures) == 0})
	}
	if len(failures) > 0 {
		return res, usererr.New("Module Assignment Failed",
			fmt.Sprintf("%s did not complete:\n  %s\nFailed modules were restored on the clusters where they failed, and modules that depend on them were not applied there.",
				spec.Key.Describe(), strings.Join(failures, "\n  ")))
	}
	return res, nil
}

// blockedBy returns a dependency of m that is not applied on the cluster, and its state.
func blockedBy(bound map[string]records.ModuleBinding, m Module) (string, string) {
	for _, d := range m.DependsOn {
		b, ok := bound[d]
		switch {
		case !ok:
			return d, "not applied"
		case b.Result != records.BindingApplied:
			return d, b.Result
		}
	}
	return "", ""
}

// letGo removes modules that are no longer configured, and everything from clusters that stopped
// matching (by deletion policy), and drops the bindings of deleted clusters.
func letGo(ctx context.Context, svc *delivery.Service, spec Spec, obs *Observation, plan Plan, bstore *records.BindingStore, failures *[]string) []string {
	var warnings []string
	for _, name := range sortedNames(plan.Removed) {
		ws, err := svc.Destroy(ctx, delivery.DestroyRequest{
			Spec: removedSpec(spec, name), Query: fleet.Query{Namespace: spec.ClusterNamespace, Names: plan.Removed[name]}, Orphan: spec.Orphan,
		})
		warnings = append(warnings, ws...)
		if err != nil {
			*failures = append(*failures, fmt.Sprintf("remove module %s: %v", name, err))
			continue
		}
		for _, cluster := range plan.Removed[name] {
			if err := bstore.Update(ctx, spec.Key, cluster, func(old []records.ModuleBinding) []records.ModuleBinding {
				return slices.DeleteFunc(old, func(b records.ModuleBinding) bool { return b.Module == name })
			}); err != nil {
				*failures = append(*failures, err.Error())
			}
		}
	}
	for _, cluster := range plan.Leaving {
		ws, err := release(ctx, svc, spec, cluster, obs.Bindings[cluster])
		warnings = append(warnings, ws...)
		if err != nil {
			*failures = append(*failures, fmt.Sprintf("cluster %s left: %v", cluster, err))
			continue
		}
		if len(ws) > 0 {
			continue // unreachable: its binding stays so a later apply finishes the job
		}
		if err := bstore.Delete(ctx, spec.Key, cluster); err != nil {
			*failures = append(*failures, err.Error())
		}
	}
	for _, cluster := range plan.Gone {
		if err := bstore.Delete(ctx, spec.Key, cluster); err != nil {
			*failures = append(*failures, err.Error())
		}
	}
	return warnings
}

// release removes from cluster every module bound there, dependents first.
func release(ctx context.Context, svc *delivery.Service, spec Spec, cluster string, bound []records.ModuleBinding) ([]string, error) {
	order := bindingOrder(spec, bound)
	var warnings []string
	for i := len(order) - 1; i >= 0; i-- {
		ws, err := svc.Destroy(ctx, delivery.DestroyRequest{
			Spec: removedSpec(spec, order[i]), Query: fleet.Query{Namespace: spec.ClusterNamespace, Names: []string{cluster}},
			Orphan: spec.Orphan, KeepManagementRecords: true,
		})
		warnings = append(warnings, ws...)
		if err != nil {
			return warnings, err
		}
	}
	return warnings, nil
}

// bindingOrder lists bound module names in the configured depends_on order, unconfigured ones last.
func bindingOrder(spec Spec, bound []records.ModuleBinding) []string {
	has := map[string]bool{}
	for _, b := range bound {
		has[b.Module] = true
	}
	var out []string
	for _, m := range spec.Modules {
		if has[m.Name] {
			out = append(out, m.Name)
			delete(has, m.Name)
		}
	}
	return append(out, sortedNames(has)...)
}

// removedSpec is enough of a module's delivery spec to remove it.
func removedSpec(spec Spec, module string) delivery.Spec {
	return delivery.Spec{Key: spec.ModuleKey(module), ClusterNamespace: spec.ClusterNamespace, RecordNamespace: spec.RecordNamespace, Policy: spec.Policy}
}

// onlyConfigured keeps the bindings of picked clusters (and of left clusters still holding
// modules) for configured modules.
func onlyConfigured(bindings map[string][]records.ModuleBinding, spec Spec) map[string][]records.ModuleBinding {
	out := map[string][]records.ModuleBinding{}
	for cluster, bs := range bindings {
		var kept []records.ModuleBinding
		for _, b := range bs {
			if _, ok := spec.Module(b.Module); ok {
				kept = append(kept, b)
			}
		}
		if len(kept) > 0 {
			out[cluster] = kept
		}
	}
	return out
}

// Destroy removes every module from every cluster that has it or is picked (by deletion
// policy), dependents first, then the bindings and the assignment's record.
func Destroy(ctx context.Context, svc *delivery.Service, spec Spec, q fleet.Query, logf Logf) ([]string, error) {
	mc := svc.ManagementClient()
	bstore := records.NewBindingStore(mc, spec.RecordNamespace)
	bindings, err := bstore.List(ctx, spec.Key)
	if err != nil {
		return nil, err
	}
	found, err := svc.Discover(ctx, q)
	if err != nil {
		return nil, err
	}
	clusters := map[string]bool{}
	all := map[string]bool{}
	for c, bs := range bindings {
		clusters[c] = true
		for _, b := range bs {
			all[b.Module] = true
		}
	}
	for _, c := range found.Clusters {
		clusters[c.Name] = true
	}
	var modules []records.ModuleBinding
	for _, m := range spec.Modules {
		all[m.Name] = true
	}
	for name := range all {
		modules = append(modules, records.ModuleBinding{Module: name})
	}
	order := bindingOrder(spec, modules)
	names := sortedNames(clusters)
	var warnings []string
	for i := len(order) - 1; i >= 0; i-- {
		if len(names) == 0 {
			break
		}
		ws, err := svc.Destroy(ctx, delivery.DestroyRequest{
			Spec: removedSpec(spec, order[i]), Query: fleet.Query{Namespace: spec.ClusterNamespace, Names: names}, Orphan: spec.Orphan, Logf: logf,
		})
		warnings = append(warnings, ws...)
		if err != nil {
			return warnings, fmt.Errorf("module %s: %w", order[i], err)
		}
	}
	if len(warnings) > 0 {
		return warnings, usererr.New("Module Assignment Delete Incomplete",
			"Some clusters could not be reached, so they keep their modules and bindings:\n  "+strings.Join(warnings, "\n  ")+"\nRun destroy again once they are reachable.")
	}
	if err := bstore.DeleteAll(ctx, spec.Key); err != nil {
		return warnings, err
	}
	return warnings, records.NewManagementStore(mc, spec.RecordNamespace).Delete(ctx, spec.Key)
}

// LoadConfig returns the configuration the last run recorded, nil when there is none.
func LoadConfig(ctx context.Context, svc *delivery.Service, key records.Key, recordNamespace string) ([]byte, error) {
	p, err := records.NewManagementStore(svc.ManagementClient(), recordNamespace).LoadProgress(ctx, key)
	if err != nil || p == nil {
		return nil, err
	}
	return p.Config, nil
}

// onlyIn returns waves without the clusters not in keep, and without emptied waves.
func onlyIn(waves [][]string, keep []string) [][]string {
	out := [][]string{}
	for _, wave := range waves {
		var kept []string
		for _, c := range wave {
			if slices.Contains(keep, c) {
				kept = append(kept, c)
			}
		}
		if len(kept) > 0 {
			out = append(out, kept)
		}
	}
	return out
}
