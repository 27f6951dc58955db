package assignment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
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
	var problems []string
	if len(q.Names) > 0 {
		problems = append(problems, "it picks clusters by `names`: Cluster API's ClusterResourceSet picks Clusters by label only; use `selector`")
	} else if _, err := crsbridge.SelectorFor(q.Selector); err != nil {
		problems = append(problems, err.Error())
	}
	if spec.Values != nil {
		problems = append(problems, "it has per-cluster `values`, which ClusterResourceSet cannot render for a joiner")
	}
	for _, m := range spec.Modules {
		if slices.ContainsFunc(m.Objects.Objects, func(o *unstructured.Unstructured) bool { return o.GetAPIVersion() == "v1" && o.GetKind() == "Secret" }) || len(m.Redact) > 0 {
			problems = append(problems, fmt.Sprintf("module %q holds Secrets or sensitive values, which the bridge would keep in a ConfigMap in the clear", m.Name))
			continue
		}
		payload, err := crsbridge.Payload(spec.ModuleKey(m.Name).FieldManager(), m.Objects.Objects)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if err := crsbridge.CheckSize(m.Name, payload); err != nil {
			problems = append(problems, err.Error())
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
	held, err := store.Read(ctx, spec.Key, spec.ClusterNamespace)
	if err != nil {
		return nil, err
	}
	mstore := records.NewManagementStore(svc.ManagementClient(), spec.RecordNamespace)
	inputs := make([]crsbridge.Input, 0, len(spec.Modules))
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
		inputs = append(inputs, in)
	}
	out := &BridgeOutcome{Name: spec.ClusterNamespace + "/" + crsbridge.Name(spec.Key), Choices: crsbridge.Decide(inputs)}
	return out, store.Write(ctx, bridgeOf(spec, q, out.Choices))
}

// bridgeOf is the bridge the choices make.
func bridgeOf(spec Spec, q fleet.Query, choices []crsbridge.Choice) crsbridge.Bridge {
	b := crsbridge.Bridge{Key: spec.Key, Namespace: spec.ClusterNamespace, Selector: q.Selector, Labels: spec.FollowJoins.Labels}
	for _, c := range choices {
		if c.Revision == "" {
			continue
		}
		carried := crsbridge.Carried{Module: c.Module, Revision: c.Revision, FieldManager: spec.ModuleKey(c.Module).FieldManager()}
		if c.Moved {
			m, _ := spec.Module(c.Module)
			carried.Objects = m.Objects.Objects
		}
		b.Modules = append(b.Modules, carried)
	}
	return b
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

// BridgeView is the bridge as a plan shows it: what it hands out, and the clusters that got
// modules from it and that the assignment has not taken over yet (no binding of the module).
type BridgeView struct {
	Name      string
	Exists    bool
	Revisions map[string]string
	Joiners   []crsbridge.Joiner
	// Left are the joiners the selector no longer picks, before an apply took them over: what
	// the bridge gave them stays there (a ClusterResourceSet never deletes), and no apply of
	// this assignment touches it.
	Left []crsbridge.Joiner
}

// ReadBridge reads the assignment's bridge and the joiners it served: clusters Cluster API's
// ClusterResourceSetBinding says got a module from it and whose assignment bindings do not
// hold that module (joined since the last apply).
//
// picked, when not nil, are the clusters the assignment picks now: a joiner outside it left.
func ReadBridge(ctx context.Context, svc *delivery.Service, spec Spec, bindings map[string][]records.ModuleBinding, picked map[string]bool) (*BridgeView, error) {
	store := crsbridge.NewStore(svc.ManagementClient())
	held, err := store.Read(ctx, spec.Key, spec.ClusterNamespace)
	if err != nil {
		return nil, err
	}
	given, err := store.Given(ctx, spec.Key, spec.ClusterNamespace, held)
	if err != nil {
		return nil, err
	}
	v := &BridgeView{Name: spec.ClusterNamespace + "/" + crsbridge.Name(spec.Key), Exists: held.Exists, Revisions: held.Revisions}
	for _, j := range given {
		var fresh []crsbridge.Given
		for _, g := range j.Modules {
			if !slices.ContainsFunc(bindings[j.Cluster], func(b records.ModuleBinding) bool { return b.Module == g.Module }) {
				fresh = append(fresh, g)
			}
		}
		// A cluster Cluster API bound but could not reach yet has no module: waiting, listed
		// unless the assignment has it already.
		waiting := len(j.Modules) == 0 && len(bindings[j.Cluster]) == 0
		switch {
		case len(fresh) == 0 && !waiting:
		case picked != nil && !picked[j.Cluster]:
			v.Left = append(v.Left, crsbridge.Joiner{Cluster: j.Cluster, Modules: fresh})
		default:
			v.Joiners = append(v.Joiners, crsbridge.Joiner{Cluster: j.Cluster, Modules: fresh})
		}
	}
	joinersHealth(ctx, svc, spec, held, v.Joiners)
	return v, nil
}

// joinerReadTimeout bounds the read of one joiner's health at plan: a joiner whose API server
// does not answer in that time is said to be unreadable, and the plan goes on.
const joinerReadTimeout = 15 * time.Second

// joinerReads is how many joiners' health is read at once.
const joinerReads = 8

// joinersHealth sets each joiner's Health: how the objects of the modules Cluster API applied
// to it read now, as a verify judges them. A joiner given nothing yet is left unread.
func joinersHealth(ctx context.Context, svc *delivery.Service, spec Spec, held *crsbridge.Held, joiners []crsbridge.Joiner) {
	var g errgroup.Group
	g.SetLimit(joinerReads)
	for i := range joiners {
		j := &joiners[i]
		var objs []*unstructured.Unstructured
		for _, given := range j.Modules {
			if !given.Applied {
				continue
			}
			mod, err := held.Objects(given.Module)
			if err != nil {
				j.Health = "health not read: " + err.Error()
				break
			}
			objs = append(objs, mod...)
		}
		if len(objs) == 0 || j.Health != "" {
			continue
		}
		g.Go(func() error {
			readCtx, cancel := context.WithTimeout(ctx, joinerReadTimeout)
			defer cancel()
			j.Health = healthText(svc.ReadyNow(readCtx, spec.ClusterNamespace, j.Cluster, spec.Key, objs))
			return nil
		})
	}
	_ = g.Wait() // each read keeps its own outcome in its joiner
}

// healthText says in a few words what ReadyNow found.
func healthText(err error) string {
	var nre *apply.NotReadyError
	switch {
	case err == nil:
		return "healthy"
	case errors.As(err, &nre) && nre.Unreadable():
		return "health not read: the cluster did not answer"
	case errors.As(err, &nre):
		// At most a few, named: the plan stays short at any bundle size.
		items := make([]string, 0, min(len(nre.Objects), 3))
		for _, o := range nre.Objects[:min(len(nre.Objects), 3)] {
			items = append(items, o.String())
		}
		if more := len(nre.Objects) - len(items); more > 0 {
			items = append(items, fmt.Sprintf("%d more", more))
		}
		return "not ready: " + strings.Join(items, "; ")
	default:
		return "health not read: " + err.Error()
	}
}
