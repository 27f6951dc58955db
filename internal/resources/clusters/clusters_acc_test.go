package clusters_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

func TestMain(m *testing.M) { acctest.Main(m) }

func TestAccClusters_selectorMatching(t *testing.T) {
	acctest.OnOneLane(t, 0)
	f := acctest.Fleet(t)
	data := "data.gradual_clusters.picked"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: acctest.ProviderConfig(f) + fmt.Sprintf(`
data "gradual_clusters" "picked" {
  namespace = %q
  selector  = { match_labels = { env = "prod" } }
}`, f.Namespace),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(data, tfjsonpath.New("eligible_names"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("prod-eu-1"), knownvalue.StringExact("prod-us-1")})),
					statecheck.ExpectKnownValue(data, tfjsonpath.New("clusters").AtSliceIndex(0), knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"name":                 knownvalue.StringExact("prod-eu-1"),
						"namespace":            knownvalue.StringExact(f.Namespace),
						"labels":               knownvalue.MapPartial(map[string]knownvalue.Check{"env": knownvalue.StringExact("prod"), "region": knownvalue.StringExact("eu")}),
						"phase":                knownvalue.StringExact("Provisioned"),
						"control_plane_ready":  knownvalue.Bool(true),
						"infrastructure_ready": knownvalue.Bool(true),
						"kubeconfig_available": knownvalue.Bool(true),
						"paused":               knownvalue.Bool(false),
						"skip_reason":          knownvalue.StringExact(""),
						"eligible":             knownvalue.Bool(true),
					})),
				},
			},
			{
				Config: acctest.ProviderConfig(f) + fmt.Sprintf(`
data "gradual_clusters" "picked" {
  namespace = %q
  selector = {
    match_labels      = { env = "prod" }
    match_expressions = [{ key = "region", operator = "NotIn", values = ["eu"] }]
  }
}`, f.Namespace),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(data, tfjsonpath.New("eligible_names"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("prod-us-1")})),
				},
			},
			{
				// By name: a name that does not exist is left out (with a warning).
				Config: acctest.ProviderConfig(f) + fmt.Sprintf(`
data "gradual_clusters" "picked" {
  namespace = %q
  names     = ["staging-eu-1", "no-such-cluster"]
}`, f.Namespace),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(data, tfjsonpath.New("clusters"), knownvalue.ListSizeExact(1)),
					statecheck.ExpectKnownValue(data, tfjsonpath.New("eligible_names"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("staging-eu-1")})),
				},
			},
		},
	})
}

// Clusters that are not ready, paused, lack a kubeconfig Secret or carry an exec plugin show why
// a rollout would skip them.
func TestAccClusters_skipReasons(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	run := acctest.UniqueLabel("skip")
	specs := []testbed.WorkloadSpec{
		{Name: run + "-notready", Ready: false, NoKubeconfig: true},
		{Name: run + "-nokubeconfig", Ready: true, NoKubeconfig: true},
		{Name: run + "-exec", Ready: true, ExecKubeconfig: true},
		{Name: run + "-paused", Ready: true, Paused: true, NoKubeconfig: true},
	}
	addWorkloads(t, f, run, specs)
	data := "data.gradual_clusters.run"
	reason := func(i int, re string) statecheck.StateCheck {
		return statecheck.ExpectKnownValue(data, tfjsonpath.New("clusters").AtSliceIndex(i).AtMapKey("skip_reason"),
			knownvalue.StringRegexp(regexp.MustCompile(re)))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{{
			Config: acctest.ProviderConfig(f) + fmt.Sprintf(`
data "gradual_clusters" "run" {
  namespace = %q
  selector  = { match_labels = { run = %q } }
}`, f.Namespace, run),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(data, tfjsonpath.New("eligible_names"), knownvalue.ListSizeExact(0)),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("clusters"), knownvalue.ListSizeExact(4)),
				// sorted by name: -exec, -nokubeconfig, -notready, -paused
				reason(0, `exec credential plugin`),
				reason(1, `^kubeconfig Secret .*-nokubeconfig-kubeconfig \(key "value"\) not found$`),
				reason(2, `^infrastructure is not provisioned$`),
				reason(3, `^cluster is paused`),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("clusters").AtSliceIndex(1).AtMapKey("kubeconfig_available"), knownvalue.Bool(false)),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("clusters").AtSliceIndex(2).AtMapKey("control_plane_ready"), knownvalue.Bool(false)),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("clusters").AtSliceIndex(3).AtMapKey("paused"), knownvalue.Bool(true)),
			},
		}},
	})
}

func TestAccClusters_badInput(t *testing.T) {
	f := acctest.Fleet(t)
	withSelector := func(selector string) string {
		return acctest.ProviderConfig(f) + fmt.Sprintf("data \"gradual_clusters\" \"x\" {\n  namespace = %q\n  selector = %s\n}\n", f.Namespace, selector)
	}
	workload := f.Workloads["prod-eu-1"]
	steps := []resource.TestStep{
		{Config: withSelector(`{ match_labels = { "bad key!" = "x" } }`), ExpectError: regexp.MustCompile(`Invalid Selector`)},
		{Config: withSelector(`{ match_expressions = [{ key = "a", operator = "In" }] }`), ExpectError: regexp.MustCompile(`Invalid Selector`)},
		{Config: withSelector(`{ match_expressions = [{ key = "a", operator = "Near", values = ["x"] }] }`), ExpectError: regexp.MustCompile(`value must be one of`)},
		{
			Config:      acctest.ProviderConfig(f) + fmt.Sprintf("data \"gradual_clusters\" \"x\" {\n  namespace = %q\n  names = [\"a\"]\n  selector = { match_labels = { a = \"b\" } }\n}\n", f.Namespace),
			ExpectError: regexp.MustCompile(`Invalid Attribute Combination`),
		},
		{
			Config:      acctest.ProviderConfig(f) + "data \"gradual_clusters\" \"x\" {\n  namespace = \"no-such-namespace\"\n}\n",
			ExpectError: regexp.MustCompile(`Namespace Not Found`),
		},
		{
			Config:      "provider \"gradual\" {\n  kubeconfig_path = \"/nonexistent/kubeconfig\"\n}\ndata \"gradual_clusters\" \"x\" {\n  namespace = \"fleet\"\n}\n",
			ExpectError: regexp.MustCompile(`Kubeconfig Not Readable`),
		},
		{
			Config:      fmt.Sprintf("provider \"gradual\" {\n  kubeconfig_path = %q\n  context = \"no-such-context\"\n}\ndata \"gradual_clusters\" \"x\" {\n  namespace = \"fleet\"\n}\n", f.Management.KubeconfigPath),
			ExpectError: regexp.MustCompile(`Unknown Kubeconfig Context`),
		},
		{
			// A workload cluster has no CAPI CRDs: pointing the provider at it is a clear error.
			Config:      fmt.Sprintf("provider \"gradual\" {\n  kubeconfig_path = %q\n}\ndata \"gradual_clusters\" \"x\" {\n  namespace = \"default\"\n}\n", workload.KubeconfigPath),
			ExpectError: regexp.MustCompile(`Cluster API Not Installed`),
		},
		{
			// Nothing listens on port 1: unreachable, said with the host tried.
			Config:      "provider \"gradual\" {\n  host = \"https://127.0.0.1:1\"\n  token = \"s3cr3t\"\n  insecure = true\n}\ndata \"gradual_clusters\" \"x\" {\n  namespace = \"fleet\"\n}\n",
			ExpectError: regexp.MustCompile(`Management Cluster Unreachable[\s\S]*https://127.0.0.1:1`),
		},
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: acctest.ProviderFactories, Steps: steps})
}

// addWorkloads registers Cluster objects labelled run=<run> and removes them when the test ends.
func addWorkloads(t *testing.T, f *testbed.Fleet, run string, specs []testbed.WorkloadSpec) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, spec := range specs {
		spec.Labels = map[string]string{"run": run}
		if err := f.AddWorkload(ctx, spec); err != nil {
			t.Fatalf("add workload %s: %v", spec.Name, err)
		}
		name := spec.Name
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := f.RemoveWorkload(ctx, name); err != nil {
				t.Errorf("remove workload %s: %v", name, err)
			}
		})
	}
}
