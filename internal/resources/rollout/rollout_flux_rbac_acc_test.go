package rollout_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestAccRollout_fluxWithoutSecrets proves that the runner of a rollout through Flux needs the
// management cluster only, and nothing on the Clusters' Secrets: its management credentials are
// ServiceAccount tokens bound to exactly the RBAC guide's Flux roles (management-flux.yaml, with
// the shared namespace and records roles), which the API server confirms grant no verb on Secrets
// in the Clusters' namespace. With them a plan-only identity plans and refreshes, and an apply
// identity rolls two revisions out to the three clusters (the canary first) and destroys. The
// provider gets no workload credentials in any form, so Flux's kustomize-controller, reading
// the kubeconfig Secrets itself, is the only one that could have applied. It skips on a test bed
// without Flux.
func TestAccRollout_fluxWithoutSecrets(t *testing.T) {
	f := acctest.FluxFleet(t)
	ctx := context.Background()
	name := acctest.UniqueLabel("fluxrbac")
	recordNS := name + "-records"
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}

	// The identities, bound as the guide says, in the fleet's Clusters' namespace and a record
	// namespace of the test's own.
	mgmtCfg, err := f.Management.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	createNamespace(t, mc, recordNS)
	t.Cleanup(func() {
		_ = mc.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: recordNS}})
	})
	applyAll(t, mc, append(append(guideRoles(t, "management-plan.yaml"), guideRoles(t, "management-apply.yaml")...), guideRoles(t, "management-flux.yaml")...))
	bindings := map[string][]binding{
		"plan": {{role: "gradual-plan-namespaces"}, {role: "gradual-flux-plan-fleet", namespace: f.Namespace},
			{role: "gradual-plan-records", namespace: recordNS}},
		"apply": {{role: "gradual-apply-namespaces"}, {role: "gradual-flux-plan-fleet", namespace: f.Namespace},
			{role: "gradual-flux-delivery", namespace: f.Namespace},
			{role: "gradual-apply-records", namespace: recordNS}, {role: "gradual-flux-records", namespace: recordNS}},
	}
	kubeconfig := map[string]string{}
	for identity, bs := range bindings {
		raw := tokenKubeconfig(t, mgmtCfg, serviceAccountToken(t, mc, mgmtCfg, name, identity, bs))
		path := filepath.Join(t.TempDir(), identity+".kubeconfig")
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		kubeconfig[identity] = path
		// Nothing on Secrets where the Clusters and their kubeconfig Secrets live, as the API
		// server itself judges these credentials.
		for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
			if canI(t, raw, verb, "secrets", f.Namespace) {
				t.Fatalf("the %s identity may %s Secrets in the Clusters' namespace %s", identity, verb, f.Namespace)
			}
		}
		// The review says yes too, where the guide grants: the records.
		if !canI(t, raw, "list", "secrets", recordNS) {
			t.Fatalf("the %s identity may not list Secrets in the record namespace %s", identity, recordNS)
		}
	}

	config := func(identity, value string) string {
		return fmt.Sprintf(`provider "gradual" {
  kubeconfig_path = %q
}

resource "gradual_rollout" "test" {
  name             = %q
  namespace        = %q
  clusters         = ["prod-eu-1", "prod-us-1", "staging-eu-1"]
  record_namespace = %q
  canary           = ["staging-eu-1"]
  update_limit     = "2"
  manifests = <<-EOT
%s  EOT
  verify   = { timeout = "60s" }
  delivery = { flux = { repository = %q, insecure = true } }
}
`, kubeconfig[identity], name, f.Namespace, recordNS, indent(fluxBundle(name, value, false)), f.Flux.RegistryURL("gradual/"+name))
	}
	// onClusters checks, as the admin, the ConfigMap Flux applied to every cluster.
	onClusters := func(value string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			for _, c := range clusters {
				var cm corev1.ConfigMap
				if err := workloadClient(t, f, c).Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &cm); err != nil {
					return fmt.Errorf("%s: the ConfigMap Flux applied: %w", c, err)
				}
				if cm.Data["value"] != value {
					return fmt.Errorf("%s: ConfigMap value %q, want %q", c, cm.Data["value"], value)
				}
			}
			return nil
		}
	}
	allCurrent := []statecheck.StateCheck{
		statecheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("waves"), knownvalue.StringRegexp(regexp.MustCompile(`^2 waves`))),
		statecheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("summary"), knownvalue.MapPartial(map[string]knownvalue.Check{
			"current": knownvalue.Int64Exact(3),
		})),
	}

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			for _, kind := range []schema.GroupVersionKind{fluxdelivery.KustomizationKind, fluxdelivery.OCIRepositoryKind} {
				var list unstructured.UnstructuredList
				list.SetGroupVersionKind(kind.GroupVersion().WithKind(kind.Kind + "List"))
				if err := mc.List(ctx, &list, client.InNamespace(f.Namespace), client.MatchingLabels{records.LabelRollout: key.Hash()}); err != nil {
					return err
				}
				if len(list.Items) > 0 {
					return fmt.Errorf("%d %ss of %s left after destroy", len(list.Items), kind.Kind, key)
				}
			}
			var left corev1.SecretList
			if err := mc.List(ctx, &left, client.InNamespace(recordNS), client.MatchingLabels{records.LabelRollout: key.Hash()}); err != nil {
				return err
			}
			if len(left.Items) > 0 {
				return fmt.Errorf("%d record Secrets of %s left in %s after destroy", len(left.Items), key, recordNS)
			}
			for _, c := range clusters {
				err := workloadClient(t, f, c).Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &corev1.ConfigMap{})
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("%s: the ConfigMap after destroy: %v, want it pruned by Flux", c, err)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				// The plan-only identity plans the create (the fleet listed and judged, each
				// Kustomization read, the registry checked).
				Config: config("plan", "one"), PlanOnly: true, ExpectNonEmptyPlan: true,
			},
			{
				Config:            config("apply", "one"),
				ConfigStateChecks: allCurrent,
				Check:             onClusters("one"),
			},
			{
				// Refreshed by the plan-only identity (the records read in the management
				// cluster): nothing to do.
				Config: config("plan", "one"), PlanOnly: true,
			},
			{
				// The next revision, and the destroy that ends the test, by the apply identity.
				Config:            config("apply", "two"),
				ConfigStateChecks: allCurrent,
				Check:             onClusters("two"),
			},
		},
	})
}

// canI asks the API server whether the identity of kubeconfig may verb resource (core group)
// in namespace (a SelfSubjectAccessReview, as `kubectl auth can-i` does).
func canI(t *testing.T, kubeconfig []byte, verb, resource, namespace string) bool {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Resource: resource,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return review.Status.Allowed
}
