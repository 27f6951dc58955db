package records

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys lists the keys of every rollout (or module) that holds records in the store's namespace,
// sorted, from one metadata-only list.
func (s *WorkloadStore) Keys(ctx context.Context) ([]Key, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := s.c.List(ctx, list, client.InNamespace(s.namespace), client.MatchingLabels{LabelManagedBy: ManagedBy, LabelChunk: "0"}); err != nil {
		return nil, fmt.Errorf("list records in namespace %s: %w", s.namespace, err)
	}
	seen := map[Key]bool{}
	var out []Key
	for i := range list.Items {
		k, err := ParseKey(list.Items[i].GetAnnotations()[AnnotationRolloutKey])
		if err != nil || seen[k] || list.Items[i].GetLabels()[LabelRollout] != k.Hash() || writtenBy(&list.Items[i]) != "" {
			continue // not a record head the store wrote
		}
		seen[k] = true
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}
