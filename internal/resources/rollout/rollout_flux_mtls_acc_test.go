package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed/servingcert"
)

// TestAccRollout_fluxRegistryClientCert delivers through Flux from a registry that requires
// client certificates (the test bed's AuthRegistry with RequireClientCerts, served by this test):
// without a client certificate the plan is refused (the handshake fails), a key that is not the
// certificate's is refused at plan naming client_key, and with the right pair the provider
// pushes while source-controller pulls with its own from cert_secret_ref (tls.crt, tls.key and
// ca.crt). The key reaches neither the state nor the Flux objects.
func TestAccRollout_fluxRegistryClientCert(t *testing.T) {
	f := acctest.FluxFleet(t)
	reg, err := testbed.StartAuthRegistry("fleet-push", "pa55-mtls", "", testbed.RequireClientCerts())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	other, err := servingcert.NewClient("another-ca")
	if err != nil {
		t.Fatal(err)
	}
	name := acctest.UniqueLabel("fluxmtls")
	ctx := context.Background()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	// What the platform team provides for source-controller: the pull Secret and the TLS Secret
	// (the registry's CA, and a client certificate and key the registry trusts).
	dockerConfig, err := json.Marshal(map[string]any{"auths": map[string]any{reg.Addr: map[string]string{"username": "fleet-push", "password": "pa55-mtls"}}})
	if err != nil {
		t.Fatal(err)
	}
	pull := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-pull", Namespace: f.Namespace}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig}}
	tlsSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-tls", Namespace: f.Namespace},
		Data: map[string][]byte{"ca.crt": reg.CAPEM, "tls.crt": reg.Client.CertPEM, "tls.key": reg.Client.KeyPEM}}
	for _, s := range []*corev1.Secret{pull, tlsSecret} {
		if err := mc.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mc.Delete(context.Background(), s) })
	}
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	hcl := func(pem []byte) string { return strings.ReplaceAll(string(pem), "\n", `\n`) }
	config := func(client string) string {
		return rolloutConfig(f, name, `clusters = ["prod-eu-1", "staging-eu-1"]`, fluxBundle(name, "one", false), fmt.Sprintf(`delivery = { flux = {
    repository      = %q
    ca_bundle       = "%s"
    username        = "fleet-push"
    password        = "pa55-mtls"
    secret_ref      = %q
    cert_secret_ref = %q
    %s
  } }`, reg.URL("gradual/"+name), hcl(reg.CAPEM), pull.Name, tlsSecret.Name, client))
	}
	pair := func(crt, key []byte) string {
		return fmt.Sprintf("client_certificate = \"%s\"\n    client_key = \"%s\"", hcl(crt), hcl(key))
	}
	delivered := func(s *terraform.State) error {
		for _, c := range []string{"prod-eu-1", "staging-eu-1"} {
			var cm corev1.ConfigMap
			if err := workloadClient(t, f, c).Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &cm); err != nil {
				return fmt.Errorf("%s: the ConfigMap Flux applied: %w", c, err)
			}
			repo, err := acctest.FluxSource(ctx, mc, f.Namespace, key, c)
			if err != nil {
				return err
			}
			if spec, _ := json.Marshal(repo.Object); strings.Contains(string(spec), "PRIVATE KEY") {
				return fmt.Errorf("%s: the OCIRepository holds a private key", c)
			}
		}
		for _, r := range s.RootModule().Resources {
			for k, v := range r.Primary.Attributes {
				if strings.Contains(v, "PRIVATE KEY") {
					return fmt.Errorf("state attribute %s holds the client key", k)
				}
			}
		}
		if got := s.RootModule().Resources["gradual_rollout.test"].Primary.Attributes["delivery.flux.client_certificate"]; got != string(reg.Client.CertPEM) {
			return fmt.Errorf("delivery.flux.client_certificate in the state = %q, want the certificate", got)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				// No client certificate: the registry refuses the handshake, at plan.
				Config: config(""), PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Registry Not Usable.*certificate`),
			},
			{
				// Another certificate's key: refused at plan, naming the attribute.
				Config: config(pair(reg.Client.CertPEM, other.KeyPEM)), PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Invalid Registry Client Certificate.*client_key is not the key of\s+client_certificate`),
			},
			{
				Config: config(pair(reg.Client.CertPEM, reg.Client.KeyPEM)),
				Check:  delivered,
			},
		},
	})
}
