package acctest

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// FluxKustomization is what a cluster's Kustomization of key says of the cluster's values:
// the variables kustomize-controller substitutes there (spec.postBuild.substitute) and its
// generation.
type FluxKustomization struct {
	Substitute map[string]string
	Generation int64
}

// FluxKustomizations reads the Kustomization of key on each of clusters, for a check function:
// an error instead of failing the test.
func FluxKustomizations(f *testbed.Fleet, key records.Key, clusters []string) (map[string]FluxKustomization, error) {
	mc, err := f.ManagementClient()
	if err != nil {
		return nil, err
	}
	// A check function gets no context.
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	defer cancel()
	out := map[string]FluxKustomization{}
	for _, c := range clusters {
		k := fluxdelivery.KustomizationKind
		ks := testbed.FluxObject(k.GroupVersion().String(), k.Kind, f.Namespace, fluxdelivery.ObjectName(key, c))
		if err := mc.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
			return nil, fmt.Errorf("%s: its Kustomization of %s: %w", c, key, err)
		}
		sub, _, err := unstructured.NestedStringMap(ks.Object, "spec", "postBuild", "substitute")
		if err != nil {
			return nil, fmt.Errorf("%s: its Kustomization's postBuild.substitute: %w", c, err)
		}
		out[c] = FluxKustomization{Substitute: sub, Generation: ks.GetGeneration()}
	}
	return out, nil
}
