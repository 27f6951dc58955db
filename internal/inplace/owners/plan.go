package owners

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	hooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/extension"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/settings"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Request is one in-place update to plan.
type Request struct {
	Selection Selection
	Change    inplace.Change
	Fallback  inplace.Fallback
	// Endpoints are the extensions to ask; nil means those of the management cluster's
	// ExtensionConfig objects.
	Endpoints []extension.Endpoint
}

// Machine is one selected machine: its objects now and as the change wants them, and its plan.
type Machine struct {
	Current, Desired inplace.Objects
	Plan             inplace.MachinePlan
}

// PlanResult is a plan over every selected machine.
type PlanResult struct {
	Request  Request
	Revision string
	// Owner is the MachineDeployment or KubeadmControlPlane the change is written to.
	Owner    *Owner
	Machines []Machine
	// Plan holds the machine plans, in Machines' order.
	Plan       inplace.Plan
	Extensions []*Extension
	// Notes are things worth a warning (ExtensionConfigs left out, no extension found).
	Notes []string
}

// Planner plans in-place updates against one management cluster: it reads the owners and their
// machines and previews each machine with the update extensions. It writes nothing (the
// ClusterClass check is a server-side dry run); ownerupdate.Updater carries the plans out.
type Planner struct {
	// Client reads and writes the management cluster (Machines, infrastructure machines,
	// bootstrap configs, ExtensionConfigs; unstructured, so no scheme is needed for them).
	Client client.Client
	// RESTConfig is the management cluster's connection, which extensions installed behind a
	// Service (ExtensionConfig spec.clientConfig.service) are called through (the API server's
	// service proxy); nil leaves those out with a note.
	RESTConfig *rest.Config
	// Options tune the extension clients.
	Options extension.Options
	// Settings are the provider's: Parallelism bounds the clusters planned at once (PlanFleet);
	// unset, it takes its default.
	Settings settings.Settings
}

// machineCallsInFlight bounds the CanUpdateMachine calls of one owner in flight. It spares the
// extension servers, which answer per machine; it is not a count of clusters, so the provider's
// max_parallel_clusters does not govern it.
const machineCallsInFlight = 4

// Revision names a change: a short hash of the version, the three patches and the topology
// variables (normalised JSON), the same at plan and apply time. A change without topology
// variables hashes as it did before they existed, so that the revisions owners carry stay
// current.
func Revision(c inplace.Change) string {
	norm := func(p []byte) any {
		if len(p) == 0 {
			return nil
		}
		var v any
		if json.Unmarshal(p, &v) != nil {
			return string(p)
		}
		return v
	}
	parts := []any{c.Version, norm(c.MachineSpec), norm(c.InfrastructureMachineSpec), norm(c.BootstrapConfigSpec)}
	if len(c.TopologyVariables) > 0 {
		vars := map[string]any{}
		for n, v := range c.TopologyVariables {
			vars[n] = norm(v)
		}
		parts = append(parts, vars) // json.Marshal sorts the names
	}
	raw, _ := json.Marshal(parts)
	sum := sha256.Sum256(raw)
	return "ip-" + hex.EncodeToString(sum[:])[:10]
}

// Plan reads the selected machines, asks the extensions and plans every machine. Blocked
// machines are in the result, not an error: callers decide (PlanResult.Plan.Err()). The
// single-owner form of fleetupdate.Service's Plan and Apply plans through it.
func (p *Planner) Plan(ctx context.Context, req Request) (*PlanResult, error) {
	if err := req.Change.Validate(); err != nil {
		return nil, usererr.Wrap(err, "Invalid Spec Patch", "Each spec patch must be a JSON object: a JSON merge patch (RFC 7386) of the object's spec.")
	}
	if len(req.Change.TopologyVariables) > 0 {
		return nil, errVariablesWithoutTopology(req.Selection.Namespace, req.Selection.Cluster)
	}
	endpoints := req.Endpoints
	var notes []string
	if endpoints == nil {
		var err error
		if endpoints, notes, err = fromExtensionConfigs(ctx, p.Client, p.RESTConfig, req.Selection.Namespace); err != nil {
			return nil, err
		}
	}
	res, err := p.plan(ctx, req, &extensionSet{endpoints: endpoints, opts: p.Options, ready: p.serviceReady}, &gateSet{})
	if err != nil {
		return nil, err
	}
	res.Notes = append(notes, res.Notes...)
	return res, nil
}

// plan plans one owner, asking the extensions of exts (connected on first need) unless Cluster
// API's InPlaceUpdates feature gate is evidently off (gates, read on first need).
func (p *Planner) plan(ctx context.Context, req Request, exts *extensionSet, gates *gateSet) (*PlanResult, error) {
	res := &PlanResult{Request: req, Revision: Revision(req.Change)}
	owner, err := readOwner(ctx, p.Client, req.Selection, req.Change)
	if err != nil {
		return nil, err
	}
	res.Owner = owner
	objs, err := readMachines(ctx, p.Client, req.Selection)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		des, err := inplace.Desired(o, req.Change)
		if err != nil {
			return nil, usererr.Wrap(err, "Change Does Not Apply", fmt.Sprintf("The change cannot be applied to Machine %s/%s.", o.Machine.GetNamespace(), o.Machine.GetName()))
		}
		res.Machines = append(res.Machines, Machine{Current: o, Desired: des})
	}
	needsAnswers := false
	for _, m := range res.Machines {
		needsAnswers = needsAnswers || m.changes()
	}
	var gate Gate
	if needsAnswers {
		var note string
		gate, note = gates.get(ctx, p.Client).forOwner(owner.Kind)
		if note != "" {
			res.Notes = append(res.Notes, note)
		}
		if gate.State == GateOff {
			planGateOff(res, gate)
			return res, nil
		}
	}
	if needsAnswers {
		if res.Extensions, err = exts.get(ctx); err != nil {
			return nil, err
		}
		if len(res.Extensions) == 0 {
			res.Notes = append(res.Notes, "no update extension is configured or registered (ExtensionConfig): nothing can be updated in place")
		}
		if why := oneHandlerPerHook(owner, res.Extensions); why != "" {
			planStuck(res, why)
			if gate.State == GateUnknown && res.Plan.Counts()[inplace.StrategyBlocked] > 0 {
				res.Notes = append(res.Notes, "Cannot tell whether Cluster API's "+inPlaceGate+" feature gate is on ("+gate.Why+
					"). The machines shown blocked assume it is (Cluster API then stops at the extensions); with it off, Cluster API replaces them instead.")
			}
			return res, nil
		}
	}
	if err := p.ask(ctx, res); err != nil {
		return nil, err
	}
	setNotes, err := p.askSet(ctx, res)
	if err != nil {
		return nil, err
	}
	for i := range res.Machines {
		res.Machines[i].Plan = applySet(res.Machines[i].Plan, setNotes, req.Fallback)
		res.Machines[i].Plan = applySurge(res.Machines[i].Plan, owner, req.Fallback)
		res.Machines[i].Plan = applyUpdateHandler(res.Machines[i].Plan, res.Extensions)
		res.Plan.Machines = append(res.Plan.Machines, res.Machines[i].Plan)
	}
	res.Notes = append(res.Notes, healthCheckNotes(ctx, p.Client, res)...)
	if gate.State == GateUnknown && res.Plan.Counts()[inplace.StrategyInPlace] > 0 {
		res.Notes = append(res.Notes, "Cannot tell whether Cluster API's "+inPlaceGate+" feature gate is on ("+gate.Why+
			"). The machines shown in place assume it is; with it off (the default up to Cluster API v1.14), Cluster API replaces them instead.")
	}
	return res, nil
}

// GateOffNote is the note of every changing machine when Cluster API's InPlaceUpdates feature
// gate is off: Cluster API replaces it, whatever the extensions would answer.
const GateOffNote = "Cluster API's " + inPlaceGate + " feature gate is off"

// planGateOff plans every machine of res as Cluster API does with the gate off: each one that
// changes is replaced (or, with fallback "none", blocks the plan), and no extension is asked.
func planGateOff(res *PlanResult, gate Gate) {
	changing := 0
	for i := range res.Machines {
		m := &res.Machines[i]
		mp := inplace.PlanMachine(m.Current, m.Desired, nil, res.Request.Fallback)
		if mp.Strategy != inplace.StrategyUnchanged {
			changing++
			// No field forces the replacement: the gate does.
			mp.Uncovered, mp.Notes = nil, append([]string{GateOffNote}, mp.Notes...)
		}
		m.Plan = mp
		res.Plan.Machines = append(res.Plan.Machines, mp)
	}
	if changing > 0 {
		res.Notes = append(res.Notes, GateOffNote+" ("+gate.Why+"), so Cluster API replaces every machine that changes instead of updating it in place, "+
			"whatever the update extensions cover; none was asked. To update in place, turn the gate on in the core and KubeadmControlPlane managers "+
			"(EXP_IN_PLACE_UPDATES=true with clusterctl, or "+featureGatesFlag+"=…,"+inPlaceGate+"=true).")
	}
}

// planStuck plans every machine of res as Cluster API does when it finds several extensions
// for an in-place hook (why, see oneHandlerPerHook): none is asked. A machine that changes is
// blocked whatever the fallback, since Cluster API stops the rollout with an error, except where
// the owner surges over all its replicas: then Cluster API replaces every machine without asking
// an extension (see applySurge), which fallback "rolling" allows.
func planStuck(res *PlanResult, why string) {
	owner := res.Owner
	for i := range res.Machines {
		m := &res.Machines[i]
		mp := inplace.PlanMachine(m.Current, m.Desired, nil, res.Request.Fallback)
		if mp.Strategy != inplace.StrategyUnchanged {
			mp.Uncovered = nil
			if owner != nil && owner.MaxSurge > 0 && int64(owner.MaxSurge) >= owner.Replicas {
				mp.Notes = append(mp.Notes, fmt.Sprintf("%s rolls out with maxSurge %d, at least its replicas: Cluster API replaces its machines without asking an extension",
					owner.Name(), owner.MaxSurge))
				mp.Strategy = blockedOr(res.Request.Fallback)
			} else {
				mp.Notes = append(mp.Notes, why)
				mp.Strategy, mp.Stuck = inplace.StrategyBlocked, why
			}
		}
		m.Plan = mp
		res.Plan.Machines = append(res.Plan.Machines, mp)
	}
}

// applyUpdateHandler blocks a machine planned in place when no extension serves UpdateMachine
// (see noUpdateHandler).
func applyUpdateHandler(mp inplace.MachinePlan, exts []*Extension) inplace.MachinePlan {
	if mp.Strategy != inplace.StrategyInPlace {
		return mp
	}
	if why := noUpdateHandler(exts); why != "" {
		mp.Notes = append(mp.Notes, why)
		mp.Strategy, mp.Stuck = inplace.StrategyBlocked, why
	}
	return mp
}

// askSet asks every CanUpdateMachineSet handler about the MachineDeployment's change, as CAPI
// does before it updates any of its machines in place. It returns nothing when every change of
// the MachineSet and its templates is covered (or there is no MachineDeployment change to ask
// about), else the reasons CAPI would replace the machines instead. Extensions that serve no
// CanUpdateMachineSet handler are not asked (CAPI then relies on CanUpdateMachine alone).
func (p *Planner) askSet(ctx context.Context, res *PlanResult) ([]string, error) {
	o := res.Owner
	if o == nil || o.Kind != KindMachineDeployment || o.SetCurrent.Machine == nil {
		return nil, nil
	}
	changes := false
	for _, m := range res.Machines {
		changes = changes || m.Plan.Strategy == inplace.StrategyInPlace
	}
	if !changes {
		return nil, nil
	}
	creq, err := inplace.CanUpdateMachineSetRequest(o.SetCurrent, o.SetDesired)
	if err != nil {
		return nil, usererr.Wrap(err, "Cannot Build CanUpdateMachineSet Request", o.Name()+" does not convert to CAPI's wire types.")
	}
	answers, err := askHandlers(ctx, res.Extensions, func(e *Extension) []extension.Handler { return e.CanUpdateSet },
		func(ctx context.Context, ext *Extension, handler string) (*hooksv1.CanUpdateMachineSetResponse, error) {
			r := *creq
			return ext.Client.CanUpdateMachineSet(ctx, handler, &r)
		},
		inplace.AnswerFromSet,
		func(ext string, err error) error {
			return usererr.Wrap(err, "Update Extension Failed",
				fmt.Sprintf("Asking extension %s whether it can update the machines of %s in place failed, so no plan can be made. %s", ext, o.Name(), hintFor(err)))
		})
	if err != nil || len(answers) == 0 {
		return nil, err
	}
	set := inplace.PlanMachine(o.SetCurrent, o.SetDesired, answers, inplace.FallbackNone)
	if set.Strategy != inplace.StrategyBlocked {
		return nil, nil
	}
	fields := make([]string, len(set.Uncovered))
	for i, f := range set.Uncovered {
		fields[i] = strings.Replace(f.String(), "machine ", "machineSet ", 1)
		fields[i] = strings.Replace(fields[i], "infrastructureMachine ", "infrastructureMachineTemplate ", 1)
		fields[i] = strings.Replace(fields[i], "bootstrapConfig ", "bootstrapConfigTemplate ", 1)
	}
	why := "no extension's CanUpdateMachineSet covers " + strings.Join(fields, ", ")
	if len(fields) == 0 {
		why = "CanUpdateMachineSet: " + strings.Join(set.Notes, "; ")
	}
	return []string{why + ", so Cluster API replaces the machines of " + o.Name() + " instead of updating them in place"}, nil
}

// applySet turns a machine CanUpdateMachine covers into a replacement when CanUpdateMachineSet
// does not cover its MachineDeployment's change (setNotes says why).
func applySet(mp inplace.MachinePlan, setNotes []string, fallback inplace.Fallback) inplace.MachinePlan {
	if len(setNotes) == 0 || mp.Strategy != inplace.StrategyInPlace {
		return mp
	}
	mp.Notes = append(mp.Notes, setNotes...)
	mp.Strategy = blockedOr(fallback)
	return mp
}

// applySurge accounts for what the extensions cannot tell: an owner whose rollout may surge
// (maxSurge > 0) creates new Machines first, and CAPI then deletes as many old ones instead of
// updating them in place, even when an extension covers the change. A MachineDeployment with
// maxSurge at least its replicas replaces every changing machine (a one-replica one with CAPI's
// default maxSurge 1 replaces its Machine); with fewer, up to maxSurge of them, which the plan
// cannot name, so fallback "none" refuses and "rolling" notes it. A KubeadmControlPlane does the
// same with its maxSurge (1 by default; 0, which updates every machine in place, needs 3
// replicas): a one-replica control plane is replaced, a larger one has one machine replaced.
func applySurge(mp inplace.MachinePlan, owner *Owner, fallback inplace.Fallback) inplace.MachinePlan {
	if owner == nil || owner.MaxSurge <= 0 || mp.Strategy != inplace.StrategyInPlace {
		return mp
	}
	hint := fmt.Sprintf("%s rolls out with maxSurge %d: Cluster API creates new Machines first and deletes as many old ones instead of updating them in place; "+
		"set spec.rollout.strategy.rollingUpdate maxSurge 0 and maxUnavailable ≥ 1 to update every machine in place", owner.Name(), owner.MaxSurge)
	if owner.Kind == KindKubeadmControlPlane {
		hint = fmt.Sprintf("%s rolls out with maxSurge %d: it creates a new control plane Machine first and deletes an old one instead of updating it in place; "+
			"maxSurge 0 (allowed from 3 replicas) updates every machine in place", owner.Name(), owner.MaxSurge)
	}
	switch {
	case int64(owner.MaxSurge) >= owner.Replicas:
		mp.Notes = append(mp.Notes, "replaced although "+strings.Join(mp.Extensions, ", ")+" covers the change: "+hint)
		mp.Strategy = blockedOr(fallback)
	case fallback == inplace.FallbackNone:
		mp.Notes = append(mp.Notes, "may be replaced: "+hint)
		mp.Strategy = inplace.StrategyBlocked
	default:
		mp.Notes = append(mp.Notes, "may be replaced: "+hint)
		mp.MayBeReplaced = hint
	}
	return mp
}

func blockedOr(f inplace.Fallback) inplace.Strategy {
	if f == inplace.FallbackRolling {
		return inplace.StrategyRolling
	}
	return inplace.StrategyBlocked
}

// ask calls every CanUpdateMachine handler for every changing machine, a few at a time, and
// plans each machine from the answers.
func (p *Planner) ask(ctx context.Context, res *PlanResult) error {
	var g errgroup.Group
	g.SetLimit(machineCallsInFlight)
	for i := range res.Machines {
		m := &res.Machines[i]
		g.Go(func() error { return p.planMachine(ctx, res, m) })
	}
	return g.Wait()
}

func (p *Planner) planMachine(ctx context.Context, res *PlanResult, m *Machine) error {
	if !m.changes() {
		m.Plan = inplace.PlanMachine(m.Current, m.Desired, nil, res.Request.Fallback)
		return nil
	}
	creq, err := inplace.CanUpdateMachineRequest(m.Current, m.Desired)
	if err != nil {
		return usererr.Wrap(err, "Cannot Build CanUpdateMachine Request", "Machine "+m.Current.Machine.GetName()+" does not convert to CAPI's wire types.")
	}
	answers, err := askHandlers(ctx, res.Extensions, func(e *Extension) []extension.Handler { return e.CanUpdate },
		func(ctx context.Context, ext *Extension, handler string) (*hooksv1.CanUpdateMachineResponse, error) {
			r := *creq
			return ext.Client.CanUpdateMachine(ctx, handler, &r)
		},
		inplace.AnswerFrom,
		func(ext string, err error) error {
			return usererr.Wrap(err, "Update Extension Failed",
				fmt.Sprintf("Asking extension %s whether it can update Machine %s in place failed, so no plan can be made. %s",
					ext, m.Current.Machine.GetName(), hintFor(err)))
		})
	if err != nil {
		return err
	}
	m.Plan = inplace.PlanMachine(m.Current, m.Desired, answers, res.Request.Fallback)
	return nil
}

// askHandlers asks every handler that handlers lists of each extension, in order, with call, and
// takes each answer with answer. An answer is named after its extension, and after the handler
// too when the extension serves more than one. A handler that fails stops the asking with
// failed's error, unless its failure policy is Ignore: its failure is then an answer too.
// Each call gets a copy of the request of its own (call makes it): the client sets Settings on
// the request.
func askHandlers[Resp any](ctx context.Context, exts []*Extension, handlers func(*Extension) []extension.Handler,
	call func(ctx context.Context, ext *Extension, handler string) (Resp, error),
	answer func(name string, resp Resp, err error) inplace.Answer, failed func(ext string, err error) error,
) ([]inplace.Answer, error) {
	var answers []inplace.Answer
	for _, ext := range exts {
		hs := handlers(ext)
		for _, h := range hs {
			name := ext.Name
			if len(hs) > 1 {
				name += "/" + h.Name
			}
			resp, err := call(ctx, ext, h.Name)
			if err != nil && h.FailurePolicy != "Ignore" {
				return nil, failed(ext.Name, err)
			}
			answers = append(answers, answer(name, resp, err))
		}
	}
	return answers, nil
}

func hintFor(err error) string {
	if e, ok := usererr.As(extensionError(err)); ok {
		return e.Detail
	}
	return ""
}

// SpecPatch is the JSON merge patch that turns from's spec into to's (nil when equal).
func SpecPatch(from, to map[string]any) ([]byte, error) {
	a, err := json.Marshal(map[string]any{"spec": from["spec"]})
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(map[string]any{"spec": to["spec"]})
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.CreateMergePatch(a, b)
	if err != nil || string(patch) == "{}" {
		return nil, err
	}
	return patch, nil
}

// changes reports whether the machine's specs change. Specs that cannot be compared count as
// changing: PlanMachine then notes why and blocks the machine.
func (m *Machine) changes() bool {
	changed, err := inplace.ChangedFields(m.Current, m.Desired)
	return err != nil || len(changed) > 0
}

// Digest is a short hash of a JSON patch, normalised (key order and spacing do not count):
// "sha256:" and 16 hex digits. It shows that a write-only patch changed without showing it.
func Digest(patch []byte) string {
	var v any
	raw := patch
	if json.Unmarshal(patch, &v) == nil {
		raw, _ = json.Marshal(v)
	}
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:])[:16]
}
