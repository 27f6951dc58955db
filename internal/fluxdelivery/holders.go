package fluxdelivery

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// Holder is a Flux Kustomization that applied an object to a cluster, read from its inventory:
// another rollout's (Key, when this provider made it) or anyone's (Kustomization, its
// namespace/name: a platform team's own Flux objects).
type Holder struct {
	Key           records.Key
	Kustomization string
}

// Holders reads, for each of clusters, which objects the Flux Kustomizations in namespace other
// than key's own have applied there (status.inventory), and which Kustomization did: two
// Kustomizations that apply one object take turns overwriting it, and each prunes it when it drops
// it. The runner reads no workload cluster; the inventories are in the management cluster. A
// Kustomization applies to a cluster through its CAPI kubeconfig Secret (spec.kubeConfig.secretRef
// "<cluster>-kubeconfig"); one without applies to the management cluster and is no one's claim.
func Holders(ctx context.Context, mgmt client.Client, namespace string, key records.Key, clusters []string) (map[string]map[manifest.Identity]Holder, error) {
	want := map[string]string{} // kubeconfig Secret name → cluster
	for _, c := range clusters {
		want[c+"-kubeconfig"] = c
	}
	out := map[string]map[manifest.Identity]Holder{}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(KustomizationKind.GroupVersion().WithKind(KustomizationKind.Kind + "List"))
	opts := []client.ListOption{client.InNamespace(namespace), client.Limit(listPage)}
	for {
		if err := mgmt.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("list the Kustomizations in %s: %w", namespace, err)
		}
		for i := range list.Items {
			ks := &list.Items[i]
			secret, _, _ := unstructured.NestedString(ks.Object, "spec", "kubeConfig", "secretRef", "name")
			cluster, ok := want[secret]
			if !ok || ks.GetLabels()[records.LabelRollout] == key.Hash() {
				continue
			}
			holder := Holder{Kustomization: ks.GetNamespace() + "/" + ks.GetName()}
			if k, err := records.ParseKey(ks.GetAnnotations()[records.AnnotationRolloutKey]); err == nil && ks.GetLabels()[records.LabelManagedBy] == records.ManagedBy {
				holder.Key = k
			}
			entries, _, _ := unstructured.NestedSlice(ks.Object, "status", "inventory", "entries")
			for _, e := range entries {
				entry, _ := e.(map[string]any)
				id, ok := inventoryIdentity(fmt.Sprint(entry["id"]))
				if !ok {
					continue
				}
				if out[cluster] == nil {
					out[cluster] = map[manifest.Identity]Holder{}
				}
				out[cluster][id] = holder
			}
		}
		if list.GetContinue() == "" {
			return out, nil
		}
		opts = []client.ListOption{client.InNamespace(namespace), client.Limit(listPage), client.Continue(list.GetContinue())}
	}
}

// inventoryIdentity parses a Flux inventory entry's id, "<namespace>_<name>_<group>_<kind>"
// (cli-utils' ObjMetadata; the namespace empty for a cluster-scoped object, the group for the core
// group). Kubernetes names hold no underscore, so the four parts are unambiguous.
func inventoryIdentity(id string) (manifest.Identity, bool) {
	parts := strings.Split(id, "_")
	if len(parts) != 4 || parts[1] == "" || parts[3] == "" {
		return manifest.Identity{}, false
	}
	return manifest.Identity{Namespace: parts[0], Name: parts[1], Group: parts[2], Kind: parts[3]}, true
}

// Inventory lists the objects the rollout's Kustomization on cluster applied (its
// status.inventory), as messages name them ("ConfigMap demo/settings"), sorted; none when it has
// no inventory or is gone.
func (d *Delivery) Inventory(ctx context.Context, namespace, cluster string) ([]string, error) {
	ks := d.object(KustomizationKind, namespace, cluster)
	if err := d.mgmt.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	entries, _, _ := unstructured.NestedSlice(ks.Object, "status", "inventory", "entries")
	var out []string
	for _, e := range entries {
		entry, _ := e.(map[string]any)
		if id, ok := inventoryIdentity(fmt.Sprint(entry["id"])); ok {
			out = append(out, id.String())
		}
	}
	slices.Sort(out)
	return out, nil
}
