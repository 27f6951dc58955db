package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Annotations recording progress on each Machine: the revision (see Revision) being or last
// applied in place, and how that went.
const (
	AnnotationRevision = "gradual.dev/inplace-update"
	AnnotationState    = "gradual.dev/inplace-update-state"
	AnnotationError    = "gradual.dev/inplace-update-error"
	// AnnotationExtensions lists, comma-separated, the extensions an update was given to, so
	// an interrupted update is resumed with the same ones.
	AnnotationExtensions = "gradual.dev/inplace-update-extensions"
)

// Machine states in AnnotationState.
const (
	StateUpdating = "updating"
	StateDone     = "done"
	StateFailed   = "failed"
)

// Statuses of a machine after Execute.
const (
	StatusUpdated          = "updated"
	StatusUnchanged        = "unchanged"
	StatusFailed           = "failed"
	StatusNotStarted       = "not-started"
	StatusRolloutRequested = "rollout-requested"
)

// ExecuteRequest is one apply of a plan.
type ExecuteRequest struct {
	// UpdateLimit is how many machines are updated at once (at least 1).
	UpdateLimit int
	// VerifyTimeout bounds the wait for a machine's Node to be Ready on the new version.
	VerifyTimeout time.Duration
	// Clock defaults to the wall clock.
	Clock engine.Clock
	// Logf receives progress lines.
	Logf func(msg string, fields map[string]any)
	// Holder, when set, is the identity (records.HolderIdentity) under which Execute takes the
	// Lease of every owner of the machines (LeaseKeys) before it changes anything, in
	// LeaseNamespace of the management cluster (records.DefaultNamespace when empty), for
	// LeaseDuration (DefaultLeaseDuration when zero). The update then stops, as on
	// cancellation, when a Lease is lost.
	Holder         string
	LeaseNamespace string
	LeaseDuration  time.Duration
}

// Execution is what Execute did.
type Execution struct {
	Plan   engine.Plan
	Result engine.Result
	// Status of every machine, by name (see the Status constants).
	Status map[string]string
	// RolloutRequested lists the MachineDeployments whose spec.rollout.after was set.
	RolloutRequested []string
}

// Execute updates the in-place machines of res in waves of at most UpdateLimit through the
// engine, stopping at the first failure (no rollback: an in-place update cannot be undone, as
// in CAPI). Machines to be replaced get their MachineDeployment's spec.rollout.after set once
// every in-place machine succeeded. A blocked plan is refused.
func (p *Planner) Execute(ctx context.Context, res *Result, req ExecuteRequest) (*Execution, error) {
	if err := res.Plan.Err(); err != nil {
		return nil, usererr.Wrap(err, "Machines Cannot Be Updated In Place", "No update extension covers these changes, and fallback is \"none\".")
	}
	if req.Clock == nil {
		req.Clock = engine.SystemClock{}
	}
	if req.Logf == nil {
		req.Logf = func(string, map[string]any) {}
	}
	if req.Holder != "" {
		runCtx, release, err := p.holdLeases(ctx, LeaseKeys(res.Request.Selection, res.Machines), req)
		if err != nil {
			return nil, err
		}
		defer release()
		ctx = runCtx // cancelled, with the reason, if a Lease is lost
	}
	w := &world{p: p, res: res, req: req, machines: map[string]*Machine{}}
	var targets []engine.Target
	var rolling []*Machine
	for i := range res.Machines {
		m := &res.Machines[i]
		name := m.Plan.Machine
		w.machines[name] = m
		switch m.Plan.Strategy {
		case inplace.StrategyInPlace:
			targets = append(targets, engine.Target{Name: name})
		case inplace.StrategyUnchanged:
			targets = append(targets, engine.Target{Name: name, Record: engine.TargetRecord{Current: res.Revision}})
		case inplace.StrategyRolling:
			rolling = append(rolling, m)
		}
	}
	policy := engine.Policy{
		UpdateLimit: engine.UpdateLimitOf(req.UpdateLimit), MaxFailures: engine.MaxFailuresOf(0), OnFailure: engine.Halt,
		VerifyTimeout: req.VerifyTimeout, RollbackTimeout: time.Minute,
	}
	plan := engine.PlanRollout(targets, res.Revision, policy)
	for _, n := range plan.Notes {
		req.Logf("in-place plan: "+n, map[string]any{"revision": res.Revision})
	}
	out := &Execution{Plan: plan, Status: map[string]string{}}
	out.Result = engine.Execute(ctx, plan, w, req.Clock, policy)
	var failed []string
	for _, o := range out.Result.Outcomes {
		switch o.Status {
		case engine.StatusSucceeded:
			out.Status[o.Target] = StatusUpdated
		case engine.StatusAlreadyCurrent:
			out.Status[o.Target] = StatusUnchanged
		case engine.StatusNotStarted, engine.StatusSkipped:
			out.Status[o.Target] = StatusNotStarted
		default:
			out.Status[o.Target] = StatusFailed
			failed = append(failed, fmt.Sprintf("machine %s: %s", o.Target, o.Error))
		}
	}
	for _, m := range rolling {
		out.Status[m.Plan.Machine] = StatusNotStarted
	}
	if len(failed) > 0 || out.Result.Cancelled {
		c := out.Result.Counts()
		detail := fmt.Sprintf("The in-place update of %s stopped: %d machine(s) updated, %d not started and left untouched. "+
			"An in-place update is not rolled back (as in CAPI); fix the cause and apply again to continue.",
			res.Request.Selection.describe(), c[engine.StatusSucceeded], c[engine.StatusNotStarted]+len(rolling))
		if out.Result.Cancelled {
			failed = append(failed, "cancelled: "+out.Result.CancelCause)
		}
		return out, usererr.Wrap(errors.New(strings.Join(failed, "\n")), "In-Place Update Failed", detail)
	}
	if len(rolling) > 0 {
		mds, err := p.requestRollout(ctx, res, rolling, req.Clock.Now())
		out.RolloutRequested = mds
		if err != nil {
			return out, err
		}
		for _, m := range rolling {
			out.Status[m.Plan.Machine] = StatusRolloutRequested
		}
	}
	return out, nil
}

// requestRollout sets spec.rollout.after on the MachineDeployments of the rolling machines, and
// the template's version when the change has one, so CAPI replaces them.
func (p *Planner) requestRollout(ctx context.Context, res *Result, rolling []*Machine, now time.Time) ([]string, error) {
	seen := map[string]bool{}
	var mds []string
	for _, m := range rolling {
		md := m.Current.Machine.GetLabels()[deploymentNameLabel]
		if md == "" {
			return mds, usererr.New("Machine Cannot Be Replaced",
				fmt.Sprintf("Machine %s needs replacing (fallback \"rolling\") but belongs to no MachineDeployment (no %s label).", m.Plan.Machine, deploymentNameLabel))
		}
		if seen[md] {
			continue
		}
		seen[md] = true
		spec := map[string]any{"rollout": map[string]any{"after": now.UTC().Format(time.RFC3339)}}
		if v := res.Request.Change.Version; v != "" {
			spec["template"] = map[string]any{"spec": map[string]any{"version": v}}
		}
		patch, err := json.Marshal(map[string]any{"spec": spec})
		if err != nil {
			return mds, err
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(machineDeploymentGVK)
		u.SetNamespace(m.Current.Machine.GetNamespace())
		u.SetName(md)
		if err := p.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return mds, usererr.Wrap(err, "Rollout Not Requested", fmt.Sprintf("Setting spec.rollout.after on MachineDeployment %s/%s failed.", u.GetNamespace(), md))
		}
		mds = append(mds, md)
	}
	return mds, nil
}

// world is the engine's World for one Execute: targets are Machines.
type world struct {
	p        *Planner
	res      *Result
	req      ExecuteRequest
	machines map[string]*Machine

	mu       sync.Mutex
	workload client.Client
}

var _ engine.World = (*world)(nil)

// Apply calls UpdateMachine on every extension that covers the machine until each reports
// done, then writes the desired specs.
// Apply updates one machine through the extensions. The engine acts on errors by class (see
// engine.ErrRevisionFailed): every failure of an in-place update counts against the budget and
// stops the run as before, so Apply's errors are refused changes and Verify's revision
// failures. Telling the extensions' infrastructure failures apart is left to the in-place
// issue.
func (w *world) Apply(ctx context.Context, target, revision string) error {
	return markUnlessClassified(engine.ErrChangeRefused, w.apply(ctx, target, revision))
}

// Verify checks one machine's Node; see Apply for how its errors are classed.
func (w *world) Verify(ctx context.Context, target, revision string) error {
	return markUnlessClassified(engine.ErrRevisionFailed, w.verify(ctx, target, revision))
}

func markUnlessClassified(class, err error) error {
	if err == nil || errors.Is(err, engine.ErrTargetGone) || errors.Is(err, engine.ErrRevisionFailed) || errors.Is(err, engine.ErrChangeRefused) {
		return err
	}
	return engine.Mark(class, err)
}

func (w *world) apply(ctx context.Context, target, _ string) error {
	m := w.machines[target]
	req, err := inplace.UpdateMachineRequest(m.Desired)
	if err != nil {
		return err
	}
	for _, name := range m.Plan.Extensions {
		extName, _, _ := strings.Cut(name, "/")
		var ext *Extension
		for _, e := range w.res.Extensions {
			if e.Name == extName {
				ext = e
			}
		}
		if ext == nil || len(ext.Update) == 0 {
			return fmt.Errorf("extension %s covers the machine but serves no UpdateMachine handler", extName)
		}
		for _, h := range ext.Update {
			for {
				r := *req
				resp, err := ext.Client.UpdateMachine(ctx, h.Name, &r)
				if err != nil {
					return err
				}
				wait := ext.Client.RetryAfter(resp)
				if wait == 0 {
					break
				}
				w.req.Logf(fmt.Sprintf("machine %s: %s updating, next call in %s", target, ext.Name, wait), map[string]any{"machine": target})
				if err := w.req.Clock.Sleep(ctx, wait); err != nil {
					return fmt.Errorf("extension %s still updating: %w", ext.Name, err)
				}
			}
		}
	}
	for _, pair := range []struct{ cur, des *unstructured.Unstructured }{
		{m.Current.Machine, m.Desired.Machine},
		{m.Current.InfrastructureMachine, m.Desired.InfrastructureMachine},
		{m.Current.BootstrapConfig, m.Desired.BootstrapConfig},
	} {
		if pair.cur == nil || pair.des == nil {
			continue
		}
		patch, err := specPatch(pair.cur.Object, pair.des.Object)
		if err != nil {
			return err
		}
		if patch == nil {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(pair.cur.GroupVersionKind())
		u.SetNamespace(pair.cur.GetNamespace())
		u.SetName(pair.cur.GetName())
		if err := w.p.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("write the desired spec of %s %s: %w", pair.cur.GetKind(), pair.cur.GetName(), err)
		}
	}
	return nil
}

// Verify waits for the machine's Node to be Ready with the desired kubelet version. Other
// revisions need no check: nothing is restored in place.
func (w *world) verify(ctx context.Context, target, revision string) error {
	if revision != w.res.Revision {
		return nil
	}
	m := w.machines[target]
	if m.Plan.Node == "" {
		return fmt.Errorf("machine has no Node (status.nodeRef) to verify")
	}
	want, _, _ := unstructured.NestedString(m.Desired.Machine.Object, "spec", "version")
	c, err := w.workloadClient(ctx)
	if err != nil {
		return err
	}
	var last error
	for {
		var node corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: m.Plan.Node}, &node); err != nil {
			last = fmt.Errorf("read Node %s: %w", m.Plan.Node, err)
		} else {
			last = nodeProblem(&node, want)
		}
		if last == nil {
			return nil
		}
		if err := w.req.Clock.Sleep(ctx, time.Second); err != nil {
			return last
		}
	}
}

func nodeProblem(node *corev1.Node, version string) error {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	switch {
	case !ready:
		return fmt.Errorf("Node %s is not Ready", node.Name)
	case version != "" && node.Status.NodeInfo.KubeletVersion != version:
		return fmt.Errorf("Node %s reports kubelet %s, want %s", node.Name, node.Status.NodeInfo.KubeletVersion, version)
	}
	return nil
}

func (w *world) workloadClient(ctx context.Context) (client.Client, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.workload != nil {
		return w.workload, nil
	}
	if w.p.Workload == nil {
		return nil, errors.New("no workload cluster client configured")
	}
	sel := w.res.Request.Selection
	c, err := w.p.Workload(ctx, sel.Namespace, sel.Cluster)
	if err != nil {
		return nil, err
	}
	w.workload = c
	return c, nil
}

// Restore does nothing: an in-place update is not undone (as in CAPI).
func (w *world) Restore(context.Context, string, string) error { return nil }

// Record keeps the Machine's annotations in step with its update.
func (w *world) Record(ctx context.Context, ev engine.Event) error {
	if ev.Target == "" {
		switch ev.Kind {
		case engine.EventBatchStarted:
			w.req.Logf(fmt.Sprintf("in-place %s %d/%d started: %v", ev.Phase, ev.Batch, ev.Batches, ev.Targets), map[string]any{"revision": w.res.Revision})
		case engine.EventRunFinished:
			w.req.Logf("in-place update "+ev.Reason, map[string]any{"revision": w.res.Revision})
		}
		return nil
	}
	ann := map[string]any{}
	switch ev.Kind {
	case engine.EventProvisioning:
		ann[AnnotationRevision], ann[AnnotationState], ann[AnnotationError] = ev.Revision, StateUpdating, nil
		if m := w.machines[ev.Target]; m != nil && len(m.Plan.Extensions) > 0 {
			ann[AnnotationExtensions] = strings.Join(m.Plan.Extensions, ",")
		} else {
			ann[AnnotationExtensions] = nil
		}
	case engine.EventSucceeded:
		ann[AnnotationRevision], ann[AnnotationState] = ev.Revision, StateDone
	case engine.EventFailed:
		reason := ev.Reason
		if len(reason) > 1024 {
			reason = reason[:1024] + "…"
		}
		ann[AnnotationState], ann[AnnotationError] = StateFailed, reason
	default:
		return nil
	}
	m := w.machines[ev.Target]
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(machineGVK)
	u.SetNamespace(m.Current.Machine.GetNamespace())
	u.SetName(ev.Target)
	return w.p.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch))
}
