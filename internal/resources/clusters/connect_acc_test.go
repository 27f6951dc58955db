package clusters_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/clientconfig"
	"github.com/gradual-dev/terraform-provider-gradual/internal/provider"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// managementCredentials are the test bed's management server, CA, client certificate and key
// (PEM), read from its kubeconfig.
type managementCredentials struct{ server, ca, cert, key string }

func credentials(t *testing.T, f *testbed.Fleet) managementCredentials {
	t.Helper()
	api, err := clientcmd.LoadFromFile(f.Management.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*api, api.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.CertData) == 0 || len(cfg.KeyData) == 0 || len(cfg.CAData) == 0 {
		t.Fatal("the management kubeconfig has no inline client certificate and CA")
	}
	return managementCredentials{server: cfg.Host, ca: string(cfg.CAData), cert: string(cfg.CertData), key: string(cfg.KeyData)}
}

// pickedProd reads the prod clusters through whatever the provider block configures.
func pickedProd(provider string, f *testbed.Fleet) resource.TestStep {
	return resource.TestStep{
		Config: provider + fmt.Sprintf(`
data "gradual_clusters" "picked" {
  namespace = %q
  selector  = { match_labels = { env = "prod" } }
}`, f.Namespace),
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue("data.gradual_clusters.picked", tfjsonpath.New("eligible_names"),
				knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("prod-eu-1"), knownvalue.StringExact("prod-us-1")})),
		},
	}
}

// The provider reaches the management cluster with the credential an exec plugin prints; a
// plugin that fails is a plan-time error naming the command and not its environment.
func TestAccConnect_execPlugin(t *testing.T) {
	f := acctest.Fleet(t)
	c := credentials(t, f)
	dir := t.TempDir()
	cred, err := json.Marshal(map[string]any{
		"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
		"status": map[string]string{"clientCertificateData": c.cert, "clientKeyData": c.key},
	})
	if err != nil {
		t.Fatal(err)
	}
	credFile := filepath.Join(dir, "credential.json")
	plugin := filepath.Join(dir, "test-credential-plugin")
	failing := filepath.Join(dir, "failing-credential-plugin")
	for path, content := range map[string]string{
		credFile: string(cred),
		plugin:   "#!/bin/sh\n[ -n \"$KUBERNETES_EXEC_INFO\" ] || exit 9\nexec cat \"$CRED_FILE\"\n",
		failing:  "#!/bin/sh\necho \"login refused for $PLUGIN_SECRET\" >&2\nexit 4\n",
	} {
		if err := os.WriteFile(path, []byte(content), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	provider := func(command string) string {
		return fmt.Sprintf(`provider "gradual" {
  host                   = %q
  cluster_ca_certificate = %q
  exec {
    api_version = "client.authentication.k8s.io/v1"
    command     = %q
    env         = { CRED_FILE = %q, PLUGIN_SECRET = "s3cr3t-value" }
  }
}
`, c.server, c.ca, command, credFile)
	}
	failStep := pickedProd(provider(failing), f)
	failStep.ConfigStateChecks = nil
	failStep.ExpectError = regexp.MustCompile(`(?s)Exec Credential Plugin Failed.*` + regexp.QuoteMeta(`"`+failing+`"`) + `.*exited\s+with\s+code\s+4.*login\s+refused\s+for\s+\(redacted\)`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		// The failing step first: it leaves no state, and the post-test destroy uses the last
		// step's configuration.
		Steps: []resource.TestStep{failStep, pickedProd(provider(plugin), f)},
	})
}

// The provider block may be empty: KUBE_* environment variables configure the connection, as for
// hashicorp/kubernetes.
func TestAccConnect_environment(t *testing.T) {
	f := acctest.Fleet(t)
	c := credentials(t, f)
	empty := "provider \"gradual\" {}\n"
	t.Run("KUBE_HOST and credentials", func(t *testing.T) {
		t.Setenv("KUBE_HOST", c.server)
		t.Setenv("KUBE_CLUSTER_CA_CERT_DATA", c.ca)
		t.Setenv("KUBE_CLIENT_CERT_DATA", c.cert)
		t.Setenv("KUBE_CLIENT_KEY_DATA", c.key)
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: acctest.ProviderFactories,
			Steps:                    []resource.TestStep{pickedProd(empty, f)},
		})
	})
	t.Run("KUBE_CONFIG_PATH", func(t *testing.T) {
		t.Setenv("KUBE_CONFIG_PATH", f.Management.KubeconfigPath)
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: acctest.ProviderFactories,
			Steps:                    []resource.TestStep{pickedProd(empty, f)},
		})
	})
	t.Run("nothing configured", func(t *testing.T) {
		for _, name := range []string{"KUBE_CONFIG_PATH", "KUBE_CONFIG_PATHS", "KUBE_HOST", "KUBERNETES_SERVICE_HOST"} {
			t.Setenv(name, "")
		}
		t.Setenv("KUBECONFIG", f.Management.KubeconfigPath)
		step := pickedProd(empty, f)
		step.ConfigStateChecks = nil
		step.ExpectError = regexp.MustCompile(`(?s)No Management Cluster Configured.*KUBECONFIG\s+is\s+set\s+but\s+is\s+not\s+read`)
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: acctest.ProviderFactories,
			Steps:                    []resource.TestStep{step},
		})
	})
}

// With nothing configured, the provider uses the pod's ServiceAccount: the standard in-cluster
// environment (KUBERNETES_SERVICE_HOST/PORT) and a token and CA in the ServiceAccount directory,
// here a temp dir holding a real ServiceAccount token of the test bed's management cluster.
func TestAccConnect_inCluster(t *testing.T) {
	f := acctest.Fleet(t)
	c := credentials(t, f)
	token := serviceAccountToken(t, f)
	dir := t.TempDir()
	for name, content := range map[string]string{"token": token, "ca.crt": c.ca} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	u, err := url.Parse(c.server)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"KUBE_CONFIG_PATH", "KUBE_CONFIG_PATHS", "KUBE_HOST"} {
		t.Setenv(name, "")
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", u.Hostname())
	t.Setenv("KUBERNETES_SERVICE_PORT", u.Port())
	factories := map[string]func() (tfprotov6.ProviderServer, error){
		"gradual": providerserver.NewProtocol6WithError(provider.NewWithEnvironment("test", clientconfig.Environment{ServiceAccountDir: dir})()),
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps:                    []resource.TestStep{pickedProd("provider \"gradual\" {}\n", f)},
	})
}

// serviceAccountToken creates a ServiceAccount bound to cluster-admin in the management cluster
// and returns a short-lived token for it; both are removed when the test ends.
func serviceAccountToken(t *testing.T, f *testbed.Fleet) string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", f.Management.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := acctest.UniqueLabel("gradual-incluster")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "default"}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cs.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete ClusterRoleBinding %s: %v", name, err)
		}
		if err := cs.CoreV1().ServiceAccounts("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete ServiceAccount %s: %v", name, err)
		}
	})
	expiry := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for ServiceAccount %s: %v", name, err)
	}
	return tr.Status.Token
}
