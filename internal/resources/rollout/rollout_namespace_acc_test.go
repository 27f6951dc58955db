package rollout_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
)

// Output like `helm template` gives: namespaced objects without metadata.namespace. With
// default_namespace they land in it, the ClusterRole stays cluster-scoped, and the revision is
// that of the same objects written with their namespace.
func TestAccRollout_defaultNamespace(t *testing.T) {
	acctest.OnOneLane(t, 0)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("defns")
	clusterRole := fmt.Sprintf("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: %s-reader\nrules:\n  - apiGroups: [\"\"]\n    resources: [configmaps]\n    verbs: [get]\n", name)
	written := app(name, "v1", false, "") + clusterRole
	rendered := strings.ReplaceAll(written, "  namespace: "+name+"\n", "")
	if strings.Contains(rendered, "namespace: ") {
		t.Fatalf("the rendered bundle still names a namespace:\n%s", rendered)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				// names and its deprecated alias clusters are one attribute: never both.
				Config:      rolloutConfig(f, name, `names = ["staging-eu-1"]`+"\n  clusters = [\"staging-eu-1\"]", rendered, fmt.Sprintf("default_namespace = %q", name)),
				ExpectError: regexp.MustCompile(`Invalid Attribute Combination`),
			},
			{
				Config: rolloutConfig(f, name, `names = ["staging-eu-1"]`, rendered, fmt.Sprintf("default_namespace = %q", name)),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("revision"), knownvalue.StringExact(revisionOf(t, written))),
					stateCheck(f, name, "staging-eu-1", "current", revisionOf(t, written)),
				},
				Check: func(*terraform.State) error {
					c := workloadClient(t, f, "staging-eu-1")
					var cm corev1.ConfigMap
					if err := c.Get(context.Background(), client.ObjectKey{Namespace: name, Name: "settings"}, &cm); err != nil {
						return fmt.Errorf("the ConfigMap is not in %s: %w", name, err)
					}
					var cr rbacv1.ClusterRole
					if err := c.Get(context.Background(), client.ObjectKey{Name: name + "-reader"}, &cr); err != nil {
						return fmt.Errorf("the ClusterRole: %w", err)
					}
					return nil
				},
			},
			{
				// The same objects written with their namespace are the same revision: the plan
				// updates the configuration only, and the cluster stays current on it.
				Config: rolloutConfig(f, name, `names = ["staging-eu-1"]`, written, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("revision"), knownvalue.StringExact(revisionOf(t, written))),
				}},
				ConfigStateChecks: []statecheck.StateCheck{stateCheck(f, name, "staging-eu-1", "current", revisionOf(t, written))},
			},
			{
				// Without default_namespace, the rendered objects cannot be applied: the check
				// before any change names them.
				Config:      rolloutConfig(f, name, `names = ["staging-eu-1"]`, rendered+"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n", ""),
				ExpectError: regexp.MustCompile(`(?s)namespaced\s+kind\s+without\s+metadata\.namespace`),
			},
		},
	})
}

// The guide's example (examples/helm-and-kustomize) as written, but for the provider block:
// Helm and Kustomize output without namespaces, composed into one bundle, applied with
// default_namespace and ignore_fields.
func TestAccRollout_helmAndKustomizeExample(t *testing.T) {
	f := acctest.Fleet(t)
	dir, err := filepath.Abs("../../../examples/helm-and-kustomize")
	if err != nil {
		t.Fatal(err)
	}
	main, err := os.ReadFile(filepath.Join(dir, "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := acctest.ProviderConfig(f) + strings.ReplaceAll(string(main), "${path.module}", dir)
	vars := config.Variables{"namespace": config.StringVariable(f.Namespace), "clusters": config.ListVariable(config.StringVariable("staging-eu-1"))}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{{
			Config: cfg, ConfigVariables: vars,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("gradual_rollout.podinfo", tfjsonpath.New("summary"), knownvalue.MapPartial(map[string]knownvalue.Check{
					"current": knownvalue.Int64Exact(1),
				})),
			},
			Check: func(*terraform.State) error {
				c := workloadClient(t, f, "staging-eu-1")
				for _, obj := range []client.Object{
					&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "podinfo", Name: "podinfo"}},
					&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "podinfo", Name: "podinfo-env-7b9k5f2m8c"}},
					&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "podinfo-reader"}},
				} {
					if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
						return fmt.Errorf("%T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
					}
				}
				return nil
			},
		}},
	})
}
