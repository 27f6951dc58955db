package rollout_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// words matches text as the CLI prints it, which may wrap a line at any space.
func words(text string) string {
	return strings.Join(strings.Fields(regexp.QuoteMeta(text)), `\s+`)
}

// settingsOf reads ConfigMap ns/settings on cluster: its data and field managers.
func settingsOf(f *testbed.Fleet, cluster, ns string) (map[string]string, []string, error) {
	c, err := f.WorkloadClient(cluster)
	if err != nil {
		return nil, nil, err
	}
	var cm corev1.ConfigMap
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "settings"}, &cm); err != nil {
		return nil, nil, fmt.Errorf("%s: ConfigMap %s/settings: %w", cluster, ns, err)
	}
	var managers []string
	for _, mf := range cm.ManagedFields {
		managers = append(managers, mf.Manager)
	}
	return cm.Data, managers, nil
}

// expectAdoptedSettings checks that ConfigMap ns/settings is there with setting = want, and that
// the rollout gave it back (our field manager is gone).
func expectAdoptedSettings(f *testbed.Fleet, cluster, ns, want string) error {
	data, managers, err := settingsOf(f, cluster, ns)
	if err != nil {
		return err
	}
	// kubectl-create may have no field left (the rollout took its one field over, and the API
	// server drops empty entries): given back means ours is gone.
	if data["setting"] != want || slices.ContainsFunc(managers, records.IsFieldManager) {
		return fmt.Errorf("%s: ConfigMap %s/settings has data %v, managers %v; want setting %q, without our field manager", cluster, ns, data, managers, want)
	}
	return nil
}

// Adoption: a Namespace and ConfigMap made with kubectl before the first rollout. adopt = false
// refuses at plan, naming them and their manager, and changes nothing; a first revision that
// fails puts the ConfigMap back as kubectl made it (the Deployment the rollout made is deleted);
// destroy leaves both, given back, with the content the rollout applied.
func TestAccRollout_adoptedObjectsSurvive(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("adopt")
	const cluster = "staging-eu-1"
	acctest.Kubectl(t, f, cluster, "create", "namespace", name)
	t.Cleanup(func() { acctest.Kubectl(t, f, cluster, "delete", "namespace", name, "--wait=false") })
	acctest.Kubectl(t, f, cluster, "create", "configmap", "settings", "-n", name, "--from-literal=setting=mine")

	targets := `clusters = ["` + cluster + `"]`
	good, bad := app(name, "v1", false, ""), app(name, "v1", true, "")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if err := expectAdoptedSettings(f, cluster, name, "v1"); err != nil {
				return fmt.Errorf("after destroy: %w", err)
			}
			c, err := f.WorkloadClient(cluster)
			if err != nil {
				return err
			}
			var ns corev1.Namespace
			if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &ns); err != nil || ns.DeletionTimestamp != nil {
				return fmt.Errorf("adopted namespace %s deleted by destroy (err %v)", name, err)
			}
			var d appsv1.Deployment
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: name, Name: "web"}, &d); err == nil && d.DeletionTimestamp == nil {
				return fmt.Errorf("Deployment %s/web, made by the rollout, survived destroy", name)
			}
			if st := workloadRecords(t, f, cluster, name); st.Current != nil || st.Backup != nil || len(st.Invalid) != 0 {
				return fmt.Errorf("records left after destroy: %+v", st)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config:      rolloutConfig(f, name, targets, good, `adopt = false`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Objects Exist Already.*` + words("cluster "+cluster+": ConfigMap "+name+"/settings (managed by kubectl-create)")),
			},
			{
				// adopt = false changed nothing; the failed first revision is restored to
				// nothing, but the adopted objects stay.
				PreConfig: func() {
					if err := expectAdoptedSettings(f, cluster, name, "mine"); err != nil {
						t.Fatal(err)
					}
					if st := workloadRecords(t, f, cluster, name); st.Provisioning != nil || st.Current != nil {
						t.Fatalf("a refused plan wrote records: %+v", st)
					}
				},
				Config:      rolloutConfig(f, name, targets, bad, ""),
				ExpectError: regexp.MustCompile(`Rollout Failed`),
			},
			{
				PreConfig: func() {
					if err := expectAdoptedSettings(f, cluster, name, "mine"); err != nil {
						t.Fatalf("after the failed first revision: %v", err)
					}
					c := workloadClient(t, f, cluster)
					var d appsv1.Deployment
					if err := c.Get(context.Background(), client.ObjectKey{Namespace: name, Name: "web"}, &d); !apierrors.IsNotFound(err) {
						t.Fatalf("Deployment %s/web, made by the failed revision, still there (err %v)", name, err)
					}
					var adopted []string
					for _, a := range workloadRecords(t, f, cluster, name).AdoptedOf() {
						adopted = append(adopted, a.Object.String())
					}
					slices.Sort(adopted)
					if want := []string{"ConfigMap " + name + "/settings", "Namespace " + name}; !slices.Equal(adopted, want) {
						t.Fatalf("records adopted %q, want %q", adopted, want)
					}
				},
				Config: rolloutConfig(f, name, targets, good, ""),
				Check: func(*terraform.State) error {
					data, _, err := settingsOf(f, cluster, name)
					if err != nil || data["setting"] != "v1" {
						return fmt.Errorf("the good revision did not take over the adopted ConfigMap: %v %v", data, err)
					}
					return nil
				},
			},
		},
	})
}

// One owner per object: a second rollout listing a ConfigMap the first one manages is refused
// at plan, naming the first rollout, the cluster and the object.
func TestAccRollout_oneOwnerPerObject(t *testing.T) {
	acctest.OnOneLane(t, 0)
	testOneOwnerPerObject(t, directEngine)
}

// TestAccRollout_fluxContract_oneOwnerPerObject: the same through Flux, where the claim is read
// from the first rollout's Kustomization's inventory in the management cluster.
func TestAccRollout_fluxContract_oneOwnerPerObject(t *testing.T) {
	testOneOwnerPerObject(t, fluxEngine)
}

func testOneOwnerPerObject(t *testing.T, e engineUnderTest) {
	f := e.fleet(t)
	name := acctest.UniqueLabel("owner")
	const cluster = "staging-eu-1"
	shared := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: %s\ndata: {a: b}\n", name)
	first := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n---\n", name) + shared
	second := strings.Replace(shared, "{a: b}", "{a: c}", 1)
	one := rolloutConfig(f, name, `clusters = ["`+cluster+`"]`, first, e.withDelivery(f, name, ""))
	two := one + fmt.Sprintf(`
resource "gradual_rollout" "second" {
  name      = "%s-second"
  namespace = %q
  clusters  = [%q]
  %s
  manifests = <<-EOT
%s  EOT
}
`, name, f.Namespace, cluster, e.delivery(f, name+"-second"), indent(second))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: one},
			{
				Config: two,
				ExpectError: regexp.MustCompile(`(?s)Object Claimed By Two Owners.*` + words("rollout "+f.Namespace+"/"+name+"-second") + `.*` +
					words("ConfigMap "+name+"/shared in cluster "+cluster+" is managed by rollout "+f.Namespace+"/"+name) + `\s`),
			},
		},
	})
}

// labeller returns a function that sets (on) or removes label = "yes" on a workload Cluster.
func labeller(t *testing.T, f *testbed.Fleet, label string) func(cluster string, on bool) {
	return func(cluster string, on bool) {
		t.Helper()
		labels := map[string]string{}
		for k, v := range f.Workloads[cluster].Spec.Labels {
			labels[k] = v
		}
		if on {
			labels[label] = "yes"
		} else {
			delete(labels, label)
		}
		if err := f.SetLabels(context.Background(), cluster, labels); err != nil {
			t.Fatal(err)
		}
	}
}

// Clusters relabelled out of the selector: the plan shows an update, and apply removes the
// rollout's objects there with deletion_policy = "delete", keeps them with "orphan"; the
// records go either way.
func TestAccRollout_leavingClusters(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("leave")
	relabel := labeller(t, f, name) // a label key only this test uses
	relabel("prod-eu-1", true)
	relabel("prod-us-1", true)
	t.Cleanup(func() {
		relabel("prod-eu-1", false)
		relabel("prod-us-1", false)
		acctest.Kubectl(t, f, "prod-eu-1", "delete", "namespace", name, "--wait=false", "--ignore-not-found")
	})
	bundle := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %[1]s\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: %[1]s\ndata: {setting: v1}\n", name)
	targets := fmt.Sprintf(`selector = { match_labels = { %q = "yes" } }`, name)
	del, orphan := rolloutConfig(f, name, targets, bundle, ""), rolloutConfig(f, name, targets, bundle, `deletion_policy = "orphan"`)
	noRecords := func(cluster string) error {
		if st := workloadRecords(t, f, cluster, name); st.Current != nil || st.Backup != nil || st.Provisioning != nil {
			return fmt.Errorf("%s: records of the rollout left after it left: %+v", cluster, st)
		}
		return nil
	}
	update := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate)}}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: del},
			{
				// prod-us-1 leaves with deletion_policy = "delete": nothing else changed, yet the
				// plan is an update, and apply deletes there.
				PreConfig:        func() { relabel("prod-us-1", false) },
				Config:           del,
				ConfigPlanChecks: update,
				Check: func(*terraform.State) error {
					if err := expectConfigMap(f, "prod-us-1", name, "settings", false); err != nil {
						return err
					}
					if err := expectConfigMap(f, "prod-eu-1", name, "settings", true); err != nil {
						return err
					}
					return noRecords("prod-us-1")
				},
			},
			{Config: orphan},
			{
				// prod-eu-1 leaves with deletion_policy = "orphan": its objects stay.
				PreConfig:        func() { relabel("prod-eu-1", false) },
				Config:           orphan,
				ConfigPlanChecks: update,
				Check: func(*terraform.State) error {
					if err := expectConfigMap(f, "prod-eu-1", name, "settings", true); err != nil {
						return fmt.Errorf("orphaned objects should stay: %w", err)
					}
					return noRecords("prod-eu-1")
				},
			},
			{
				// Nothing is leaving any more: the plan is empty.
				Config:   orphan,
				PlanOnly: true,
			},
		},
	})
}
