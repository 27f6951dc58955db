package assignment

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/crsbridge"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// FollowJoins is follow_joins: the assignment keeps a bridge (internal/crsbridge) that gives a
// cluster joining between applies the last verified revision of each module, through Cluster
// API's ClusterResourceSet controller.
type FollowJoins struct {
	// Labels go on the bridge's ClusterResourceSet and ConfigMaps (the watch-filter label of a
	// Cluster API manager started with --watch-filter).
	Labels map[string]string
}

// CheckBridge refuses, at plan, an assignment whose modules the bridge cannot carry as the
// assignment delivers them: per-cluster values (ClusterResourceSet renders nothing), Secrets (a
// bridge ConfigMap would hold them in the clear), a selector Cluster API cannot use, and a
// module too large for a ConfigMap. Nothing is read.
func CheckBridge(spec Spec, q fleet.Query) error {
	if spec.FollowJoins == nil {
		return nil
	}
	problems := crsbridge.TargetRefusals(q, spec.Values != nil)
	for _, m := range spec.Modules {
		if why := crsbridge.Refusal(fmt.Sprintf("module %q", m.Name), "the module", spec.ModuleKey(m.Name).FieldManager(), m.Objects.Objects, len(m.Redact) > 0); why != "" {
			problems = append(problems, why)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("follow_joins cannot bridge this assignment: %s", strings.Join(problems, "; "))
	}
	return nil
}

// BridgeOutcome is what UpdateBridge left: per module, what joiners get and why not the
// configured revision.
type BridgeOutcome struct {
	Name    string
	Choices []crsbridge.Choice
}

// Revisions is, per module carried, the revision the bridge hands out.
func (o BridgeOutcome) Revisions() map[string]string {
	out := map[string]string{}
	for _, c := range o.Choices {
		if c.Revision != "" {
			out[c.Module] = c.Revision
		}
	}
	return out
}

// Notes are the reasons modules are not carried at their configured revision, one line each.
func (o BridgeOutcome) Notes() []string {
	var out []string
	for _, c := range o.Choices {
		if c.Why != "" {
			out = append(out, fmt.Sprintf("module %q: %s", c.Module, c.Why))
		}
	}
	return out
}

// UpdateBridge moves the assignment's bridge after an apply: each module to its configured
// revision once a cluster verified it (bindings, as the run left them), never to one the
// module's ledger holds invalid (crsbridge.Decide). Without follow_joins it removes the bridge.
func UpdateBridge(ctx context.Context, svc *delivery.Service, spec Spec, q fleet.Query, bindings map[string][]records.ModuleBinding) (*BridgeOutcome, error) {
	store := crsbridge.NewStore(svc.ManagementClient())
	if spec.FollowJoins == nil {
		return nil, store.Delete(ctx, spec.Key, spec.ClusterNamespace)
	}
	mstore := records.NewManagementStore(svc.ManagementClient(), spec.RecordNamespace)
	inputs := func(held *crsbridge.Held) ([]crsbridge.Input, error) {
		out := make([]crsbridge.Input, 0, len(spec.Modules))
		for _, m := range spec.Modules {
			ledger, err := mstore.Ledger(ctx, spec.ModuleKey(m.Name))
			if err != nil {
				return nil, fmt.Errorf("read the invalid ledger of module %q: %w", m.Name, err)
			}
			in := crsbridge.Input{Module: m.Name, DependsOn: m.DependsOn, Configured: m.Revision, Held: held.Revisions[m.Name],
				Verified: Verified(bindings, m.Name, m.Revision)}
			for _, e := range ledger {
				in.Invalid = append(in.Invalid, e.Revision)
			}
			out = append(out, in)
		}
		return out, nil
	}
	objects := func(module string) []*unstructured.Unstructured {
		m, _ := spec.Module(module)
		return m.Objects.Objects
	}
	b := crsbridge.Bridge{Key: spec.Key, Namespace: spec.ClusterNamespace, Selector: q.Selector, Labels: spec.FollowJoins.Labels}
	choices, err := store.Move(ctx, b, inputs, objects, func(module string) string { return spec.ModuleKey(module).FieldManager() })
	if err != nil {
		return nil, err
	}
	return &BridgeOutcome{Name: spec.ClusterNamespace + "/" + crsbridge.Name(spec.Key), Choices: choices}, nil
}

// Verified reports whether a cluster holds module's revision applied and verified, and none
// was restored from it: the fleet verified it.
func Verified(bindings map[string][]records.ModuleBinding, module, revision string) bool {
	ok := false
	for _, bs := range bindings {
		for _, b := range bs {
			if b.Module != module || b.Revision != revision {
				continue
			}
			switch b.Result {
			case records.BindingApplied, records.BindingDrifted:
				ok = true
			case records.BindingFailed:
				return false
			}
		}
	}
	return ok
}

// RemoveBridge removes the assignment's bridge (destroy, follow_joins turned off).
func RemoveBridge(ctx context.Context, svc *delivery.Service, spec Spec) error {
	return crsbridge.NewStore(svc.ManagementClient()).Delete(ctx, spec.Key, spec.ClusterNamespace)
}

// BridgeView is the bridge as a plan shows it (crsbridge.View).
type BridgeView = crsbridge.View

// ReadBridge reads the assignment's bridge and the joiners it served: clusters Cluster API's
// ClusterResourceSetBinding says got a module from it and whose assignment bindings do not
// hold that module (joined since the last apply).
//
// picked, when not nil, are the clusters the assignment picks now: a joiner outside it left.
func ReadBridge(ctx context.Context, svc *delivery.Service, spec Spec, bindings map[string][]records.ModuleBinding, picked map[string]bool) (*BridgeView, error) {
	members := func(cluster string) []string {
		var out []string
		for _, b := range bindings[cluster] {
			out = append(out, b.Module)
		}
		return out
	}
	ready := func(ctx context.Context, cluster string, objs []*unstructured.Unstructured) error {
		return svc.ReadyNow(ctx, spec.ClusterNamespace, cluster, spec.Key, objs)
	}
	return crsbridge.NewStore(svc.ManagementClient()).ViewOf(ctx, spec.Key, spec.ClusterNamespace, members, picked, ready)
}
