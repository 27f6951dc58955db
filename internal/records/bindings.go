package records

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels and annotations of binding ConfigMaps.
const (
	// LabelBindingOf is the Hash of the key (a module assignment) a binding belongs to.
	LabelBindingOf = "gradual.dev/binding-of"
	// LabelBindingCluster is a hash of the cluster a binding is about, so that every
	// assignment's binding of one cluster can be listed.
	LabelBindingCluster = "gradual.dev/binding-cluster"
	// AnnotationCluster names the cluster a binding is about.
	AnnotationCluster = "gradual.dev/cluster"
)

// BindingResult is what an assignment's apply did with one module on one cluster.
type BindingResult string

// Binding results.
const (
	BindingApplied BindingResult = "applied" // the module's revision was applied and verified
	BindingFailed  BindingResult = "failed"  // it failed verification and the cluster was restored
	BindingBlocked BindingResult = "blocked" // a module it depends on is not applied on the cluster
	BindingDrifted BindingResult = "drifted" // applied, but the live objects no longer match (refresh only)
)

// ModuleBinding is what one assignment did with one module on one cluster, like a CAPI
// ClusterResourceSetBinding entry.
type ModuleBinding struct {
	Module    string        `json:"module"`
	Revision  string        `json:"revision"`
	AppliedAt time.Time     `json:"appliedAt,omitzero"`
	Result    BindingResult `json:"result"`
	Reason    string        `json:"reason,omitempty"`
}

// bindingData is the content of one binding ConfigMap. Field names are part of the record format.
type bindingData struct {
	Cluster string          `json:"cluster"`
	Modules []ModuleBinding `json:"modules"`
}

// BindingStore keeps, in the management cluster, one ConfigMap per (assignment, cluster) listing
// the modules the assignment applied there. Objects are separate per assignment, so two
// assignments binding the same cluster never write the same object; writes are read-modify-write
// with the object's resourceVersion, retried on conflict.
type BindingStore struct {
	c         client.Client
	namespace string
}

// NewBindingStore keeps bindings through c in namespace (DefaultNamespace when empty).
func NewBindingStore(c client.Client, namespace string) *BindingStore {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	return &BindingStore{c: c, namespace: namespace}
}

// BindingName is the name of key's binding ConfigMap for cluster.
func BindingName(key Key, cluster string) string {
	return "gradual.binding." + Key{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name + "@" + cluster}.base()
}

func clusterHash(cluster string) string {
	sum := sha256.Sum256([]byte(cluster))
	return hex.EncodeToString(sum[:])[:16]
}

// List returns key's bindings by cluster, modules sorted by name.
func (s *BindingStore) List(ctx context.Context, key Key) (map[string][]ModuleBinding, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	var list corev1.ConfigMapList
	if err := s.c.List(ctx, &list, client.InNamespace(s.namespace), client.MatchingLabels{LabelManagedBy: ManagedBy, LabelBindingOf: key.Hash()}); err != nil {
		return nil, fmt.Errorf("list bindings of %s in namespace %s: %w", key.Describe(), s.namespace, err)
	}
	out := map[string][]ModuleBinding{}
	for i := range list.Items {
		cm := &list.Items[i]
		if cm.Annotations[AnnotationRolloutKey] != key.String() {
			continue // a hash collision: not ours
		}
		d, err := decodeBinding(cm)
		if err != nil {
			return nil, err
		}
		out[d.Cluster] = d.Modules
	}
	return out, nil
}

// ForCluster returns every key's bindings of cluster, by key.
func (s *BindingStore) ForCluster(ctx context.Context, cluster string) (map[Key][]ModuleBinding, error) {
	var list corev1.ConfigMapList
	if err := s.c.List(ctx, &list, client.InNamespace(s.namespace), client.MatchingLabels{LabelManagedBy: ManagedBy, LabelBindingCluster: clusterHash(cluster)}); err != nil {
		return nil, fmt.Errorf("list bindings of cluster %s in namespace %s: %w", cluster, s.namespace, err)
	}
	out := map[Key][]ModuleBinding{}
	for i := range list.Items {
		cm := &list.Items[i]
		key, err := ParseKey(cm.Annotations[AnnotationRolloutKey])
		if err != nil {
			return nil, fmt.Errorf("binding %s: %w", cm.Name, err)
		}
		d, err := decodeBinding(cm)
		if err != nil {
			return nil, err
		}
		if d.Cluster == cluster {
			out[key] = d.Modules
		}
	}
	return out, nil
}

// Update changes key's binding of cluster: change gets the recorded modules (nil when none) and
// returns the new list; an empty list deletes the binding.
func (s *BindingStore) Update(ctx context.Context, key Key, cluster string, change func([]ModuleBinding) []ModuleBinding) error {
	if err := key.Validate(); err != nil {
		return err
	}
	name := BindingName(key, cluster)
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		cm := &corev1.ConfigMap{}
		err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, cm)
		switch {
		case apierrors.IsNotFound(err):
			cm = nil
		case err != nil:
			return err
		}
		var old []ModuleBinding
		if cm != nil {
			d, err := decodeBinding(cm)
			if err != nil {
				return err
			}
			old = d.Modules
		}
		modules := change(append([]ModuleBinding(nil), old...))
		sort.Slice(modules, func(i, j int) bool { return modules[i].Module < modules[j].Module })
		if len(modules) == 0 {
			if cm == nil {
				return nil
			}
			return client.IgnoreNotFound(s.c.Delete(ctx, cm, client.Preconditions{ResourceVersion: &cm.ResourceVersion}))
		}
		raw, err := json.Marshal(bindingData{Cluster: cluster, Modules: modules})
		if err != nil {
			return err
		}
		if cm != nil {
			cm.Data = map[string]string{"binding": string(raw)}
			return s.c.Update(ctx, cm)
		}
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name:      name,
				Namespace: s.namespace,
				Labels: map[string]string{
					LabelManagedBy: ManagedBy, LabelBindingOf: key.Hash(), LabelBindingCluster: clusterHash(cluster),
				},
				Annotations: map[string]string{AnnotationRolloutKey: key.String(), AnnotationCluster: cluster},
			},
			Data: map[string]string{"binding": string(raw)},
		}
		err = createInNamespace(ctx, s.c, cm)
		if apierrors.IsAlreadyExists(err) {
			return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, name, err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("update the binding of %s to cluster %s in namespace %s: %w", key.Describe(), cluster, s.namespace, err)
	}
	return nil
}

// Delete removes key's binding of cluster.
func (s *BindingStore) Delete(ctx context.Context, key Key, cluster string) error {
	return s.Update(ctx, key, cluster, func([]ModuleBinding) []ModuleBinding { return nil })
}

// DeleteAll removes every binding of key.
func (s *BindingStore) DeleteAll(ctx context.Context, key Key) error {
	bindings, err := s.List(ctx, key)
	if err != nil {
		return err
	}
	for cluster := range bindings {
		if err := s.Delete(ctx, key, cluster); err != nil {
			return err
		}
	}
	return nil
}

func decodeBinding(cm *corev1.ConfigMap) (bindingData, error) {
	var d bindingData
	if err := json.Unmarshal([]byte(cm.Data["binding"]), &d); err != nil {
		return d, fmt.Errorf("binding %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	if d.Cluster == "" {
		d.Cluster = cm.Annotations[AnnotationCluster]
	}
	return d, nil
}
