package fleet

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Query picks Clusters in one namespace, by label selector or by name. With neither, it picks
// every Cluster in the namespace.
type Query struct {
	Namespace string
	Selector  labels.Selector
	Names     []string
	// Hold is what holds clusters back besides their state (pauses, maintenance windows),
	// judged at the management's clock.
	Hold Hold
	// WithoutSecrets judges each Cluster by the Cluster alone and reads no Secret: Cluster API
	// writes the `<name>-kubeconfig` Secret before it reports the control plane initialized
	// (status.initialization.controlPlaneInitialized; v1beta1 status.controlPlaneReady), so that
	// status stands for the Secret. Delivery through Flux sets it: kustomize-controller reads
	// the Secret, not this process, whose credentials then need nothing on Secrets there; a
	// Secret missing anyway fails the cluster's Kustomization, an infrastructure failure.
	// Clusters found so leave KubeconfigAvailable false: nobody looked.
	WithoutSecrets bool
}

// Discovery is the result of a Query: the Clusters found, sorted by name, and the names asked
// for that do not exist.
type Discovery struct {
	Clusters []Cluster
	Missing  []string
}

// Eligible returns the clusters a rollout would change.
func (d *Discovery) Eligible() []Cluster {
	var out []Cluster
	for _, c := range d.Clusters {
		if c.Eligible() {
			out = append(out, c)
		}
	}
	return out
}

// Discover lists the Clusters that match q and works out each one's eligibility.
func (m *Management) Discover(ctx context.Context, q Query) (*Discovery, error) {
	version, err := m.ClusterAPIVersion(ctx)
	if err != nil {
		return nil, err
	}
	if err := m.checkNamespace(ctx, q.Namespace); err != nil {
		return nil, err
	}
	clusters, err := m.listClusters(ctx, version, q)
	if err != nil {
		return nil, err
	}
	d := &Discovery{}
	if len(q.Names) > 0 {
		byName := map[string]Cluster{}
		for _, c := range clusters {
			byName[c.Name] = c
		}
		clusters = clusters[:0]
		for _, name := range q.Names {
			if c, ok := byName[name]; ok {
				clusters = append(clusters, c)
			} else {
				d.Missing = append(d.Missing, name)
			}
		}
	}
	rules := skipReason
	var secrets map[string][]byte
	if q.WithoutSecrets {
		rules = statusSkipReason
	} else if secrets, err = m.kubeconfigSecrets(ctx, q.Namespace); err != nil {
		return nil, err
	}
	now := m.now()
	for i := range clusters {
		c := &clusters[i]
		if value, ok := secrets[KubeconfigSecretName(c.Name)]; ok {
			c.KubeconfigAvailable = true
			c.KubeconfigProblem = checkKubeconfig(value)
		}
		c.SkipReason = rules(*c)
		if c.SkipReason == "" {
			c.SkipReason = c.HoldReason(q.Hold, now)
		}
	}
	sort.Slice(clusters, func(i, j int) bool { return clusters[i].Name < clusters[j].Name })
	d.Clusters = clusters
	return d, nil
}

func (m *Management) checkNamespace(ctx context.Context, namespace string) error {
	if namespace == "" {
		return usererr.New("Namespace Required", "Set namespace to the namespace of the Cluster API Cluster objects.")
	}
	err := m.Client.Get(ctx, client.ObjectKey{Name: namespace}, &corev1.Namespace{})
	switch {
	case apierrors.IsNotFound(err):
		return usererr.New("Namespace Not Found",
			fmt.Sprintf("The management cluster (%s) has no namespace %q. Set namespace to where the Cluster API Cluster objects live.", m.Source, namespace))
	case apierrors.IsForbidden(err):
		return nil // may list Clusters without reading namespaces; the list below will tell
	case err != nil:
		return m.unreachable(err)
	}
	return nil
}

func (m *Management) listClusters(ctx context.Context, version string, q Query) ([]Cluster, error) {
	opts := []client.ListOption{client.InNamespace(q.Namespace)}
	if q.Selector != nil && !q.Selector.Empty() {
		opts = append(opts, client.MatchingLabelsSelector{Selector: q.Selector})
	}
	var out []Cluster
	if version == clusterv1.GroupVersion.Version {
		var list clusterv1.ClusterList
		if err := m.Client.List(ctx, &list, opts...); err != nil {
			return nil, m.listFailed(err, q.Namespace)
		}
		for i := range list.Items {
			out = append(out, fromV1Beta2(&list.Items[i]))
		}
		return out, nil
	}
	var list clusterv1beta1.ClusterList
	if err := m.Client.List(ctx, &list, opts...); err != nil {
		return nil, m.listFailed(err, q.Namespace)
	}
	for i := range list.Items {
		out = append(out, fromV1Beta1(&list.Items[i]))
	}
	return out, nil
}

func (m *Management) listFailed(err error, namespace string) error {
	if apierrors.IsForbidden(err) {
		return usererr.Wrap(err, "Cannot List Clusters",
			fmt.Sprintf("The credentials from %s may not list clusters.%s in namespace %q. Grant list on that resource.", m.Source, ClusterAPIGroup, namespace))
	}
	return m.unreachable(err)
}

// kubeconfigSecrets returns the kubeconfig values of the namespace's `<cluster>-kubeconfig`
// Secrets, keyed by Secret name.
func (m *Management) kubeconfigSecrets(ctx context.Context, namespace string) (map[string][]byte, error) {
	var list corev1.SecretList
	// Not filtered by CAPI's cluster-name label: kubeconfig Secrets written by hand (imported
	// clusters) often lack it. One list still serves every cluster in the namespace.
	if err := m.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		if apierrors.IsForbidden(err) {
			return nil, usererr.Wrap(err, "Cannot List Kubeconfig Secrets",
				fmt.Sprintf("The credentials from %s may not list Secrets in namespace %q, where CAPI keeps each cluster's <name>-kubeconfig Secret. Grant list on secrets there.", m.Source, namespace))
		}
		return nil, m.unreachable(err)
	}
	m.workloads.remember(namespace, list.Items)
	out := map[string][]byte{}
	for _, s := range list.Items {
		if !strings.HasSuffix(s.Name, kubeconfigSecretSuffix) {
			continue
		}
		if value, ok := s.Data[KubeconfigSecretKey]; ok && len(value) > 0 {
			out[s.Name] = value
		}
	}
	return out, nil
}

// LabelSelector is the provider's selector shape, as in Kubernetes' metav1.LabelSelector.
type LabelSelector struct {
	MatchLabels      map[string]string
	MatchExpressions []Requirement
}

// Requirement is one match expression: key, operator (In, NotIn, Exists, DoesNotExist), values.
type Requirement struct {
	Key      string
	Operator string
	Values   []string
}

// Selector validates s and converts it to a labels.Selector.
func (s LabelSelector) Selector() (labels.Selector, error) {
	ls := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: r.Key, Operator: metav1.LabelSelectorOperator(r.Operator), Values: r.Values,
		})
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, usererr.Wrap(err, "Invalid Selector", "The selector is not a valid label selector: "+err.Error()+
			". Label keys and values follow Kubernetes label syntax; operators are In, NotIn, Exists, DoesNotExist (In/NotIn need values, Exists/DoesNotExist take none).")
	}
	return sel, nil
}
