package inplaceupdate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/shared"
)

// fleetPlan is an in-place update planned over the picked clusters: the owners' plans per
// cluster, the clusters skipped and why, and the engine's waves over the clusters.
type fleetPlan struct {
	owners  *owners.FleetPlan
	picked  []string
	skipped map[string]string
	waves   engine.Plan
	policy  engine.Policy
}

// planFleet discovers the picked clusters, plans every eligible one (the owners the inputs pick
// there, the extensions asked) and cuts the waves. Attribute errors point at what is wrong.
func planFleet(ctx context.Context, data *providerdata.Data, in *Input, limits fleetLimits) (*fleetPlan, diag.Diagnostics) {
	var diags diag.Diagnostics
	change, fallback, endpoints, d := in.change(ctx)
	diags.Append(d...)
	ownersSel, d := in.owners(ctx)
	diags.Append(d...)
	policy, d := limits.policy(ctx)
	diags.Append(d...)
	names := in.Names
	if !in.Cluster.IsNull() {
		names = types.ListValueMust(types.StringType, []attr.Value{in.Cluster})
	}
	query, d := shared.Query(ctx, in.Namespace, in.Selector, names)
	diags.Append(d...)
	if diags.HasError() {
		return nil, diags
	}
	found, err := data.Management.Discover(ctx, query)
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Cannot List Clusters"))
		return nil, diags
	}
	if len(found.Missing) > 0 {
		attrName := "names"
		if !in.Cluster.IsNull() {
			attrName = "cluster"
		}
		diags.AddAttributeError(path.Root(attrName), "Cluster Not Found",
			fmt.Sprintf("No Cluster %s in namespace %q of the management cluster.", strings.Join(found.Missing, ", "), query.Namespace))
		return nil, diags
	}
	fp := &fleetPlan{skipped: map[string]string{}, policy: policy}
	var eligible []string
	for _, c := range found.Clusters {
		fp.picked = append(fp.picked, c.Name)
		if c.SkipReason != "" {
			fp.skipped[c.Name] = c.SkipReason
			continue
		}
		eligible = append(eligible, c.Name)
	}
	fp.owners, err = planner(data).PlanFleet(ctx, owners.FleetRequest{
		Namespace: query.Namespace, Clusters: eligible, Owners: ownersSel, Change: change, Fallback: fallback, Endpoints: endpoints,
	})
	if err != nil {
		diags.Append(diagnostics.FromError(err, "In-Place Update Plan Failed"))
		return nil, diags
	}
	fp.cutWaves()
	for _, n := range fp.waves.Notes {
		tflog.Info(ctx, "in-place plan: "+n)
	}
	return fp, diags
}

// cutWaves hands the picked clusters to the engine: a cluster whose owners all record the
// revision and whose machines are done is current, one written but not seen through is applied
// again, the rest in waves (canary first, at most update_limit at a time).
func (fp *fleetPlan) cutWaves() {
	rev := fp.owners.Revision
	var targets []engine.Target
	for _, name := range fp.picked {
		t := engine.Target{Name: name, SkipReason: fp.skipped[name]}
		if cp := fp.owners.Cluster(name); cp != nil {
			if cp.SkipReason != "" {
				t.SkipReason = cp.SkipReason
				fp.skipped[name] = cp.SkipReason
			}
			switch {
			case cp.Current(rev):
				t.Record.Current = rev
			case cp.Recorded(rev):
				// Written by an earlier apply that did not see it through: applied again.
				t.Record.Provisioning = rev
			}
		}
		targets = append(targets, t)
	}
	fp.waves = engine.PlanRollout(targets, rev, fp.policy)
}

// owners converts the owner-picking inputs of the fleet form.
func (in *Input) owners(ctx context.Context) (owners.Owners, diag.Diagnostics) {
	var diags diag.Diagnostics
	o := owners.Owners{ControlPlane: in.UpdateControlPlane.ValueBool()}
	if !in.MachineDeploymentSelector.IsNull() {
		ls, d := shared.ToLabelSelector(ctx, in.MachineDeploymentSelector)
		diags.Append(d...)
		sel, err := ls.Selector()
		if err != nil {
			diags.AddAttributeError(path.Root("machine_deployment_selector"), "Invalid Selector", err.Error())
		}
		if sel == nil {
			sel = labels.Everything()
		}
		o.MachineDeployments = sel
	}
	switch {
	case !in.MachineDeployment.IsNull() || !in.ControlPlane.IsNull():
		diags.AddAttributeError(path.Root("machine_deployment"), "Owner Named Across Clusters",
			"machine_deployment and control_plane name one owner of one `cluster`; owner names differ from cluster to cluster. "+
				"With names or selector, pick owners with machine_deployment_selector and/or update_control_plane = true.")
	case !o.ControlPlane && o.MachineDeployments == nil:
		diags.AddAttributeError(path.Root("machine_deployment_selector"), "No Owner Selected",
			"Set machine_deployment_selector (the MachineDeployments of each cluster, by label; {} for all) and/or update_control_plane = true.")
	}
	return o, diags
}

// fleetLimits are the pacing attributes.
type fleetLimits struct {
	UpdateLimit, MaxFailures types.String
	Canary                   types.List
	VerifyTimeout            time.Duration
}

func (l fleetLimits) policy(ctx context.Context) (engine.Policy, diag.Diagnostics) {
	var diags diag.Diagnostics
	p := engine.Policy{Irreversible: true, OnFailure: engine.Halt, VerifyTimeout: l.VerifyTimeout, CanaryOptional: true}
	var err error
	if p.UpdateLimit, err = engine.ParseLimit(orDefault(l.UpdateLimit, "1")); err != nil {
		diags.AddAttributeError(path.Root("update_limit"), "Invalid Update Limit", err.Error())
	}
	if p.MaxFailures, err = engine.ParseMaxFailures(orDefault(l.MaxFailures, "0")); err != nil {
		diags.AddAttributeError(path.Root("max_failures"), "Invalid Failure Budget", err.Error())
	}
	if !l.Canary.IsNull() && !l.Canary.IsUnknown() {
		diags.Append(l.Canary.ElementsAs(ctx, &p.Canary, false)...)
	}
	if err := p.Validate(); err != nil {
		diags.AddError("Invalid Pacing", err.Error())
	}
	return p, diags
}

func orDefault(v types.String, def string) string {
	if v.IsNull() || v.IsUnknown() || v.ValueString() == "" {
		return def
	}
	return v.ValueString()
}

// Summary keys.
const (
	sumClusters  = "clusters"
	sumSkipped   = "skipped"
	sumCurrent   = "current"
	sumChanging  = "changing"
	sumInPlace   = "in_place"
	sumRolling   = "rolling"
	sumUnchanged = "unchanged"
)

// summary counts the plan; attention names the clusters to look at, with why.
func (fp *fleetPlan) summary() (map[string]int64, map[string]string) {
	sum := map[string]int64{sumClusters: int64(len(fp.picked)), sumSkipped: 0, sumCurrent: 0, sumChanging: 0, sumInPlace: 0, sumRolling: 0, sumUnchanged: 0}
	att := map[string]string{}
	for _, name := range fp.picked {
		in := fp.waves.Intents[name]
		switch in.Action {
		case engine.ActionSkip:
			sum[sumSkipped]++
			att[name] = "skipped: " + fp.skipped[name]
			continue
		case engine.ActionAlreadyCurrent:
			sum[sumCurrent]++
		default:
			sum[sumChanging]++
		}
		cp := fp.owners.Cluster(name)
		if cp == nil {
			continue
		}
		var notes []string
		if in.Provisioning != "" {
			notes = append(notes, "an earlier apply did not see it through; applied again")
		}
		for _, r := range cp.Owners {
			// Machines planned in place that Cluster API may replace all the same (the owner
			// surges): one note per owner, as the reason is the owner's.
			var mayBe []string
			var mayBeWhy string
			for _, m := range r.Plan.Machines {
				switch m.Strategy {
				case inplace.StrategyInPlace:
					sum[sumInPlace]++
					if m.MayBeReplaced != "" {
						mayBe, mayBeWhy = append(mayBe, m.Machine), m.MayBeReplaced
					}
				case inplace.StrategyRolling:
					sum[sumRolling]++
					why := fieldNames(m.Uncovered)
					if why == "" {
						why = strings.Join(m.Notes, "; ")
					}
					notes = append(notes, fmt.Sprintf("machine %s replaced by Cluster API (%s)", m.Machine, why))
				default:
					sum[sumUnchanged]++
				}
			}
			if len(mayBe) > 0 {
				what := "machine "
				if len(mayBe) > 1 {
					what = "machines "
				}
				notes = append(notes, fmt.Sprintf("%s%s may be replaced by Cluster API (%s)", what, strings.Join(mayBe, ", "), mayBeWhy))
			}
		}
		if len(notes) > 0 {
			att[name] = strings.Join(notes, "; ")
		}
	}
	return sum, att
}

// setFleetPlan fills the computed attributes of a fleet plan.
func (m *Model) setFleetPlan(ctx context.Context, fp *fleetPlan) diag.Diagnostics {
	var diags diag.Diagnostics
	sum, att := fp.summary()
	var d diag.Diagnostics
	m.Summary, d = types.MapValueFrom(ctx, types.Int64Type, sum)
	diags.Append(d...)
	m.Attention, d = types.MapValueFrom(ctx, types.StringType, att)
	diags.Append(d...)
	m.Waves = types.StringValue(shared.WavesText(shared.WaveSizes(fp.waves.Waves), fp.waves.CanaryWaves))
	m.Revision = types.StringValue(fp.owners.Revision)
	m.Plan = types.ListNull(types.ObjectType{AttrTypes: machineAttrTypes})
	return diags
}

// wavesDetail describes the waves for a warning, compactly at any fleet size.
func wavesDetail(p engine.Plan) string {
	const shown = 10
	var b strings.Builder
	fmt.Fprintf(&b, "%d wave(s) of up to %d cluster(s), each cluster's owners one after the other, each verified before the next:", len(p.Waves), p.UpdateLimit)
	for i, wave := range p.Waves {
		if i == shown {
			fmt.Fprintf(&b, "\n  … and %d more wave(s)", len(p.Waves)-shown)
			break
		}
		label := ""
		if i < p.CanaryWaves {
			label = " (canary)"
		}
		list := wave
		if len(list) > shown {
			list = append(slices.Clone(list[:shown]), fmt.Sprintf("… %d more", len(wave)-shown))
		}
		fmt.Fprintf(&b, "\n  wave %d%s: %s", i+1, label, strings.Join(list, ", "))
	}
	return b.String()
}

// fleetID names a fleet update by what it picks: the namespace and a short hash of the cluster
// and owner selection.
func (m *Model) fleetID() types.String {
	var b strings.Builder
	for _, v := range []attr.Value{m.Cluster, m.Names, m.Selector, m.MachineDeploymentSelector, m.UpdateControlPlane} {
		b.WriteString(v.String())
		b.WriteByte(0)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return types.StringValue(m.Namespace.ValueString() + "/fleet:" + hex.EncodeToString(sum[:])[:12])
}

// applyFleet plans the fleet again and carries the waves out through the engine: each cluster's
// owners written one after the other and verified, at most update_limit clusters at a time, no
// new wave once more than max_failures clusters failed, nothing rolled back.
func (r *updateResource) applyFleet(ctx context.Context, plan *Model, verify time.Duration, diags *diag.Diagnostics) {
	fp, d := planFleet(ctx, r.data, &plan.Input, plan.limits(verify))
	diags.Append(d...)
	if diags.HasError() {
		plan.fillUnknown()
		return
	}
	if err := fp.owners.Err(); err != nil {
		diags.AddAttributeError(path.Root("fallback"), inplace.BlockedSummary, blockedDetail(err))
		plan.fillUnknown()
		return
	}
	if plan.Summary.IsUnknown() || plan.Waves.IsUnknown() || plan.Attention.IsUnknown() || plan.Revision.IsUnknown() {
		diags.Append(plan.setFleetPlan(ctx, fp)...)
	}
	world := &owners.FleetWorld{Planner: planner(r.data), Plan: fp.owners, Exec: owners.ExecuteRequest{
		VerifyTimeout: verify,
		Logf:          func(msg string, fields map[string]any) { tflog.Info(ctx, msg, fields) },
		Holder:        records.HolderIdentity(),
	}}
	res := engine.Execute(ctx, fp.waves, world, engine.SystemClock{}, fp.policy)
	// Every machine of the clusters planned: unchanged, or not started unless the run did more.
	status := map[string]string{}
	for _, c := range fp.owners.Clusters {
		for _, m := range c.Machines() {
			status[m.Machine] = owners.StatusNotStarted
			if fp.waves.Intents[c.Cluster].Action == engine.ActionAlreadyCurrent {
				status[m.Machine] = owners.StatusUnchanged
			}
		}
	}
	maps.Copy(status, world.Status())
	if plan.Status.IsUnknown() {
		var d diag.Diagnostics
		plan.Status, d = types.MapValueFrom(ctx, types.StringType, status)
		diags.Append(d...)
	}
	if plan.Plan.IsUnknown() {
		plan.Plan = types.ListNull(types.ObjectType{AttrTypes: machineAttrTypes})
	}
	if err := res.Err(); err != nil {
		var failed []string
		for _, o := range res.Outcomes {
			if o.Error != "" {
				failed = append(failed, fmt.Sprintf("cluster %s (%s): %s", o.Target, o.Status, o.Error))
			}
		}
		diags.AddError("In-Place Update Failed", fmt.Sprintf("%s.\n%s\n\nNothing is rolled back: Cluster API goes on with what was written. "+
			"Clusters not started are left for the next apply, which also verifies the failed ones again.", err, indent(strings.Join(failed, "\n"))))
	}
}

// limits are the model's pacing attributes.
func (m *Model) limits(verify time.Duration) fleetLimits {
	return fleetLimits{UpdateLimit: m.UpdateLimit, MaxFailures: m.MaxFailures, Canary: m.Canary, VerifyTimeout: verify}
}

func blockedDetail(err error) string {
	return inplace.BlockedLead + ":\n" + indent(err.Error()) +
		"\nTerraform plans again when it applies: if this comes from applying a plan that showed these machines in place, " +
		"that plan is stale (an extension was removed or answers differently now, or Cluster API's InPlaceUpdates feature gate was turned off). Nothing was written; plan again."
}

// observeFleet refreshes the status of every machine of the picked clusters' owners (specs,
// CAPI's conditions, Nodes; no extension is called), a few clusters at a time.
func observeFleet(ctx context.Context, data *providerdata.Data, in *Input, prior map[string]string) (map[string]string, []string, error) {
	names := in.Names
	if !in.Cluster.IsNull() {
		names = types.ListValueMust(types.StringType, []attr.Value{in.Cluster})
	}
	query, d := shared.Query(ctx, in.Namespace, in.Selector, names)
	if d.HasError() {
		return nil, nil, fmt.Errorf("cluster selection: %v", d)
	}
	ownersSel, d := in.owners(ctx)
	if d.HasError() {
		return nil, nil, fmt.Errorf("owner selection: %v", d)
	}
	change, _, _, d := in.change(ctx)
	if d.HasError() {
		return nil, nil, fmt.Errorf("change: %v", d)
	}
	found, err := data.Management.Discover(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	p := planner(data)
	var mu sync.Mutex
	status := map[string]string{}
	var notes []string
	var firstErr error
	var g errgroup.Group
	g.SetLimit(4)
	for _, c := range found.Clusters {
		if c.SkipReason != "" {
			continue
		}
		g.Go(func() error {
			st, n, err := observeCluster(ctx, p, c, ownersSel, change, prior)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			notes = append(notes, n...)
			for k, v := range st {
				status[k] = v
			}
			return nil // every cluster is observed; the first error is returned below
		})
	}
	_ = g.Wait()
	slices.Sort(notes)
	return status, notes, firstErr
}

func observeCluster(ctx context.Context, p *owners.Planner, c fleet.Cluster, o owners.Owners, change inplace.Change, prior map[string]string) (map[string]string, []string, error) {
	sels, skip, err := p.ClusterOwners(ctx, c.Namespace, c.Name, o)
	if err != nil || skip != "" {
		return nil, nil, err
	}
	status := map[string]string{}
	var notes []string
	for _, sel := range sels {
		obs, err := p.Observe(ctx, sel, change)
		if err != nil {
			return nil, nil, err
		}
		notes = append(notes, obs.Notes...)
		for _, m := range obs.Machines {
			was, known := prior[m.Machine]
			if s := m.Status(was); known || s != owners.StatusUnchanged {
				status[m.Machine] = s
			}
		}
	}
	return status, notes, nil
}

// modifyFleetPlan plans a fleet update: the waves, the summary and the clusters to look at. A
// plan that changes nothing keeps the state's computed attributes, so it is empty.
func (r *updateResource) modifyFleetPlan(ctx context.Context, plan, prior *Model, resp *resource.ModifyPlanResponse) {
	verify, d := plan.verifyTimeout(ctx)
	resp.Diagnostics.Append(d...)
	fp, d := planFleet(ctx, r.data, &plan.Input, plan.limits(verify))
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	for _, n := range fp.owners.Notes {
		resp.Diagnostics.AddWarning("In-Place Update Plan", n)
	}
	if err := fp.owners.Err(); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("fallback"), inplace.BlockedSummary, blockedDetail(err))
		return
	}
	if len(fp.skipped) > 0 {
		resp.Diagnostics.AddWarning("Clusters Skipped", shared.SkippedDetail("These picked clusters are left alone by this apply; a later apply updates them once they can be:", fp.skipped))
	}
	if len(fp.waves.UnknownCanaries) > 0 {
		resp.Diagnostics.AddAttributeWarning(path.Root("canary"), "Canary Clusters Not Picked",
			fmt.Sprintf("The canary clusters %s are not among the clusters this update picks; they are ignored.", strings.Join(fp.waves.UnknownCanaries, ", ")))
	}
	plan.Revision = types.StringValue(fp.owners.Revision)
	if !fp.waves.Changes() && prior != nil && prior.Revision.ValueString() == fp.owners.Revision && !prior.Summary.IsNull() {
		plan.Plan, plan.Status, plan.Summary, plan.Attention, plan.Waves = prior.Plan, prior.Status, prior.Summary, prior.Attention, prior.Waves
		resp.Diagnostics.Append(plan.setPlan(ctx, &resp.Plan)...)
		return
	}
	resp.Diagnostics.Append(plan.setFleetPlan(ctx, fp)...)
	plan.Status = types.MapUnknown(types.StringType)
	if fp.waves.Changes() {
		resp.Diagnostics.AddWarning("Planned Waves", wavesDetail(fp.waves))
	}
	resp.Diagnostics.Append(plan.setPlan(ctx, &resp.Plan)...)
}

// readFleet refreshes the machines' status of a fleet update.
func (r *updateResource) readFleet(ctx context.Context, state *Model, resp *resource.ReadResponse) {
	prior := map[string]string{}
	if !state.Status.IsNull() && !state.Status.IsUnknown() {
		resp.Diagnostics.Append(state.Status.ElementsAs(ctx, &prior, false)...)
	}
	status, notes, err := observeFleet(ctx, r.data, &state.Input, prior)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Cannot Read Machines"))
		return
	}
	for _, n := range notes {
		resp.Diagnostics.AddWarning("In-Place Update Not Fully Refreshed", n)
	}
	var d diag.Diagnostics
	state.Status, d = types.MapValueFrom(ctx, types.StringType, status)
	resp.Diagnostics.Append(d...)
	resp.Diagnostics.Append(resp.State.Set(ctx, state)...)
}

// setSingleSummary fills summary, attention and waves for the single-owner form from its plan.
func (m *Model) setSingleSummary(ctx context.Context, res *owners.Result) diag.Diagnostics {
	sum := map[string]int64{sumClusters: 1, sumSkipped: 0, sumCurrent: 0, sumChanging: 0, sumInPlace: 0, sumRolling: 0, sumUnchanged: 0}
	att := map[string]string{}
	var notes []string
	for _, mp := range res.Plan.Machines {
		switch mp.Strategy {
		case inplace.StrategyInPlace:
			sum[sumInPlace]++
		case inplace.StrategyRolling:
			sum[sumRolling]++
			why := fieldNames(mp.Uncovered)
			if why == "" {
				why = strings.Join(mp.Notes, "; ")
			}
			notes = append(notes, fmt.Sprintf("machine %s replaced by Cluster API (%s)", mp.Machine, why))
		default:
			sum[sumUnchanged]++
		}
	}
	var waves []int
	if changes, _ := res.Owner.Changes(); changes || sum[sumInPlace]+sum[sumRolling] > 0 || res.Owner.Current.GetAnnotations()[owners.AnnotationRevision] != res.Revision {
		sum[sumChanging] = 1
		waves = []int{1}
	} else {
		sum[sumCurrent] = 1
	}
	if len(notes) > 0 {
		att[m.Cluster.ValueString()] = strings.Join(notes, "; ")
	}
	var diags, d diag.Diagnostics
	m.Summary, d = types.MapValueFrom(ctx, types.Int64Type, sum)
	diags.Append(d...)
	m.Attention, d = types.MapValueFrom(ctx, types.StringType, att)
	diags.Append(d...)
	m.Waves = types.StringValue(shared.WavesText(waves, 0))
	return diags
}
