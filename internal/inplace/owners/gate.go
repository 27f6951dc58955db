package owners

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cluster API's InPlaceUpdates feature gate (alpha, off by default in v1.12 to v1.14) decides
// whether CAPI updates machines in place at all: with it off, the MachineDeployment controller
// never asks CanUpdateMachineSet and the KubeadmControlPlane controller's canUpdateMachine says
// no (v1.14.2 core/reconcilers/machinedeployment/machinedeployment_rollout_rollingupdate.go:417,
// controlplane/kubeadm/reconcilers/kubeadmcontrolplane/inplace_canupdatemachine.go:52), so every
// changing machine is replaced, whatever the extensions answer.
//
// Nothing on a Machine or an owner tells whether the gate is on: the Machine controller sets its
// Updating condition whatever the gate (machine_controller_status.go:70), and what the gate
// guards only shows during an in-place update (annotations, Updating=True). What does tell is
// how the managers run: clusterctl, the Cluster API operator and the Helm charts install each as
// a Deployment labelled cluster.x-k8s.io/provider (cluster-api for the core manager,
// control-plane-kubeadm for KCP's) whose container has the --feature-gates flag (the released
// manifests always list InPlaceUpdates, from EXP_IN_PLACE_UPDATES). The planner reads those;
// when there are none (managers run elsewhere, or the provider may not list Deployments), it
// cannot tell and says so rather than guess.

// GateState is what the management cluster tells of the gate in one manager.
type GateState string

const (
	GateUnknown GateState = "unknown"
	GateOn      GateState = "on"
	GateOff     GateState = "off"
)

// Gate is the InPlaceUpdates gate of one Cluster API manager: its state, and Why (the evidence,
// or why it cannot be told).
type Gate struct {
	State GateState
	Why   string
}

const (
	inPlaceGate       = "InPlaceUpdates"
	providerLabel     = "cluster.x-k8s.io/provider"
	providerCore      = "cluster-api"
	providerKCP       = "control-plane-kubeadm"
	featureGatesFlag  = "--feature-gates"
	lastDefaultOffMin = 14 // InPlaceUpdates is off by default up to v1.14 (it exists from v1.12)
)

var deploymentListGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DeploymentList"}

// Gates are the gate of the core manager (MachineDeployments, and the Machine controller that
// calls UpdateMachine) and of the KubeadmControlPlane manager.
type Gates struct {
	Core, KCP Gate
}

// ReadGates reads the gates from the managers' Deployments in the management cluster. It never
// fails: what cannot be read makes the gate unknown, with the reason.
func ReadGates(ctx context.Context, c client.Client) Gates {
	req, err := labels.NewRequirement(providerLabel, selection.In, []string{providerCore, providerKCP})
	if err != nil {
		return Gates{Core: Gate{GateUnknown, err.Error()}, KCP: Gate{GateUnknown, err.Error()}}
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(deploymentListGVK)
	if err := c.List(ctx, list, client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*req)}, client.Limit(100)); err != nil {
		why := "listing the Cluster API managers' Deployments failed: " + err.Error()
		if meta.IsNoMatchError(err) {
			why = "the management cluster serves no apps/v1 Deployments"
		}
		return Gates{Core: Gate{GateUnknown, why}, KCP: Gate{GateUnknown, why}}
	}
	byProvider := map[string][]*unstructured.Unstructured{}
	for i := range list.Items {
		d := &list.Items[i]
		if d.GetDeletionTimestamp() != nil {
			continue
		}
		p := d.GetLabels()[providerLabel]
		byProvider[p] = append(byProvider[p], d)
	}
	return Gates{Core: gateOf(providerCore, byProvider[providerCore]), KCP: gateOf(providerKCP, byProvider[providerKCP])}
}

// gateOf is the gate of a provider's manager from its Deployments: unknown when there is none
// or they disagree.
func gateOf(provider string, deps []*unstructured.Unstructured) Gate {
	if len(deps) == 0 {
		return Gate{GateUnknown, fmt.Sprintf("no Deployment labelled %s=%s in the management cluster tells how the manager runs", providerLabel, provider)}
	}
	slices.SortFunc(deps, func(a, b *unstructured.Unstructured) int {
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	var gates []Gate
	for _, d := range deps {
		g := deploymentGate(d)
		if g.State == GateUnknown {
			return g
		}
		gates = append(gates, g)
	}
	for _, g := range gates[1:] {
		if g.State != gates[0].State {
			var whys []string
			for _, g := range gates {
				whys = append(whys, g.Why)
			}
			return Gate{GateUnknown, "the Deployments labelled " + providerLabel + "=" + provider + " disagree: " + strings.Join(whys, "; ")}
		}
	}
	return gates[0]
}

// deploymentGate reads the gate from one manager Deployment: the --feature-gates flags of its
// containers, else the default of the Cluster API version its image tag names.
func deploymentGate(d *unstructured.Unstructured) Gate {
	name := "Deployment " + d.GetNamespace() + "/" + d.GetName()
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	image := ""
	for _, c := range containers {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if img, _ := cm["image"].(string); image == "" || cm["name"] == "manager" {
			image = img
		}
		var argv []string
		for _, f := range []string{"command", "args"} {
			l, _, _ := unstructured.NestedStringSlice(cm, f)
			argv = append(argv, l...)
		}
		value, set, err := gateFromArgs(argv)
		switch {
		case err != nil:
			return Gate{GateUnknown, fmt.Sprintf("%s: %v", name, err)}
		case set && value:
			return Gate{GateOn, fmt.Sprintf("%s runs the manager with %s=true", name, inPlaceGate)}
		case set:
			return Gate{GateOff, fmt.Sprintf("%s runs the manager with %s=false", name, inPlaceGate)}
		}
	}
	minor, ok := capiMinor(image)
	switch {
	case !ok:
		return Gate{GateUnknown, fmt.Sprintf("%s sets no %s, and its image %q names no Cluster API version whose default is known", name, inPlaceGate, image)}
	case minor < 12:
		return Gate{GateOff, fmt.Sprintf("%s runs Cluster API v1.%d, which has no in-place updates (v1.12+)", name, minor)}
	case minor <= lastDefaultOffMin:
		return Gate{GateOff, fmt.Sprintf("%s sets no %s, which is off by default in Cluster API v1.%d", name, inPlaceGate, minor)}
	}
	return Gate{GateUnknown, fmt.Sprintf("%s sets no %s, and its default in Cluster API v1.%d is not known here", name, inPlaceGate, minor)}
}

// gateFromArgs finds InPlaceUpdates in the --feature-gates flags of a command line, as
// Kubernetes' feature gates parse them: comma-separated key=bool, later flags and keys winning.
// set is false when no flag names it; a value that is no bool (say, an unsubstituted
// ${EXP_IN_PLACE_UPDATES}) is an error.
func gateFromArgs(argv []string) (value, set bool, err error) {
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		var v string
		switch {
		case strings.HasPrefix(a, featureGatesFlag+"="):
			v = strings.TrimPrefix(a, featureGatesFlag+"=")
		case a == featureGatesFlag && i+1 < len(argv):
			i++
			v = argv[i]
		default:
			continue
		}
		for _, kv := range strings.Split(v, ",") {
			k, val, _ := strings.Cut(strings.TrimSpace(kv), "=")
			if strings.TrimSpace(k) != inPlaceGate {
				continue
			}
			b, perr := strconv.ParseBool(strings.TrimSpace(val))
			if perr != nil {
				return false, false, fmt.Errorf("%s has %s=%s, which is not a boolean", featureGatesFlag, inPlaceGate, val)
			}
			value, set = b, true
		}
	}
	return value, set, nil
}

var capiTag = regexp.MustCompile(`:v1\.(\d+)\.\d+`)

// capiMinor is the Cluster API minor version an image's tag names (…:v1.14.2 → 14).
func capiMinor(image string) (int, bool) {
	last := image[strings.LastIndex(image, "/")+1:]
	m := capiTag.FindStringSubmatch(last)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// gateSet reads the gates once, on first need, for every plan that shares it.
type gateSet struct {
	once  sync.Once
	gates Gates
}

func (s *gateSet) get(ctx context.Context, c client.Client) Gates {
	s.once.Do(func() { s.gates = ReadGates(ctx, c) })
	return s.gates
}

// forOwner is what decides for an owner of kind: the state, why, and a note worth a warning
// whatever the machines.
//   - A MachineDeployment: the core manager decides (the rollout planner) and updates (the Machine
//     controller calls UpdateMachine).
//   - A KubeadmControlPlane: KCP's manager decides; with its gate on and the core manager's off,
//     KCP would start in-place updates that the Machine controller never carries out.
func (g Gates) forOwner(kind string) (Gate, string) {
	if kind != KindKubeadmControlPlane {
		return g.Core, ""
	}
	if g.KCP.State == GateOn && g.Core.State == GateOff {
		return g.KCP, "Cluster API's " + inPlaceGate + " feature gate is on in the KubeadmControlPlane manager but off in the core manager (" + g.Core.Why +
			"): the KubeadmControlPlane controller would start in-place updates that the core Machine controller never carries out (the machines would stay Updating). Turn the gate on in both."
	}
	if g.KCP.State == GateOn && g.Core.State == GateUnknown {
		return g.Core, ""
	}
	return g.KCP, ""
}
