package fleet

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Cluster is what the provider needs to know about one CAPI Cluster, whatever API version the
// management cluster serves.
type Cluster struct {
	Name        string
	Namespace   string
	Labels      map[string]string
	Annotations map[string]string
	// TopologyVariables are the ClusterClass variables of spec.topology.variables, by name, each
	// value as the JSON the Cluster gives (a string variable is a quoted JSON string).
	TopologyVariables   map[string]string
	Phase               string
	ControlPlaneReady   bool
	InfrastructureReady bool
	Paused              bool
	Deleting            bool
	KubernetesVersion   string
	// KubeconfigAvailable is true when the `<name>-kubeconfig` Secret exists with a `value` key
	// (always false when discovered WithoutSecrets: not looked at).
	KubeconfigAvailable bool
	// KubeconfigProblem, when set, says why the kubeconfig in the Secret cannot be used.
	KubeconfigProblem string
	// The holds its annotations set (gradual.dev/paused, the maintenance window): see Hold.
	holdFields
	// SkipReason says why a rollout would skip the cluster; empty when it is eligible.
	SkipReason string
}

// Eligible reports whether a rollout would change this cluster.
func (c Cluster) Eligible() bool { return c.SkipReason == "" }

// Key is namespace/name.
func (c Cluster) Key() string { return c.Namespace + "/" + c.Name }

// KubeconfigSecretName is the Secret CAPI writes with a cluster's admin kubeconfig.
func KubeconfigSecretName(cluster string) string { return cluster + kubeconfigSecretSuffix }

const kubeconfigSecretSuffix = "-kubeconfig"

// KubeconfigSecretKey is the key of the kubeconfig in that Secret.
const KubeconfigSecretKey = "value"

// skipReason applies the eligibility rules in order of how fundamental the problem is, so the
// reason shown is the one to fix first: the Cluster's own (statusSkipReason), then its
// kubeconfig Secret's.
func skipReason(c Cluster) string {
	if reason := statusSkipReason(c); reason != "" {
		return reason
	}
	switch {
	case !c.KubeconfigAvailable:
		return fmt.Sprintf("kubeconfig Secret %s/%s (key %q) not found", c.Namespace, KubeconfigSecretName(c.Name), KubeconfigSecretKey)
	case c.KubeconfigProblem != "":
		return c.KubeconfigProblem
	}
	return ""
}

// statusSkipReason applies the rules the Cluster object alone decides (Query.WithoutSecrets).
func statusSkipReason(c Cluster) string {
	switch {
	case c.Deleting:
		return "cluster is being deleted"
	case c.Paused:
		return "cluster is paused (spec.paused or the " + clusterv1.PausedAnnotation + " annotation)"
	case !c.InfrastructureReady:
		return "infrastructure is not provisioned"
	case !c.ControlPlaneReady:
		return "control plane is not initialized"
	}
	return ""
}

func fromV1Beta2(obj *clusterv1.Cluster) Cluster {
	c := clusterOf(obj, obj.Status.Phase, obj.Spec.Paused != nil && *obj.Spec.Paused)
	init := obj.Status.Initialization
	c.InfrastructureReady = init.InfrastructureProvisioned != nil && *init.InfrastructureProvisioned
	c.ControlPlaneReady = init.ControlPlaneInitialized != nil && *init.ControlPlaneInitialized
	c.KubernetesVersion = obj.Spec.Topology.Version
	for _, v := range obj.Spec.Topology.Variables {
		c.TopologyVariables = withVariable(c.TopologyVariables, v.Name, v.Value.Raw)
	}
	if c.KubernetesVersion == "" && obj.Status.ControlPlane != nil && len(obj.Status.ControlPlane.Versions) == 1 {
		c.KubernetesVersion = obj.Status.ControlPlane.Versions[0].Version
	}
	return c
}

func fromV1Beta1(obj *clusterv1beta1.Cluster) Cluster {
	c := clusterOf(obj, obj.Status.Phase, obj.Spec.Paused)
	c.InfrastructureReady, c.ControlPlaneReady = obj.Status.InfrastructureReady, obj.Status.ControlPlaneReady
	if obj.Spec.Topology != nil {
		c.KubernetesVersion = obj.Spec.Topology.Version
		for _, v := range obj.Spec.Topology.Variables {
			c.TopologyVariables = withVariable(c.TopologyVariables, v.Name, v.Value.Raw)
		}
	}
	return c
}

// clusterOf is what a Cluster of any Cluster API version says alike: its metadata, phase and
// whether it is paused (spec, or the paused annotation) or being deleted.
func clusterOf(obj metav1.Object, phase string, paused bool) Cluster {
	return Cluster{
		Name:        obj.GetName(),
		Namespace:   obj.GetNamespace(),
		Labels:      obj.GetLabels(),
		Annotations: obj.GetAnnotations(),
		Phase:       phase,
		Paused:      paused || hasPausedAnnotation(obj.GetAnnotations()),
		Deleting:    !obj.GetDeletionTimestamp().IsZero(),
		holdFields:  readHolds(obj.GetAnnotations()),
	}
}

func withVariable(vars map[string]string, name string, raw []byte) map[string]string {
	if vars == nil {
		vars = map[string]string{}
	}
	vars[name] = string(raw)
	return vars
}

func hasPausedAnnotation(annotations map[string]string) bool {
	_, ok := annotations[clusterv1.PausedAnnotation]
	return ok
}
