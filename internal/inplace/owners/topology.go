package owners

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// A managed topology is a Cluster built from a ClusterClass (spec.topology). Its topology
// controller owns the version and template references of the control plane and the
// MachineDeployments it made, so an update of such a cluster writes the Cluster's
// spec.topology.version and named spec.topology.variables, nothing else (templates change
// through the ClusterClass); the topology controller then upgrades the control
// plane, and the MachineDeployments once the control plane is done, and Cluster API decides per
// machine whether it updates it in place or replaces it, exactly as for an owner written
// directly. The preview therefore plans the control plane and every MachineDeployment the
// topology manages as if each got the version (what the topology controller writes), in that
// order, asking the extensions what Cluster API will ask.

var clusterClassGVK = schema.GroupVersionKind{Group: capiGroup, Version: capiVersion, Kind: "ClusterClass"}

// topologyReconciledCondition is the Cluster's condition the topology controller reports on
// (clusterv1.ClusterTopologyReconciledCondition).
const topologyReconciledCondition = "TopologyReconciled"

// Topology is the Cluster of a managed topology a plan upgrades.
type Topology struct {
	// Cluster is the Cluster as the plan read it (its resourceVersion guards the write).
	Cluster *unstructured.Unstructured
	// Class is the name of its ClusterClass.
	Class string
	// From is spec.topology.version as read; To the version the change writes (From when the
	// change has no version).
	From, To string
	// Variables are the topology variables whose value the change changes, by name.
	Variables []VariableChange
	// variables is the spec.topology.variables the change writes: the Cluster's list as read
	// with the change's values set by name, the others as they were; nil when the change has
	// no topology variables.
	variables []any
}

// VariableChange is one topology variable a change writes: its value on the Cluster as read
// (compact JSON, "" when the Cluster does not set it) and the value written.
type VariableChange struct {
	Name, From, To string
	// OverriddenIn names the parts of the topology whose own value of the variable
	// (variables.overrides) keeps the change from them: "the control plane",
	// "MachineDeployment md-0" (by its name in spec.topology.workers.machineDeployments).
	OverriddenIn []string
}

// Name is "Cluster ns/name".
func (t *Topology) Name() string {
	return fmt.Sprintf("Cluster %s/%s", t.Cluster.GetNamespace(), t.Cluster.GetName())
}

// managedTopology is the Cluster's spec.topology, nil when the Cluster has none.
func managedTopology(cluster *unstructured.Unstructured) map[string]any {
	t, _, _ := unstructured.NestedMap(cluster.Object, "spec", "topology")
	if len(t) == 0 {
		return nil
	}
	return t
}

// className is the topology's ClusterClass and the namespace it lives in (the Cluster's unless
// classRef says otherwise).
func className(cluster *unstructured.Unstructured, topology map[string]any) (namespace, name string) {
	name, _, _ = unstructured.NestedString(topology, "classRef", "name")
	namespace, _, _ = unstructured.NestedString(topology, "classRef", "namespace")
	if name == "" {
		name, _, _ = unstructured.NestedString(topology, "class") // v1beta1 Clusters
	}
	if namespace == "" {
		namespace = cluster.GetNamespace()
	}
	return namespace, name
}

// readTopology reads the Cluster and its ClusterClass and checks that change can go through
// spec.topology: a version and/or topology variables and nothing else (templates change through
// the ClusterClass), a version the ClusterClass allows, no downgrade, variables the ClusterClass
// defines. With variables, Cluster API itself judges the write (a server-side dry run, see
// dryRunTopology) before the plan shows it.
func (p *Planner) readTopology(ctx context.Context, namespace, cluster string, change inplace.Change) (*Topology, error) {
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(clusterGVK)
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster}, cl); err != nil {
		return nil, usererr.Wrap(err, "Cannot Read Cluster", fmt.Sprintf("Reading Cluster %s/%s failed.", namespace, cluster))
	}
	topology := managedTopology(cl)
	if topology == nil {
		return nil, fmt.Errorf("cluster %s/%s has no spec.topology", namespace, cluster)
	}
	t := &Topology{Cluster: cl, To: change.Version}
	t.From, _, _ = unstructured.NestedString(topology, "version")
	classNS, class := className(cl, topology)
	t.Class = class
	if len(change.MachineSpec) > 0 || len(change.InfrastructureMachineSpec) > 0 || len(change.BootstrapConfigSpec) > 0 {
		return nil, usererr.New("Template Change Through The ClusterClass",
			fmt.Sprintf("Cluster %s/%s is built from ClusterClass %q (spec.topology): its topology controller makes the control plane's and the MachineDeployments' templates "+
				"from the ClusterClass and puts back any other. Change the templates in the ClusterClass, or set the variables its patches read (topology_variables); "+
				"this resource upgrades such a cluster by `version` (spec.topology.version) and `topology_variables` (spec.topology.variables) only: "+
				"drop machine_spec_patch, infrastructure_machine_spec_patch and bootstrap_config_spec_patch.",
				namespace, cluster, class))
	}
	if change.Version == "" && len(change.TopologyVariables) == 0 {
		return nil, usererr.New("No Version For A Managed Topology",
			fmt.Sprintf("Cluster %s/%s is built from ClusterClass %q (spec.topology) and is changed through spec.topology: set `version` (spec.topology.version) and/or `topology_variables`.", namespace, cluster, class))
	}
	if change.Version == "" {
		t.To = t.From
	}
	cc := &unstructured.Unstructured{}
	cc.SetGroupVersionKind(clusterClassGVK)
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: classNS, Name: class}, cc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, usererr.New("ClusterClass Not Found", fmt.Sprintf("Cluster %s/%s names ClusterClass %s/%s (spec.topology.classRef), which does not exist.", namespace, cluster, classNS, class))
		}
		return nil, usererr.Wrap(err, "Cannot Read ClusterClass", fmt.Sprintf("Reading ClusterClass %s/%s failed.", classNS, class))
	}
	if change.Version != "" {
		if err := checkTopologyVersion(cc, t, change.Version); err != nil {
			return nil, err
		}
	}
	if len(change.TopologyVariables) > 0 {
		if err := t.setVariables(cc, change.TopologyVariables); err != nil {
			return nil, err
		}
		if err := p.dryRunTopology(ctx, t, Revision(change)); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// checkTopologyVersion refuses a downgrade and a version the ClusterClass does not list.
func checkTopologyVersion(cc *unstructured.Unstructured, t *Topology, want string) error {
	if from, err := version.ParseSemantic(t.From); err == nil {
		if to, err := version.ParseSemantic(want); err == nil && to.LessThan(from) {
			return usererr.New("Topology Downgrade",
				fmt.Sprintf("%s runs %s (spec.topology.version); Cluster API does not downgrade a managed topology to %s.", t.Name(), t.From, want))
		}
	}
	if allowed, _, _ := unstructured.NestedStringSlice(cc.Object, "spec", "kubernetesVersions"); len(allowed) > 0 && !slices.Contains(allowed, want) {
		return usererr.New("Version Not In The ClusterClass",
			fmt.Sprintf("ClusterClass %s/%s allows the Kubernetes versions %s (spec.kubernetesVersions); %s is not one of them, and Cluster API would refuse it for %s.",
				cc.GetNamespace(), cc.GetName(), strings.Join(allowed, ", "), want, t.Name()))
	}
	return nil
}

// classVariables are the names of the variables the ClusterClass defines: those its status
// lists (inline and discovered from its patches' runtime extensions; status.variables, which
// Cluster API's webhook validates a Cluster's variables against: core/webhooks/admission/cluster.go
// in sigs.k8s.io/cluster-api v1.14.2) and its inline spec.variables (listed before the
// ClusterClass controller has reconciled it), sorted.
func classVariables(cc *unstructured.Unstructured) []string {
	var names []string
	for _, field := range [][]string{{"status", "variables"}, {"spec", "variables"}} {
		list, _, _ := unstructured.NestedSlice(cc.Object, field...)
		for _, v := range list {
			if m, ok := v.(map[string]any); ok {
				if n, ok := m["name"].(string); ok && n != "" {
					names = append(names, n)
				}
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// setVariables checks that the ClusterClass defines every variable of values and fills
// t.variables (the Cluster's spec.topology.variables with values set by name, the others left
// as they are, new ones appended) and t.Variables (those whose value changes).
func (t *Topology) setVariables(cc *unstructured.Unstructured, values map[string]json.RawMessage) error {
	defined := classVariables(cc)
	names := slices.Sorted(maps.Keys(values))
	var unknown []string
	for _, n := range names {
		if !slices.Contains(defined, n) {
			unknown = append(unknown, fmt.Sprintf("%q", n))
		}
	}
	if len(unknown) > 0 {
		known := "none"
		if len(defined) > 0 {
			known = strings.Join(defined, ", ")
		}
		return usererr.New("Topology Variable Not In The ClusterClass",
			fmt.Sprintf("%s is built from ClusterClass %s/%s, which defines no variable %s; it defines: %s (spec.variables and status.variables). "+
				"Cluster API would refuse the Cluster. Fix topology_variables, or define the variable in the ClusterClass; nothing was written.",
				t.Name(), cc.GetNamespace(), cc.GetName(), strings.Join(unknown, ", "), known))
	}
	list, _, _ := unstructured.NestedSlice(t.Cluster.Object, "spec", "topology", "variables")
	for _, n := range names {
		value, err := decodeJSON(values[n])
		if err != nil {
			return usererr.Wrap(err, "Invalid Topology Variable", fmt.Sprintf("The value of topology variable %q is not JSON.", n))
		}
		from, found, same := "", false, false
		for _, item := range list {
			if m, ok := item.(map[string]any); ok && m["name"] == n {
				found, from, same = true, compactJSON(m["value"]), sameJSON(m["value"], value)
				m["value"] = value
			}
		}
		if !found {
			list = append(list, map[string]any{"name": n, "value": value})
		}
		if !same {
			t.Variables = append(t.Variables, VariableChange{Name: n, From: from, To: compactJSON(value), OverriddenIn: overriddenIn(t.Cluster, n)})
		}
	}
	t.variables = list
	return nil
}

// overriddenIn names the parts of the Cluster's topology that override the cluster-level
// variable name: the control plane (spec.topology.controlPlane.variables.overrides) and each
// MachineDeployment topology (spec.topology.workers.machineDeployments[].variables.overrides,
// by its name there; sigs.k8s.io/cluster-api/api v1.14.2, core/v1beta2 and v1beta1 alike). The
// topology controller gives such a part the override, so a change of the cluster-level value
// does not reach it.
func overriddenIn(cluster *unstructured.Unstructured, name string) []string {
	overrides := func(part map[string]any) bool {
		list, _, _ := unstructured.NestedSlice(part, "variables", "overrides")
		return slices.ContainsFunc(list, func(item any) bool {
			m, ok := item.(map[string]any)
			return ok && m["name"] == name
		})
	}
	var out []string
	if cp, _, _ := unstructured.NestedMap(cluster.Object, "spec", "topology", "controlPlane"); overrides(cp) {
		out = append(out, "the control plane")
	}
	mds, _, _ := unstructured.NestedSlice(cluster.Object, "spec", "topology", "workers", "machineDeployments")
	var names []string
	for _, item := range mds {
		if md, ok := item.(map[string]any); ok && overrides(md) {
			n, _ := md["name"].(string)
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		out = append(out, "MachineDeployment "+n)
	}
	return out
}

// sameJSON reports whether a and b are the same JSON value: objects by their keys whatever the
// order, numbers by value however written (1, 1.0 and 1e0 are one number; the API server
// hands back what was written, a client may decode it as int64, float64 or json.Number).
func sameJSON(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x.Cmp(y) == 0
	}
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !sameJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		return ok && slices.EqualFunc(a, b, sameJSON)
	}
	return compactJSON(a) == compactJSON(b)
}

// number is v as an exact rational when v is a JSON number.
func number(v any) (*big.Rat, bool) {
	var s string
	switch v := v.(type) {
	case json.Number:
		s = v.String()
	case int64:
		s = strconv.FormatInt(v, 10)
	case int:
		s = strconv.Itoa(v)
	case float64:
		s = strconv.FormatFloat(v, 'g', -1, 64)
	default:
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// decodeJSON decodes raw keeping numbers as written (json.Number), so that a value is written
// back exactly.
func decodeJSON(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("more than one JSON value: %s", raw)
	}
	return v, nil
}

// compactJSON is v as compact JSON (objects' keys sorted), for comparing and showing values.
func compactJSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

// Patch is the merge patch of the Cluster that carries the change out: spec.topology.version,
// the whole spec.topology.variables list when the change sets variables (a merge patch replaces
// a list: the others are in it as read, and the resourceVersion the plan read guards them), and
// the revision.
//
// guarded puts the resourceVersion the plan read in the patch, so that the write fails on a
// Cluster changed since. The plan's dry run goes without it: the controllers write the Cluster's
// status all through a rollout, and the dry run asks Cluster API only whether it takes these
// variables; apply's write is guarded.
func (t *Topology) Patch(revision string, guarded bool) (*unstructured.Unstructured, []byte, error) {
	topology := map[string]any{"version": t.To}
	if t.variables != nil {
		topology["variables"] = t.variables
	}
	metadata := map[string]any{"annotations": map[string]any{AnnotationRevision: revision}}
	if guarded {
		metadata["resourceVersion"] = t.Cluster.GetResourceVersion()
	}
	raw, err := json.Marshal(map[string]any{
		"metadata": metadata,
		"spec":     map[string]any{"topology": topology},
	})
	if err != nil {
		return nil, nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(clusterGVK)
	u.SetNamespace(t.Cluster.GetNamespace())
	u.SetName(t.Cluster.GetName())
	return u, raw, nil
}

// dryRunTopology sends the write apply would make (without the resourceVersion guard: see
// patch) as a server-side dry run, so that Cluster API's Cluster webhook judges the variables against the ClusterClass's schemas (its defaulting
// webhook validates spec.topology.variables against the ClusterClass's status.variables:
// core/webhooks/admission/cluster.go and internal/topology/variables/cluster_variable_validation.go
// in sigs.k8s.io/cluster-api v1.14.2). Its refusal refuses the plan, quoting Cluster API; nothing
// is written.
func (p *Planner) dryRunTopology(ctx context.Context, t *Topology, revision string) error {
	u, raw, err := t.Patch(revision, false)
	if err != nil {
		return err
	}
	err = p.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, raw), client.DryRunAll)
	switch {
	case err == nil:
		return nil
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return usererr.Wrap(err, "Cluster API Refuses The Topology Variables",
			fmt.Sprintf("Cluster API refused %s with these topology variables (a server-side dry run of the write apply would make, judged by its Cluster webhook against ClusterClass %q); nothing was written.", t.Name(), t.Class))
	}
	return usererr.Wrap(err, "Cannot Check The Topology Variables",
		fmt.Sprintf("The server-side dry run of the write to %s (spec.topology.variables, judged by Cluster API's webhook) failed; nothing was written.", t.Name()))
}

// topologyNote says what the preview of a managed topology cannot see. With variables it does
// not promise what the ClusterClass's patches make of them (variablesNote says so once for the
// fleet).
func topologyNote(t *Topology) string {
	if t.variables != nil {
		return fmt.Sprintf("%s is changed through spec.topology.version and spec.topology.variables (ClusterClass %q): the topology controller updates the control plane, then the MachineDeployments it manages", t.Name(), t.Class)
	}
	return fmt.Sprintf("%s is upgraded through spec.topology.version (ClusterClass %q): the topology controller upgrades the control plane, then the MachineDeployments it manages; "+
		"the preview assumes the ClusterClass's patches change nothing but the version", t.Name(), t.Class)
}

// variablesNote shows the topology variables the fleet's clusters change, compactly: one line
// per variable and change (from → to) with the clusters it is in, and what the preview cannot
// tell: the ClusterClass's patches read the variables, and it does not run them. "" when no
// cluster changes a variable.
func variablesNote(clusters []*ClusterPlan) string {
	type key struct{ name, from, to string }
	in := map[key][]string{}
	for _, c := range clusters {
		if c.Topology == nil {
			continue
		}
		for _, v := range c.Topology.Variables {
			k := key{v.Name, v.From, v.To}
			in[k] = append(in[k], c.Cluster)
		}
	}
	if len(in) == 0 {
		return ""
	}
	keys := slices.SortedFunc(maps.Keys(in), func(a, b key) int {
		return cmp.Or(strings.Compare(a.name, b.name), cmp.Compare(len(in[b]), len(in[a])), strings.Compare(a.from, b.from))
	})
	var b strings.Builder
	b.WriteString("Topology variables this apply writes to Cluster spec.topology.variables (others are left as they are):")
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %s: %s → %s in %s", k.name, shortValue(k.from), shortValue(k.to), clusterList(in[k]))
	}
	b.WriteString(overridesNote(clusters))
	b.WriteString("\nThe ClusterClass's patches read these variables, and the preview cannot run them: the templates the topology controller computes from them " +
		"may change, so Cluster API may update in place or replace machines this preview shows as unchanged or in place (it decides per machine, as for a version). " +
		"Apply waits for TopologyReconciled and for every machine up to date.")
	return b.String()
}

// overridesMax bounds the clusters overridesNote names one by one.
const overridesMax = 10

// overridesNote names, per cluster, the parts of its topology whose variables.overrides keep a
// variable this apply changes from them: the topology controller gives them the override, not
// the Cluster's value, so they do not change with it. "" when none does.
func overridesNote(clusters []*ClusterPlan) string {
	var lines []string
	for _, c := range clusters {
		if c.Topology == nil {
			continue
		}
		var parts []string
		for _, v := range c.Topology.Variables {
			if len(v.OverriddenIn) > 0 {
				parts = append(parts, fmt.Sprintf("%s by %s", v.Name, strings.Join(v.OverriddenIn, ", ")))
			}
		}
		if len(parts) > 0 {
			lines = append(lines, fmt.Sprintf("\n  cluster %s: %s", c.Cluster, strings.Join(parts, "; ")))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	slices.Sort(lines)
	more := ""
	if len(lines) > overridesMax {
		more = fmt.Sprintf("\n  and %d more clusters", len(lines)-overridesMax)
		lines = lines[:overridesMax]
	}
	return "\nOverridden, so the change does not reach them (their variables.overrides in spec.topology.controlPlane and spec.topology.workers.machineDeployments[] " +
		"hold their own value; change or drop the override to change them):" + strings.Join(lines, "") + more
}

// shortValue is a variable's value for a plan line: "unset" for none, long ones cut.
func shortValue(v string) string {
	switch {
	case v == "":
		return "unset"
	case len(v) > 60:
		return v[:57] + "..."
	}
	return v
}

// clusterList names up to five clusters and counts the others.
func clusterList(names []string) string {
	slices.Sort(names)
	noun := "clusters"
	if len(names) == 1 {
		noun = "cluster"
	}
	shown := names
	if len(names) > 5 {
		shown = names[:5]
	}
	out := fmt.Sprintf("%d %s: %s", len(names), noun, strings.Join(shown, ", "))
	if len(names) > len(shown) {
		out += fmt.Sprintf(" and %d more", len(names)-len(shown))
	}
	return out
}

// topologyProblems lists why the Cluster's topology is not done: the version changed by someone
// else, the Cluster's generation not observed, TopologyReconciled not True (its reason says what
// the topology controller waits for: ClusterUpgrading while it upgrades).
func topologyProblems(cl *unstructured.Unstructured, t *Topology) []string {
	var out []string
	name := t.Name()
	if v, _, _ := unstructured.NestedString(cl.Object, "spec", "topology", "version"); v != t.To {
		out = append(out, fmt.Sprintf("%s: spec.topology.version is %s, want %s (changed since this apply wrote it)", name, v, t.To))
	}
	if len(t.Variables) > 0 {
		now := map[string]string{}
		list, _, _ := unstructured.NestedSlice(cl.Object, "spec", "topology", "variables")
		for _, item := range list {
			if m, ok := item.(map[string]any); ok {
				if n, ok := m["name"].(string); ok {
					now[n] = compactJSON(m["value"])
				}
			}
		}
		for _, v := range t.Variables {
			if now[v.Name] != v.To {
				out = append(out, fmt.Sprintf("%s: topology variable %s is %s, want %s (changed since this apply wrote it)", name, v.Name, shortValue(now[v.Name]), shortValue(v.To)))
			}
		}
	}
	if observed, _, _ := unstructured.NestedInt64(cl.Object, "status", "observedGeneration"); observed < cl.GetGeneration() {
		out = append(out, fmt.Sprintf("%s: observedGeneration %d behind generation %d", name, observed, cl.GetGeneration()))
	}
	c := condition(cl, topologyReconciledCondition)
	switch {
	case c == nil:
		out = append(out, fmt.Sprintf("%s: no %s condition: the topology controller has not reconciled it (is Cluster API's ClusterTopology feature gate on?)", name, topologyReconciledCondition))
	case c["status"] != "True":
		out = append(out, fmt.Sprintf("%s: %s %v (%v): %v", name, topologyReconciledCondition, c["status"], c["reason"], c["message"]))
	case observedGen(c) >= 0 && observedGen(c) < cl.GetGeneration():
		out = append(out, fmt.Sprintf("%s: %s is about generation %d, not %d", name, topologyReconciledCondition, observedGen(c), cl.GetGeneration()))
	}
	return out
}

// observedGen is a condition's observedGeneration, -1 when it has none.
func observedGen(c map[string]any) int64 {
	switch v := c["observedGeneration"].(type) {
	case int64:
		return v
	case float64:
		return int64(v)
	}
	return -1
}

// topologyOwnerProblems says whether the topology controller has written the version to an
// owner it manages yet: it upgrades the control plane first and a MachineDeployment only once
// the control plane is done.
func topologyOwnerProblems(owner *unstructured.Unstructured, o *Owner, want string) []string {
	field := []string{"spec", "version"}
	if o.Kind == KindMachineDeployment {
		field = []string{"spec", "template", "spec", "version"}
	}
	if v, _, _ := unstructured.NestedString(owner.Object, field...); want != "" && v != want {
		return []string{fmt.Sprintf("%s: %s is %s, want %s: the topology controller has not upgraded it yet (the control plane first, then the MachineDeployments)",
			o.Name(), strings.Join(field, "."), v, want)}
	}
	return nil
}
