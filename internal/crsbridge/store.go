package crsbridge

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

var (
	crsGVK        = schema.GroupVersionKind{Group: "addons.cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterResourceSet"}
	crsBindingGVK = schema.GroupVersionKind{Group: "addons.cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterResourceSetBindingList"}
	configMapList = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMapList"}
)

// Store writes, reads and removes assignments' bridges in the management cluster.
type Store struct{ c client.Client }

// NewStore works through c, the management cluster.
func NewStore(c client.Client) *Store { return &Store{c: c} }

// Held is what a bridge hands out now: per module, the revision its ConfigMap holds.
type Held struct {
	// Exists says the ClusterResourceSet is there.
	Exists    bool
	Revisions map[string]string
	// hashes are, per module, the hash Cluster API computes of the ConfigMap's data (its
	// ClusterResourceSetBinding records it), to tell which joiners got the revision held now.
	hashes map[string]string
	// payloads are, per module, the objects the ConfigMap holds (Payload's YAML).
	payloads map[string]string
}

// Objects are the objects the bridge hands out for module now (none when it carries no such
// module), as Cluster API creates them on a joiner.
func (h *Held) Objects(module string) ([]*unstructured.Unstructured, error) {
	text, ok := h.payloads[module]
	if !ok {
		return nil, nil
	}
	set, err := manifest.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("read the bridge's ConfigMap of module %q: %w", module, err)
	}
	return set.Objects, nil
}

// Read reads the bridge of key in namespace. A bridge that is not there holds nothing.
func (s *Store) Read(ctx context.Context, key records.Key, namespace string) (*Held, error) {
	h := &Held{Revisions: map[string]string{}, hashes: map[string]string{}, payloads: map[string]string{}}
	crs := &unstructured.Unstructured{}
	crs.SetGroupVersionKind(crsGVK)
	switch err := s.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: Name(key)}, crs); {
	case err == nil:
		// Deleted, it may stay a moment: Cluster API's finalizer goes once its controller saw
		// the deletion. It hands out nothing from then on.
		h.Exists = crs.GetAnnotations()[records.AnnotationRolloutKey] == key.String() && crs.GetDeletionTimestamp() == nil
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
	default:
		return nil, fmt.Errorf("read the bridge %s/%s: %w", namespace, Name(key), err)
	}
	cms, err := s.configMaps(ctx, key, namespace)
	if err != nil {
		return nil, err
	}
	for _, cm := range cms {
		module := cm.GetAnnotations()[AnnotationModule]
		h.Revisions[module] = cm.GetAnnotations()[AnnotationRevision]
		payload, _, _ := unstructured.NestedString(cm.Object, "data", dataKey)
		h.hashes[module] = fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(payload)))
		h.payloads[module] = payload
	}
	return h, nil
}

// configMaps lists the bridge ConfigMaps of key (its label, checked against its annotation).
func (s *Store) configMaps(ctx context.Context, key records.Key, namespace string) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(configMapList)
	if err := s.c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{LabelBridgeOf: key.Hash()}); err != nil {
		return nil, fmt.Errorf("list the bridge's ConfigMaps in %s: %w", namespace, err)
	}
	var out []unstructured.Unstructured
	for _, cm := range list.Items {
		if cm.GetAnnotations()[records.AnnotationRolloutKey] == key.String() {
			out = append(out, cm)
		}
	}
	return out, nil
}

// Write makes the bridge what b says: the ConfigMaps of the modules that moved are written
// from their objects, those kept are left as they are (they hold the only copy of that
// revision), those no longer carried are deleted after the ClusterResourceSet stops listing
// them. With no module carried, the bridge is removed.
func (s *Store) Write(ctx context.Context, b Bridge) error {
	if len(b.Modules) == 0 {
		return s.Delete(ctx, b.Key, b.Namespace)
	}
	owner := client.FieldOwner(b.Key.FieldManager())
	for _, m := range b.Modules {
		if m.Objects == nil {
			continue
		}
		payload, err := Payload(m.FieldManager, m.Objects)
		if err != nil {
			return err
		}
		if err := CheckSize(m.Module, payload); err != nil {
			return err
		}
		cm := b.ConfigMap(m, payload)
		if err := s.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(cm), owner, client.ForceOwnership); err != nil {
			return fmt.Errorf("write the bridge's ConfigMap %s/%s: %w", b.Namespace, cm.GetName(), err)
		}
	}
	crs, err := b.ClusterResourceSet()
	if err != nil {
		return err
	}
	if err := s.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(crs), owner, client.ForceOwnership); err != nil {
		return fmt.Errorf("write the bridge %s/%s (is Cluster API's ClusterResourceSet API installed?): %w", b.Namespace, crs.GetName(), err)
	}
	cms, err := s.configMaps(ctx, b.Key, b.Namespace)
	if err != nil {
		return err
	}
	for i := range cms {
		module := cms[i].GetAnnotations()[AnnotationModule]
		if !slices.ContainsFunc(b.Modules, func(m Carried) bool { return m.Module == module }) {
			if err := client.IgnoreNotFound(s.c.Delete(ctx, &cms[i])); err != nil {
				return fmt.Errorf("delete the bridge's ConfigMap of module %q: %w", module, err)
			}
		}
	}
	return nil
}

// Delete removes the bridge of key: the ClusterResourceSet, then its ConfigMaps. What it gave
// joiners stays there (ClusterResourceSet never deletes what it created); the assignment's
// records say what becomes of it.
func (s *Store) Delete(ctx context.Context, key records.Key, namespace string) error {
	crs := &unstructured.Unstructured{}
	crs.SetGroupVersionKind(crsGVK)
	crs.SetNamespace(namespace)
	crs.SetName(Name(key))
	if err := s.c.Delete(ctx, crs); err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
		return fmt.Errorf("delete the bridge %s/%s: %w", namespace, Name(key), err)
	}
	cms, err := s.configMaps(ctx, key, namespace)
	if err != nil {
		return err
	}
	var errs []error
	for i := range cms {
		if err := client.IgnoreNotFound(s.c.Delete(ctx, &cms[i])); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Joiner is a cluster the bridge gave modules to, as Cluster API's ClusterResourceSetBinding
// records it.
type Joiner struct {
	Cluster string
	Modules []Given
	// Health is how the objects of the modules Cluster API applied read on the cluster now, as
	// a verify judges them: "" when not read (nothing applied yet), "healthy", or what is not.
	Health string
}

// Given is one module the bridge gave a cluster.
type Given struct {
	Module string
	// Revision is the revision the bridge holds now when the cluster got that content; "" when
	// it got an earlier one.
	Revision  string
	Applied   bool
	AppliedAt time.Time
}

// String says in one line what the cluster got: "cni r-1a2b, policy (failed)".
func (j Joiner) String() string {
	if len(j.Modules) == 0 {
		// Cluster API binds the cluster before it can reach it: its kubeconfig or control plane
		// is not ready yet, and the ClusterResourceSet controller tries again until it is.
		return "nothing yet: Cluster API waits for its control plane and kubeconfig, and applies the bridge once they answer"
	}
	parts := make([]string, 0, len(j.Modules))
	for _, g := range j.Modules {
		switch {
		case !g.Applied:
			parts = append(parts, g.Module+" (not applied yet: Cluster API retries)")
		case g.Revision == "":
			parts = append(parts, g.Module+" (an earlier revision)")
		default:
			parts = append(parts, g.Module+" "+g.Revision)
		}
	}
	out := strings.Join(parts, ", ")
	if j.Health != "" {
		out += "; " + j.Health
	}
	return out
}

// Given lists every cluster the bridge of key gave a module to, by Cluster API's
// ClusterResourceSetBindings in namespace; held tells the revision each got.
func (s *Store) Given(ctx context.Context, key records.Key, namespace string, held *Held) ([]Joiner, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(crsBindingGVK)
	if err := s.c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list ClusterResourceSetBindings in %s: %w", namespace, err)
	}
	prefix := Name(key) + "."
	var out []Joiner
	for _, b := range list.Items {
		cluster, _, _ := unstructured.NestedString(b.Object, "spec", "clusterName")
		sets, _, _ := unstructured.NestedSlice(b.Object, "spec", "bindings")
		for _, set := range sets {
			sm, _ := set.(map[string]any)
			if name, _ := sm["clusterResourceSetName"].(string); name != Name(key) {
				continue
			}
			j := Joiner{Cluster: cluster}
			resources, _ := sm["resources"].([]any)
			for _, r := range resources {
				rm, _ := r.(map[string]any)
				name, _ := rm["name"].(string)
				if !strings.HasPrefix(name, prefix) {
					continue
				}
				g := Given{Module: strings.TrimPrefix(name, prefix)}
				g.Applied, _ = rm["applied"].(bool)
				if at, _ := rm["lastAppliedTime"].(string); at != "" {
					g.AppliedAt, _ = time.Parse(time.RFC3339, at)
				}
				if hash, _ := rm["hash"].(string); held != nil && hash != "" && hash == held.hashes[g.Module] {
					g.Revision = held.Revisions[g.Module]
				}
				j.Modules = append(j.Modules, g)
			}
			out = append(out, j)
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Cluster < out[k].Cluster })
	return out, nil
}
