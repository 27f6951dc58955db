package inplace

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	hooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
)

// Fallback is what happens to a machine no extension fully covers.
type Fallback string

const (
	// FallbackNone fails the plan, naming the machine and the uncovered fields.
	FallbackNone Fallback = "none"
	// FallbackRolling replaces the machine the CAPI way.
	FallbackRolling Fallback = "rolling"
)

// ParseFallback accepts "none" and "rolling".
func ParseFallback(s string) (Fallback, error) {
	switch f := Fallback(s); f {
	case FallbackNone, FallbackRolling:
		return f, nil
	}
	return "", fmt.Errorf("fallback %q is neither %q nor %q", s, FallbackNone, FallbackRolling)
}

// Strategy is how a machine gets to its desired specs.
type Strategy string

const (
	// StrategyUnchanged: nothing in its specs changes; no extension is called to update it.
	StrategyUnchanged Strategy = "unchanged"
	// StrategyInPlace: the extensions listed cover every changed field.
	StrategyInPlace Strategy = "in-place"
	// StrategyRolling: some change is uncovered; the machine is replaced (fallback rolling).
	StrategyRolling Strategy = "rolling"
	// StrategyBlocked: some change is uncovered and fallback is none; the plan fails.
	StrategyBlocked Strategy = "blocked"
)

// Answer is one extension's CanUpdateMachine answer for a machine: patches to apply to the
// current objects, or the error that stood in for an answer (it then covers nothing).
type Answer struct {
	Extension string
	// Machine, InfrastructureMachine and BootstrapConfig are the answer's patches
	// (machinePatch, infrastructureMachinePatch, bootstrapConfigPatch); undefined ones are
	// no patch.
	Machine, InfrastructureMachine, BootstrapConfig hooksv1.Patch
	Err                                             error
}

// AnswerFrom takes the patches of a CanUpdateMachine response.
func AnswerFrom(extension string, resp *hooksv1.CanUpdateMachineResponse, err error) Answer {
	a := Answer{Extension: extension, Err: err}
	if resp != nil && err == nil {
		a.Machine, a.InfrastructureMachine, a.BootstrapConfig = resp.MachinePatch, resp.InfrastructureMachinePatch, resp.BootstrapConfigPatch
	}
	return a
}

func (a Answer) patch(k Kind) hooksv1.Patch {
	switch k {
	case KindMachine:
		return a.Machine
	case KindInfrastructureMachine:
		return a.InfrastructureMachine
	default:
		return a.BootstrapConfig
	}
}

// Coverage is what one extension covers of a machine's changes.
type Coverage struct {
	Extension string
	Fields    []Field
}

// MachinePlan is the plan for one machine.
type MachinePlan struct {
	Machine string
	// Node is the machine's Node (status.nodeRef.name), "" when it has none yet.
	Node string
	// Changed are the spec fields that change.
	Changed []Field
	// Coverage: per answering extension (in answer order), the changed fields its patches
	// give their desired value; extensions that cover nothing are left out.
	Coverage []Coverage
	// Extensions are the extensions of Coverage: the ones UpdateMachine is called on.
	Extensions []string
	// Uncovered are the fields where the current objects with every extension's patches
	// applied still differ from the desired specs.
	Uncovered []Field
	Strategy  Strategy
	// Notes explain what an operator may wonder about (a failed answer, a stray patch).
	Notes []string
	// MayBeReplaced, on a machine planned in place, says why Cluster API may replace it all the
	// same (an owner that surges replaces up to maxSurge machines, which ones no one can tell).
	MayBeReplaced string
	// Stuck, on a blocked machine, says why Cluster API would stop with an error rather than
	// either update or replace it (several extensions registered for a hook that takes one):
	// no fallback helps, so the machine is blocked whatever the fallback.
	Stuck string
}

// PlanMachine plans one machine from its current and desired objects (see Desired) and the
// extensions' answers. It never fails: what cannot be used (a failed call, a patch that does
// not apply) covers nothing and is noted.
func PlanMachine(current, desired Objects, answers []Answer, fallback Fallback) MachinePlan {
	p := MachinePlan{}
	if current.Machine != nil {
		p.Machine = current.Machine.GetName()
		p.Node, _, _ = unstructured.NestedString(current.Machine.Object, "status", "nodeRef", "name")
	}
	changed, err := ChangedFields(current, desired)
	if err != nil {
		p.Notes = append(p.Notes, "cannot compare the specs: "+err.Error())
		p.Strategy = blockedOr(fallback)
		return p
	}
	p.Changed = changed
	if len(changed) == 0 {
		p.Strategy = StrategyUnchanged
		return p
	}

	// What each extension covers alone, and everything applied together as CAPI does.
	combined := current
	for _, a := range answers {
		if a.Err != nil {
			p.Notes = append(p.Notes, fmt.Sprintf("extension %s did not answer CanUpdateMachine: %v", a.Extension, a.Err))
			continue
		}
		alone, err := applyAnswer(current, a)
		if err != nil {
			p.Notes = append(p.Notes, fmt.Sprintf("extension %s: %v; its answer covers nothing", a.Extension, err))
			continue
		}
		if together, err := applyAnswer(combined, a); err == nil {
			combined = together
		} else {
			p.Notes = append(p.Notes, fmt.Sprintf("extension %s: its patches do not apply after the others': %v", a.Extension, err))
		}
		var fields []Field
		for _, f := range changed {
			if sameAt(alone, desired, f) {
				fields = append(fields, f)
			}
		}
		if len(fields) > 0 {
			p.Coverage = append(p.Coverage, Coverage{Extension: a.Extension, Fields: fields})
			p.Extensions = append(p.Extensions, a.Extension)
		}
	}
	uncovered, err := ChangedFields(combined, desired)
	if err != nil {
		p.Notes = append(p.Notes, "cannot compare the patched specs: "+err.Error())
		uncovered = changed
	}
	for _, f := range uncovered {
		if !slices.Contains(changed, f) {
			p.Notes = append(p.Notes, fmt.Sprintf("the extensions' patches change %s, which the desired spec does not", f))
		}
	}
	p.Uncovered = uncovered
	if len(uncovered) == 0 {
		p.Strategy = StrategyInPlace
		return p
	}
	p.Strategy = blockedOr(fallback)
	return p
}

func blockedOr(f Fallback) Strategy {
	if f == FallbackRolling {
		return StrategyRolling
	}
	return StrategyBlocked
}

// applyAnswer applies an answer's patches to copies of objs.
func applyAnswer(objs Objects, a Answer) (Objects, error) {
	out := objs
	for _, k := range kinds {
		p := a.patch(k)
		if !p.IsDefined() {
			continue
		}
		obj := objs.get(k)
		if obj == nil {
			return Objects{}, fmt.Errorf("%s patch for a machine without a %s", k, k)
		}
		doc, err := json.Marshal(obj.Object)
		if err != nil {
			return Objects{}, err
		}
		var patched []byte
		switch p.PatchType {
		case hooksv1.JSONPatchType:
			jp, err := jsonpatch.DecodePatch(p.Patch)
			if err != nil {
				return Objects{}, fmt.Errorf("%s patch is not a JSON patch: %w", k, err)
			}
			if patched, err = jp.Apply(doc); err != nil {
				return Objects{}, fmt.Errorf("%s patch does not apply: %w", k, err)
			}
		case hooksv1.JSONMergePatchType:
			if patched, err = jsonpatch.MergePatch(doc, p.Patch); err != nil {
				return Objects{}, fmt.Errorf("%s merge patch does not apply: %w", k, err)
			}
		default:
			return Objects{}, fmt.Errorf("%s patch has unknown type %q", k, p.PatchType)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(patched); err != nil {
			return Objects{}, fmt.Errorf("%s patch leaves no object: %w", k, err)
		}
		out.set(k, u)
	}
	return out, nil
}

// sameAt reports whether a and b hold the same value (or both nothing) at f.
func sameAt(a, b Objects, f Field) bool {
	av, aok := valueAt(a.get(f.Object), f.Path)
	bv, bok := valueAt(b.get(f.Object), f.Path)
	if aok != bok {
		return false
	}
	an, err1 := normalise(av)
	bn, err2 := normalise(bv)
	return err1 == nil && err2 == nil && len(diff(f.Object, "", an, bn)) == 0
}

func valueAt(u *unstructured.Unstructured, path string) (any, bool) {
	if u == nil {
		return nil, false
	}
	var cur any = u.Object
	for _, seg := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// Plan is the plan for every selected machine, in the order given.
type Plan struct {
	Machines []MachinePlan
}

// Counts is how many machines take each strategy.
func (p Plan) Counts() map[Strategy]int {
	out := map[Strategy]int{}
	for _, m := range p.Machines {
		out[m.Strategy]++
	}
	return out
}

// Blocked is how a refused plan (see Plan.Err) is introduced to the person running it.
const (
	BlockedSummary = "Machines Cannot Be Updated In Place"
	BlockedLead    = "Cluster API would not update these machines in place, and the plan does not allow what it would do instead (with fallback = \"none\" a replacement; whatever the fallback, an error that stops the rollout)"
)

// Err names every blocked machine and the fields nothing covers (or, when no field is to blame,
// its notes); nil when none is blocked.
func (p Plan) Err() error {
	var lines []string
	uncovered, stuck, replaced := false, false, false
	for _, m := range p.Machines {
		if m.Strategy != StrategyBlocked {
			continue
		}
		if m.Stuck != "" {
			stuck = true
			lines = append(lines, fmt.Sprintf("machine %s: %s", m.Machine, m.Stuck))
			continue
		}
		replaced = true
		names := make([]string, len(m.Uncovered))
		for i, f := range m.Uncovered {
			names[i] = f.String()
		}
		line := fmt.Sprintf("machine %s: no extension can update %s in place", m.Machine, strings.Join(names, ", "))
		uncovered = uncovered || len(m.Uncovered) > 0
		if len(m.Uncovered) == 0 {
			line = fmt.Sprintf("machine %s: %s", m.Machine, strings.Join(m.Notes, "; "))
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return nil
	}
	var hints []string
	switch {
	case uncovered:
		hints = append(hints, "(set fallback = \"rolling\" to replace such machines, or add an extension that covers these fields)")
	case replaced:
		hints = append(hints, "(set fallback = \"rolling\" to let Cluster API replace such machines)")
	}
	if stuck {
		hints = append(hints, "(no fallback helps where Cluster API stops with an error: register one extension per in-place hook)")
	}
	return errors.New(strings.Join(lines, "\n") + "\n" + strings.Join(hints, "\n"))
}

// CanUpdateMachineRequest is the request CAPI would send for a machine: current and desired
// objects with spec (and identifying metadata) only, as the hook's contract says.
func CanUpdateMachineRequest(current, desired Objects) (*hooksv1.CanUpdateMachineRequest, error) {
	req := &hooksv1.CanUpdateMachineRequest{}
	for _, side := range []struct {
		objs Objects
		out  *hooksv1.CanUpdateMachineRequestObjects
	}{{current, &req.Current}, {desired, &req.Desired}} {
		m, infra, boot, err := wireObjects(side.objs)
		if err != nil {
			return nil, err
		}
		side.out.Machine, side.out.InfrastructureMachine, side.out.BootstrapConfig = m, infra, boot
	}
	return req, nil
}

// UpdateMachineRequest is the request CAPI would send to update a machine to desired.
func UpdateMachineRequest(desired Objects) (*hooksv1.UpdateMachineRequest, error) {
	m, infra, boot, err := wireObjects(desired)
	if err != nil {
		return nil, err
	}
	req := &hooksv1.UpdateMachineRequest{}
	req.Desired.Machine, req.Desired.InfrastructureMachine, req.Desired.BootstrapConfig = m, infra, boot
	return req, nil
}

func wireObjects(o Objects) (clusterv1.Machine, runtime.RawExtension, runtime.RawExtension, error) {
	var m clusterv1.Machine
	var infra, boot runtime.RawExtension
	if o.Machine != nil {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(specOnly(o.Machine).Object, &m); err != nil {
			return m, infra, boot, fmt.Errorf("machine %s: %w", o.Machine.GetName(), err)
		}
	}
	for _, x := range []struct {
		u   *unstructured.Unstructured
		out *runtime.RawExtension
	}{{o.InfrastructureMachine, &infra}, {o.BootstrapConfig, &boot}} {
		if x.u == nil {
			continue
		}
		raw, err := specOnly(x.u).MarshalJSON()
		if err != nil {
			return m, infra, boot, fmt.Errorf("%s %s: %w", x.u.GetKind(), x.u.GetName(), err)
		}
		x.out.Raw = raw
	}
	return m, infra, boot, nil
}

// specOnly keeps apiVersion, kind, identifying metadata and spec.
func specOnly(u *unstructured.Unstructured) *unstructured.Unstructured {
	out := kindAndLabels(u)
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	if spec, ok := u.Object["spec"]; ok {
		out.Object["spec"] = runtime.DeepCopyJSONValue(spec)
	}
	return out
}

// kindAndLabels is a new object of u's apiVersion and kind, in u's namespace, with u's labels
// and annotations: what a copy of u keeps of its metadata whatever else it keeps.
func kindAndLabels(u *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetNamespace(u.GetNamespace())
	out.SetLabels(u.GetLabels())
	out.SetAnnotations(u.GetAnnotations())
	return out
}

// AnswerFromSet takes the patches of a CanUpdateMachineSet response, for PlanMachine on the
// objects of a MachineSet (see CanUpdateMachineSetRequest): the MachineSet patch stands where a
// Machine's would, the templates' where the infrastructure machine's and bootstrap config's do.
func AnswerFromSet(extension string, resp *hooksv1.CanUpdateMachineSetResponse, err error) Answer {
	a := Answer{Extension: extension, Err: err}
	if resp != nil && err == nil {
		a.Machine, a.InfrastructureMachine, a.BootstrapConfig = resp.MachineSetPatch, resp.InfrastructureMachineTemplatePatch, resp.BootstrapConfigTemplatePatch
	}
	return a
}

// CanUpdateMachineSetRequest is the request CAPI sends before it updates the machines of a
// MachineDeployment in place: the MachineSet and its templates, current and desired, where
// Objects.Machine holds the MachineSet, InfrastructureMachine and BootstrapConfig the templates.
func CanUpdateMachineSetRequest(current, desired Objects) (*hooksv1.CanUpdateMachineSetRequest, error) {
	req := &hooksv1.CanUpdateMachineSetRequest{}
	for _, side := range []struct {
		objs Objects
		out  *hooksv1.CanUpdateMachineSetRequestObjects
	}{{current, &req.Current}, {desired, &req.Desired}} {
		if side.objs.Machine != nil {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(specOnly(side.objs.Machine).Object, &side.out.MachineSet); err != nil {
				return nil, fmt.Errorf("machineSet %s: %w", side.objs.Machine.GetName(), err)
			}
		}
		for _, x := range []struct {
			u   *unstructured.Unstructured
			out *runtime.RawExtension
		}{{side.objs.InfrastructureMachine, &side.out.InfrastructureMachineTemplate}, {side.objs.BootstrapConfig, &side.out.BootstrapConfigTemplate}} {
			if x.u == nil {
				continue
			}
			raw, err := specOnly(x.u).MarshalJSON()
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", x.u.GetKind(), x.u.GetName(), err)
			}
			x.out.Raw = raw
		}
	}
	return req, nil
}
