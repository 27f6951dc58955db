package rollout_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// TestAccRollout_fluxRegistryCredentials delivers through Flux from a registry that serves TLS
// with a CA of its own and takes a username and password or a token (the test bed's
// AuthRegistry, served by this test): a wrong password and a missing CA are refused at plan
// with nothing written; the right ones publish, and source-controller pulls with the Secrets
// the platform team put in the Clusters' namespace (secret_ref, cert_secret_ref); a token works
// as well; the password and token reach neither the state nor the Flux objects.
func TestAccRollout_fluxRegistryCredentials(t *testing.T) {
	f := acctest.FluxFleet(t)
	const password, token = "pa55-for-the-registry", "t0ken-for-the-registry"
	reg, err := testbed.StartAuthRegistry("fleet-push", password, token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	name := acctest.UniqueLabel("fluxauth")
	ctx := context.Background()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	// What the platform team provides beside the Clusters: the pull Secret and the CA Secret
	// source-controller uses. The provider never reads them.
	auth := base64.StdEncoding.EncodeToString([]byte("fleet-push:" + password))
	dockerConfig, err := json.Marshal(map[string]any{"auths": map[string]any{reg.Addr: map[string]string{"username": "fleet-push", "password": password, "auth": auth}}})
	if err != nil {
		t.Fatal(err)
	}
	pull := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-pull", Namespace: f.Namespace}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig}}
	// A second pull Secret, as after a rotation.
	pull2 := pull.DeepCopy()
	pull2.Name = name + "-pull2"
	ca := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-ca", Namespace: f.Namespace}, Data: map[string][]byte{"ca.crt": reg.CAPEM}}
	for _, s := range []*corev1.Secret{pull, pull2, ca} {
		if err := mc.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mc.Delete(context.Background(), s) })
	}
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	clusters := `clusters = ["prod-eu-1", "staging-eu-1"]`
	caBundle := strings.ReplaceAll(string(reg.CAPEM), "\n", `\n`)
	pullName, revision := pull.Name, "" // the pull Secret the OCIRepositories must name; the last revision
	config := func(manifests, credentials string, withCA bool) string {
		caLine := ""
		if withCA {
			caLine = fmt.Sprintf(`ca_bundle = "%s"`, caBundle)
		}
		return rolloutConfig(f, name, clusters, manifests, fmt.Sprintf(`delivery = { flux = {
    repository      = %q
    %s
    secret_ref      = %q
    cert_secret_ref = %q
    %s
  } }`, reg.URL("gradual/"+name), caLine, pullName, ca.Name, credentials))
	}
	basic := fmt.Sprintf("username = \"fleet-push\"\n    password = %q", password)
	// nothingWritten checks that no Kustomization of the rollout exists.
	nothingWritten := func() error {
		var list unstructured.UnstructuredList
		list.SetGroupVersionKind(fluxdelivery.KustomizationKind.GroupVersion().WithKind("KustomizationList"))
		if err := mc.List(ctx, &list, client.InNamespace(f.Namespace), client.MatchingLabels{records.LabelRollout: key.Hash()}); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d Kustomizations of %s, want none", len(list.Items), key)
		}
		return nil
	}
	onClusters := func(value string) func(*terraform.State) error {
		return func(s *terraform.State) error {
			for _, c := range []string{"prod-eu-1", "staging-eu-1"} {
				var cm corev1.ConfigMap
				if err := workloadClient(t, f, c).Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &cm); err != nil {
					return fmt.Errorf("%s: the ConfigMap Flux applied: %w", c, err)
				}
				if cm.Data["value"] != value {
					return fmt.Errorf("%s: ConfigMap value %q, want %q", c, cm.Data["value"], value)
				}
				repo, err := acctest.FluxSource(ctx, mc, f.Namespace, key, c)
				if err != nil {
					return err
				}
				spec, _ := json.Marshal(repo.Object["spec"])
				if !strings.Contains(string(spec), `"secretRef":{"name":"`+pullName+`"}`) || !strings.Contains(string(spec), `"certSecretRef":{"name":"`+ca.Name+`"}`) {
					return fmt.Errorf("%s: OCIRepository spec %s lacks the Secret references", c, spec)
				}
			}
			// Write-only: neither in the state nor in the Flux objects.
			for _, r := range s.RootModule().Resources {
				for k, v := range r.Primary.Attributes {
					if strings.Contains(v, password) || strings.Contains(v, token) {
						return fmt.Errorf("state attribute %s holds a registry credential", k)
					}
				}
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy:             func(*terraform.State) error { return nothingWritten() },
		Steps: []resource.TestStep{
			{
				// The registry refuses the password: refused at plan, nothing written, and the
				// password is not repeated.
				Config: config(fluxBundle(name, "one", false), "username = \"fleet-push\"\n    password = \"wrong\"", true), PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Registry Not Usable.*(?i:unauthorized)`),
			},
			{
				// Without the CA this provider cannot trust the registry's certificate.
				PreConfig: func() {
					if err := nothingWritten(); err != nil {
						t.Fatal(err)
					}
				},
				Config: config(fluxBundle(name, "one", false), basic, false), PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Registry Not Usable.*certificate`),
			},
			{
				Config: config(fluxBundle(name, "one", false), basic, true),
				Check:  onClusters("one"),
			},
			{
				// The next revision pushed with a token instead: the credentials change nothing
				// in the clusters, so the rollout is updated, not replaced.
				Config: config(fluxBundle(name, "two", false), fmt.Sprintf("token = %q", token), true),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeTestCheckFunc(onClusters("two"), func(s *terraform.State) error {
					revision = s.RootModule().Resources["gradual_rollout.test"].Primary.Attributes["revision"]
					return nil
				}),
			},
			{
				// Another pull Secret is a new revision (the OCIRepositories change), carried to
				// the clusters in waves like any other.
				PreConfig: func() { pullName = pull2.Name },
				Config: strings.Replace(config(fluxBundle(name, "two", false), fmt.Sprintf("token = %q", token), true),
					fmt.Sprintf("secret_ref      = %q", pull.Name), fmt.Sprintf("secret_ref      = %q", pull2.Name), 1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeTestCheckFunc(onClusters("two"), func(s *terraform.State) error {
					if now := s.RootModule().Resources["gradual_rollout.test"].Primary.Attributes["revision"]; now == revision {
						return fmt.Errorf("revision %s unchanged after secret_ref changed", now)
					}
					return nil
				}),
			},
		},
	})
}
