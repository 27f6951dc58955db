package owners

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// AnnotationRevision records on the owner the revision (see Revision) last written to it.
const AnnotationRevision = "gradual.dev/inplace-update"

// inPlaceAnnotationPrefix marks CAPI's in-place bookkeeping on a Machine (e.g.
// in-place-updates.internal.cluster.x-k8s.io/update-in-progress): a Machine carrying one is
// still being updated.
const inPlaceAnnotationPrefix = "in-place-updates.internal.cluster.x-k8s.io/"

// Statuses of a machine after Execute.
const (
	// StatusUpdated: the same Machine (same UID) is now up to date with the change; also one
	// planned unchanged that Cluster API moved to a new MachineSet and updated in place (a
	// change the preview could not see: a topology variable the ClusterClass's patches read).
	StatusUpdated = "updated"
	// StatusUnchanged: nothing of the machine changed.
	StatusUnchanged = "unchanged"
	// StatusReplaced: the Machine is gone; Cluster API replaced it.
	StatusReplaced = "replaced"
	// StatusCreated: a Machine Cluster API created during the update (a replacement).
	StatusCreated = "created"
	// StatusFailed: the update did not finish (see the error).
	StatusFailed = "failed"
	// StatusNotStarted: nothing was written (the apply stopped before the owner changed).
	StatusNotStarted = "not-started"
)

// ExecuteRequest is one apply of a plan.
type ExecuteRequest struct {
	// VerifyTimeout bounds the wait for the owner and its machines to be up to date.
	VerifyTimeout time.Duration
	// Clock defaults to the wall clock.
	Clock engine.Clock
	// Logf receives progress lines.
	Logf func(msg string, fields map[string]any)
	// Holder, when set, is the identity (records.HolderIdentity) under which Execute takes the
	// Lease of the owner (LeaseKeys) before it changes anything, in LeaseNamespace of the
	// management cluster (records.DefaultNamespace when empty), for the provider's
	// lease_duration (Planner.Settings). The wait stops, as on cancellation, when it is lost.
	Holder         string
	LeaseNamespace string
}

// Execution is what Execute did.
type Execution struct {
	// Status of every machine, by name (see the Status constants).
	Status map[string]string
	// Templates are the names of the templates created (rotated).
	Templates []string
	// OwnerChanged: the owner's spec was written.
	OwnerChanged bool
}

// Execute writes the change to the owner and lets Cluster API carry it out: the rotated
// templates are created, the owner is pointed at them (and gets the version), and Execute waits
// until the owner and every one of its machines are up to date by CAPI's own account, none is
// updating, and every Node is Ready on the desired kubelet version. It never writes a Machine,
// an infrastructure machine or a bootstrap config. A blocked plan is refused before anything is
// written.
func (p *Planner) Execute(ctx context.Context, res *Result, req ExecuteRequest) (*Execution, error) {
	if err := res.Plan.Err(); err != nil {
		return nil, engine.Mark(engine.ErrChangeRefused, usererr.Wrap(err, inplace.BlockedSummary, inplace.BlockedLead+"."))
	}
	if req.Clock == nil {
		req.Clock = engine.SystemClock{}
	}
	if req.Logf == nil {
		req.Logf = func(string, map[string]any) {}
	}
	out := &Execution{Status: map[string]string{}}
	for _, m := range res.Machines {
		out.Status[m.Plan.Machine] = StatusNotStarted
	}
	if req.Holder != "" {
		runCtx, release, err := p.holdLeases(ctx, LeaseKeys(res.Request.Selection, res.Machines), req)
		if err != nil {
			return out, err
		}
		defer release()
		ctx = runCtx // cancelled, with the reason, if the Lease is lost
	}
	o := res.Owner
	for _, t := range o.Templates {
		created, err := p.ensureTemplate(ctx, t)
		if err != nil {
			return out, err
		}
		if created {
			out.Templates = append(out.Templates, t.GetName())
			req.Logf(fmt.Sprintf("created %s %s/%s for %s", t.GetKind(), t.GetNamespace(), t.GetName(), o.Name()), nil)
		}
	}
	patch, err := specPatch(o.Current.Object, o.Desired.Object)
	if err != nil {
		return out, err
	}
	if patch != nil || o.Current.GetAnnotations()[AnnotationRevision] != res.Revision {
		if err := p.writeOwner(ctx, o, patch, res.Revision); err != nil {
			return out, err
		}
		out.OwnerChanged = patch != nil
		req.Logf(fmt.Sprintf("wrote the change to %s (revision %s); Cluster API rolls it out", o.Name(), res.Revision), nil)
	}
	st, err := p.waitUpToDate(ctx, res, req)
	for name, s := range st {
		out.Status[name] = s
	}
	return out, err
}

// ensureTemplate creates a rotated template; one of that name that exists already must hold the
// same spec (it was created by an earlier apply of the same change), else the apply stops.
func (p *Planner) ensureTemplate(ctx context.Context, t *unstructured.Unstructured) (bool, error) {
	if err := records.Fenced(ctx); err != nil {
		return false, err // the Lease may be another apply's now: write nothing
	}
	err := p.Client.Create(ctx, t.DeepCopy())
	if err == nil {
		return true, nil
	}
	what := fmt.Sprintf("%s %s/%s", t.GetKind(), t.GetNamespace(), t.GetName())
	if !apierrors.IsAlreadyExists(err) {
		return false, usererr.Wrap(err, "Cannot Create Template", "Creating "+what+" (the rotated template) failed; nothing else was changed.")
	}
	have := &unstructured.Unstructured{}
	have.SetGroupVersionKind(t.GroupVersionKind())
	if err := p.Client.Get(ctx, client.ObjectKeyFromObject(t), have); err != nil {
		return false, usererr.Wrap(err, "Cannot Read Template", "Reading "+what+" failed.")
	}
	if patch, err := specPatch(have.Object, t.Object); err != nil || patch != nil {
		return false, engine.Mark(engine.ErrChangeRefused, usererr.New("Template Name Taken",
			fmt.Sprintf("%s exists with another spec than the rotated template this change needs (its name is a hash of its content, so someone edited it). Delete or restore it, then apply again.", what)))
	}
	return false, nil
}

// writeOwner merge-patches the owner's spec and records the revision, under the resourceVersion
// the plan read: an owner changed since is a conflict, and the apply stops rather than overwrite.
func (p *Planner) writeOwner(ctx context.Context, o *Owner, specPatchJSON []byte, revision string) error {
	doc := map[string]any{}
	if specPatchJSON != nil {
		if err := json.Unmarshal(specPatchJSON, &doc); err != nil {
			return err
		}
	}
	doc["metadata"] = map[string]any{
		"resourceVersion": o.Current.GetResourceVersion(),
		"annotations":     map[string]any{AnnotationRevision: revision},
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(o.Current.GroupVersionKind())
	u.SetNamespace(o.Current.GetNamespace())
	u.SetName(o.Current.GetName())
	if err := records.Fenced(ctx); err != nil {
		return err // the Lease may be another apply's now: write nothing
	}
	if err := p.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, raw)); err != nil {
		if apierrors.IsConflict(err) {
			return engine.Mark(engine.ErrChangeRefused, usererr.Wrap(err, "Owner Changed Since The Plan", o.Name()+" was changed after the plan read it; plan again."))
		}
		return usererr.Wrap(err, "Cannot Write Owner", "Writing the change to "+o.Name()+" failed (templates created by this apply stay, unused).")
	}
	return nil
}

// waitUpToDate polls the owner, its machines and their Nodes until everything is up to date
// (see upToDate) or VerifyTimeout passes; the error then names the cluster, the owner and what
// the last look found wrong, machine by machine.
func (p *Planner) waitUpToDate(ctx context.Context, res *Result, req ExecuteRequest) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, req.VerifyTimeout)
	defer cancel()
	var last *look
	var lastErr error
	for {
		l, err := p.lookAt(ctx, res)
		if err == nil {
			last, lastErr = l, nil
			if len(l.problems) == 0 {
				return l.status(res), nil
			}
		} else {
			lastErr = err
		}
		if sleepErr := req.Clock.Sleep(ctx, 2*time.Second); sleepErr != nil {
			sel := res.Request.Selection
			var lines []string
			if last != nil {
				lines = last.problems
			}
			if lastErr != nil {
				lines = append(lines, lastErr.Error())
			}
			var st map[string]string
			if last != nil {
				st = last.status(res)
				for name, s := range st {
					if s != StatusReplaced && s != StatusUnchanged {
						st[name] = StatusFailed
					}
				}
			}
			return st, usererr.Wrap(notVerified(strings.Join(lines, "\n")), "In-Place Update Not Verified",
				fmt.Sprintf("Cluster %s/%s, %s: the change was written, but Cluster API did not bring every machine up to date within %s "+
					"(%v). Cluster API goes on with it; look at the machines named below, then apply again to verify.",
					sel.Namespace, sel.Cluster, res.Owner.Name(), req.VerifyTimeout, context.Cause(ctx)))
		}
	}
}

// ErrNotVerified marks an update Cluster API did not finish within the verify timeout: the
// change's failure on that cluster (it counts against a fleet update's failure budget), unlike an
// API server that could not be reached.
var ErrNotVerified = errors.New("not up to date within the verify timeout")

// notVerified is what the last look found wrong, as an ErrNotVerified.
type notVerified string

func (e notVerified) Error() string        { return string(e) }
func (e notVerified) Is(target error) bool { return target == ErrNotVerified }

// look is one observation of the owner and its machines.
type look struct {
	// machines by name → UID.
	machines map[string]string
	// moved are the machines of machines now in another MachineSet than when planned.
	moved    map[string]bool
	problems []string
}

// machineSetLabel names a MachineDeployment's Machine's MachineSet (clusterv1.MachineSetNameLabel).
const machineSetLabel = "cluster.x-k8s.io/set-name"

func (l *look) status(res *Result) map[string]string {
	st := map[string]string{}
	for _, m := range res.Machines {
		uid, ok := l.machines[m.Plan.Machine]
		switch {
		case !ok || uid != string(m.Current.Machine.GetUID()):
			st[m.Plan.Machine] = StatusReplaced
		case m.Plan.Strategy == inplace.StrategyUnchanged && !l.moved[m.Plan.Machine]:
			st[m.Plan.Machine] = StatusUnchanged
		default:
			st[m.Plan.Machine] = StatusUpdated
		}
	}
	for name := range l.machines {
		if _, ok := st[name]; !ok {
			st[name] = StatusCreated
		}
	}
	return st
}

// lookAt reads the owner, its machines and their Nodes and lists what is not yet as desired:
// the owner's observedGeneration behind, replicas not all up to date and available, a Machine
// not UpToDate, Updating, carrying CAPI's in-place bookkeeping, on another version or without a
// Node, a Node not Ready or on another kubelet version.
func (p *Planner) lookAt(ctx context.Context, res *Result) (*look, error) {
	o := res.Owner
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(o.Current.GroupVersionKind())
	if err := p.Client.Get(ctx, client.ObjectKeyFromObject(o.Current), owner); err != nil {
		return nil, fmt.Errorf("read %s: %w", o.Name(), err)
	}
	l := &look{machines: map[string]string{}, moved: map[string]bool{}}
	planned := map[string]string{}
	for _, m := range res.Machines {
		planned[m.Plan.Machine] = m.Current.Machine.GetLabels()[machineSetLabel]
	}
	l.problems = ownerProblems(owner, o.Name())
	if res.Request.Selection.Topology {
		l.problems = append(l.problems, topologyOwnerProblems(owner, o, res.Request.Change.Version)...)
	}
	machines, deleting, err := listMachines(ctx, p.Client, res.Request.Selection)
	if err != nil {
		return nil, err
	}
	// Counted here, not only in the owner's status, which can lag a step behind: a Machine on
	// its way out, or one not created yet, means CAPI is not done.
	if replicas, found, _ := unstructured.NestedInt64(owner.Object, "spec", "replicas"); found && (int64(len(machines)) != replicas || len(deleting) > 0) {
		l.problems = append(l.problems, fmt.Sprintf("%s: %d Machines (%d more being deleted: %s), want %d", o.Name(), len(machines), len(deleting), strings.Join(deleting, ", "), replicas))
	}
	want := res.Request.Change.Version
	var wc client.Client
	for _, m := range machines {
		u := m.Machine
		l.machines[u.GetName()] = string(u.GetUID())
		// A MachineDeployment's Machine kept (same UID) but moved to the MachineSet of a new
		// template was updated in place: Cluster API moves a Machine only to update it in place
		// (startMoveMachines in core/reconcilers/machineset/machineset_controller.go, Cluster API
		// v1.14.2). It tells an update the preview did not foresee (a topology variable the
		// ClusterClass's patches read) from no change.
		if was, ok := planned[u.GetName()]; ok && was != "" && u.GetLabels()[machineSetLabel] != was {
			l.moved[u.GetName()] = true
		}
		problem := machineProblem(u, want)
		node, _, _ := unstructured.NestedString(u.Object, "status", "nodeRef", "name")
		if problem == "" && node != "" {
			if wc == nil && p.Workload != nil {
				if wc, err = p.Workload(ctx, res.Request.Selection.Namespace, res.Request.Selection.Cluster); err != nil {
					problem = fmt.Sprintf("its Node %s cannot be checked: %v", node, err)
				}
			}
			if wc != nil {
				var n corev1.Node
				if err := wc.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
					problem = fmt.Sprintf("read Node %s: %v", node, err)
				} else if err := nodeProblem(&n, want); err != nil {
					problem = err.Error()
				}
			}
		}
		if problem != "" {
			l.problems = append(l.problems, fmt.Sprintf("machine %s: %s", u.GetName(), problem))
		}
	}
	slices.Sort(l.problems)
	return l, nil
}

// ownerProblems lists why an owner is not done rolling out (v1beta2 status fields).
func ownerProblems(u *unstructured.Unstructured, name string) []string {
	var out []string
	gen := u.GetGeneration()
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if observed < gen {
		out = append(out, fmt.Sprintf("%s: observedGeneration %d behind generation %d", name, observed, gen))
	}
	replicas, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !found {
		return out
	}
	for _, f := range []string{"replicas", "upToDateReplicas", "availableReplicas"} {
		if v, _, _ := unstructured.NestedInt64(u.Object, "status", f); v != replicas {
			out = append(out, fmt.Sprintf("%s: status.%s %d, want %d", name, f, v, replicas))
		}
	}
	return out
}

// machineProblem says why a Machine is not up to date by CAPI's account; "" when it is.
func machineProblem(u *unstructured.Unstructured, version string) string {
	if v, _, _ := unstructured.NestedString(u.Object, "spec", "version"); version != "" && v != version {
		return fmt.Sprintf("spec.version %s, want %s", v, version)
	}
	for k := range u.GetAnnotations() {
		if strings.HasPrefix(k, inPlaceAnnotationPrefix) {
			return "in-place update in progress (" + k + ")"
		}
	}
	if c := condition(u, "Updating"); c != nil && c["status"] == "True" {
		return fmt.Sprintf("Updating: %v", c["message"])
	}
	if c := condition(u, "UpToDate"); c == nil || c["status"] != "True" {
		msg := "no UpToDate condition"
		if c != nil {
			msg = fmt.Sprintf("UpToDate %v: %v", c["status"], c["message"])
		}
		return msg
	}
	if node, _, _ := unstructured.NestedString(u.Object, "status", "nodeRef", "name"); node == "" {
		return "no Node yet (status.nodeRef)"
	}
	return ""
}

// condition is the v1beta2 condition of that type (status.conditions), nil when absent.
func condition(u *unstructured.Unstructured, t string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == t {
			return m
		}
	}
	return nil
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
