package acctest

import (
	"context"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// AnnotateCluster sets (value not nil) or removes (nil) an annotation of a workload's Cluster
// object in the management cluster, as an operator would with kubectl annotate: the test bed's
// own changes to the Cluster leave it alone. A test that annotates removes its annotations in
// t.Cleanup, since every test of a lane shares the fleet.
func AnnotateCluster(t *testing.T, f *testbed.Fleet, cluster, key string, value *string) {
	t.Helper()
	c, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(clusterv1.GroupVersion.String())
	obj.SetKind("Cluster")
	obj.SetNamespace(f.Namespace)
	obj.SetName(cluster)
	// Not t's context: tests remove their annotations in t.Cleanup, after t's context is done.
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	defer cancel()
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("annotate Cluster %s/%s %s: %v", f.Namespace, cluster, key, err)
	}
}
