package rollout_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// One contract, both engines: the contract tests are written once against engineUnderTest and run
// on each delivery engine. The direct engine's run on the shared test bed (their historical
// names, TestAccRollout_<what>); the Flux engine's on the Flux bed (TestAccRollout_fluxContract_<what>,
// which tools/testacc.sh's Flux stage picks up with the other TestAccRollout_flux tests).

// engineUnderTest is a delivery engine as the tests see it: the fleet that runs it, the
// configuration that picks it, and where it keeps a cluster's records.
type engineUnderTest struct {
	name string
	// fleet is the test bed the engine runs on (skips when there is none).
	fleet func(*testing.T) *testbed.Fleet
	// delivery is the rollout's `delivery` attribute (with its newline), "" delivering directly.
	delivery func(f *testbed.Fleet, name string) string
	// revision is the revision the rollout name of manifests gets on f.
	revision func(t *testing.T, f *testbed.Fleet, name, manifests string) string
	// records reads cluster's records of key in recordNamespace.
	records func(t *testing.T, f *testbed.Fleet, cluster, recordNamespace string, key records.Key) (*records.State, error)
	// owned maps what the engine keeps for rollout key on clusters (its records, and through Flux
	// its Flux objects) to a version that any write of it changes: the resourceVersion, or the
	// generation where a controller writes the status.
	owned func(t *testing.T, f *testbed.Fleet, clusters []string, key records.Key) map[string]string
}

var (
	directEngine = engineUnderTest{
		name:     "direct",
		fleet:    acctest.Fleet,
		delivery: func(*testbed.Fleet, string) string { return "" },
		revision: func(t *testing.T, _ *testbed.Fleet, _, manifests string) string { return revisionOf(t, manifests) },
		records: func(t *testing.T, f *testbed.Fleet, cluster, recordNamespace string, key records.Key) (*records.State, error) {
			return records.NewWorkloadStore(workloadClient(t, f, cluster), recordNamespace).Load(context.Background(), key)
		},
		// The management cluster's records and each cluster's own.
		owned: func(t *testing.T, f *testbed.Fleet, clusters []string, key records.Key) map[string]string {
			out := map[string]string{}
			recordVersions(t, out, "management", managementClient(t, f), key)
			for _, c := range clusters {
				recordVersions(t, out, c, workloadClient(t, f, c), key)
			}
			return out
		},
	}
	fluxEngine = engineUnderTest{
		name:  "flux",
		fleet: acctest.FluxFleet,
		delivery: func(f *testbed.Fleet, name string) string {
			return fmt.Sprintf("delivery = { flux = { repository = %q, insecure = true } }\n", fluxRepository(f, name))
		},
		revision: func(t *testing.T, f *testbed.Fleet, name, manifests string) string {
			return fluxRevisionOf(t, manifests, fluxRepository(f, name))
		},
		records: func(t *testing.T, f *testbed.Fleet, cluster, recordNamespace string, key records.Key) (*records.State, error) {
			mc, err := f.ManagementClient()
			if err != nil {
				return nil, err
			}
			return records.NewWorkloadStore(mc, recordNamespace).Load(context.Background(), delivery.FluxRecordKey(key, cluster))
		},
		// Every record in the management cluster (the rollout's and each cluster's), and each
		// cluster's Kustomization and the OCIRepository it names (shared by the clusters on one
		// artifact) by name and generation (kustomize-controller and source-controller write
		// their status).
		owned: func(t *testing.T, f *testbed.Fleet, clusters []string, key records.Key) map[string]string {
			out := map[string]string{}
			mc := managementClient(t, f)
			keys := []records.Key{key}
			for _, c := range clusters {
				keys = append(keys, delivery.FluxRecordKey(key, c))
			}
			recordVersions(t, out, "management", mc, keys...)
			for _, c := range clusters {
				ks := kustomization(f, key, c)
				if err := mc.Get(context.Background(), client.ObjectKeyFromObject(ks), ks); err != nil {
					t.Fatalf("%s: Kustomization: %v", c, err)
				}
				src, err := acctest.FluxSource(context.Background(), mc, f.Namespace, key, c)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range []*unstructured.Unstructured{ks, src} {
					out[fmt.Sprintf("management: %s %s/%s generation", o.GetKind(), o.GetNamespace(), o.GetName())] = fmt.Sprint(o.GetGeneration())
				}
			}
			return out
		},
	}
)

// fluxRepository is where the Flux engine publishes rollout name's artifacts on f.
func fluxRepository(f *testbed.Fleet, name string) string {
	return f.Flux.RegistryURL("gradual/" + name)
}

// withDelivery adds e's `delivery` to the rollout attributes extra.
func (e engineUnderTest) withDelivery(f *testbed.Fleet, name, extra string) string {
	d := e.delivery(f, name)
	if d == "" {
		return extra
	}
	if extra == "" {
		return strings.TrimSuffix(d, "\n")
	}
	return extra + "\n  " + strings.TrimSuffix(d, "\n")
}

// withDeliveryHCL adds e's `delivery` to a whole configuration's gradual_rollout.test block (for
// the tests that write their own configuration: interruptConfig).
func (e engineUnderTest) withDeliveryHCL(f *testbed.Fleet, name, config string) string {
	d := e.delivery(f, name)
	if d == "" {
		return config
	}
	const block = "resource \"gradual_rollout\" \"test\" {\n"
	if !strings.Contains(config, block) {
		panic("withDeliveryHCL: no gradual_rollout.test block")
	}
	return strings.Replace(config, block, block+"  "+d, 1)
}

func managementClient(t *testing.T, f *testbed.Fleet) client.Client {
	t.Helper()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	return mc
}
