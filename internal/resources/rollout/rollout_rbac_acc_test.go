package rollout_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// rbacGuideDir holds the ClusterRoles the RBAC guide (templates/guides/rbac.md.tmpl) shows: the
// test binds exactly those, so the guide and what is tested cannot drift apart.
const rbacGuideDir = "../../../examples/guides/rbac"

// rbacClusters are the workload clusters the test reaches with restricted credentials.
var rbacClusters = []string{"prod-eu-1", "staging-eu-1"}

// A rollout planned, applied, changed and destroyed with nothing but the guide's roles: a
// plan-only identity plans (refresh and its drift dry runs included) and cannot apply, with a
// diagnostic naming what it may not do; an apply identity applies, prunes and destroys. The
// Clusters are copies, in a namespace of the test's own, of two of the fleet's, whose
// kubeconfig Secrets carry a ServiceAccount token instead of the admin's certificate; the
// records go to a record namespace of the test's own, so the other tests' Clusters and records
// are untouched.
func TestAccRBAC_guideRoles(t *testing.T) {
	acctest.OnOneLane(t, 0)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("rbac")
	bed := setUpRBAC(t, f, name)

	v1 := rbacBundle(name, "v1", true)
	v2 := rbacBundle(name, "v2", false)
	config := func(kubeconfig, manifests string) string {
		return fmt.Sprintf(`provider "gradual" {
  kubeconfig_path = %q
}

resource "gradual_rollout" "test" {
  name             = %q
  namespace        = %q
  names            = [%q, %q]
  record_namespace = %q
  manifests = <<-EOT
%s  EOT
  verify = { timeout = "60s" }
}
`, kubeconfig, name, bed.namespace, rbacClusters[0], rbacClusters[1], bed.records, indent(manifests))
	}
	asPlan, asApply := bed.use(t, "plan"), bed.use(t, "apply")
	configMaps := func(want map[string]bool) resource.TestCheckFunc {
		return func(*terraform.State) error {
			for _, cluster := range rbacClusters {
				for cm, present := range want {
					err := workloadClient(t, f, cluster).Get(context.Background(), client.ObjectKey{Namespace: name, Name: cm}, &corev1.ConfigMap{})
					switch {
					case present && err != nil:
						return fmt.Errorf("%s: ConfigMap %s/%s: %w", cluster, name, cm, err)
					case !present && !apierrors.IsNotFound(err):
						return fmt.Errorf("%s: ConfigMap %s/%s should be gone (err %v)", cluster, name, cm, err)
					}
				}
			}
			return nil
		}
	}

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				// The plan-only roles plan a create.
				PreConfig:          asPlan,
				Config:             config(bed.kubeconfig["plan"], v1),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				// They cannot apply: the first write (the Lease) is refused, and the diagnostic
				// says who may not do what, where.
				PreConfig:   asPlan,
				Config:      config(bed.kubeconfig["plan"], v1),
				ExpectError: regexp.MustCompile(`(?s)cannot\s+get\s+resource\s+"leases"\s+in\s+API\s+group\s+"coordination\.k8s\.io"`),
			},
			{
				PreConfig: asApply,
				Config:    config(bed.kubeconfig["apply"], v1),
				Check:     resource.ComposeTestCheckFunc(configMaps(map[string]bool{"settings": true, "extra": true}), bed.events(t)),
			},
			{
				// Refreshed by the plan-only roles (records read, drift by dry run): nothing to do,
				// and no cluster set aside as unreadable (a refused drift dry run would do that,
				// with a warning only).
				PreConfig:        asPlan,
				Config:           config(bed.kubeconfig["plan"], v1),
				PlanOnly:         true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{noneSkipped{}}},
			},
			{
				// A change, planned by them (the bundle checked against the clusters).
				PreConfig:          asPlan,
				Config:             config(bed.kubeconfig["plan"], v2),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks:   resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{noneSkipped{}}},
			},
			{
				// Applied by the apply roles: a ConfigMap changed, one pruned. The destroy that
				// ends the test runs with them too.
				PreConfig: asApply,
				Config:    config(bed.kubeconfig["apply"], v2),
				Check:     configMaps(map[string]bool{"settings": true, "extra": false}),
			},
		},
	})
}

// noneSkipped checks that the plan's prior (refreshed) state of gradual_rollout.test skips no
// cluster: a cluster the refresh cannot read (an RBAC refusal among others) is skipped with the
// reason, which fails no plan by itself.
type noneSkipped struct{}

func (noneSkipped) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	values := rolloutStateValues(req.Plan.PriorState)
	if values == nil {
		resp.Error = fmt.Errorf("the plan's prior state has no gradual_rollout.test")
		return
	}
	if skipped, _ := values["skipped"].(map[string]any); len(skipped) > 0 {
		resp.Error = fmt.Errorf("the refresh skipped clusters: %v", skipped)
	}
}

// rbacBundle is a Namespace and its ConfigMaps: the kinds the guide's example bundle roles cover.
func rbacBundle(ns, setting string, extra bool) string {
	out := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %[1]s\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: %[1]s\ndata:\n  setting: %[2]q\n", ns, setting)
	if extra {
		out += fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: %s\n", ns)
	}
	return out
}

// rbacBed is what setUpRBAC made: the namespaces and, per identity ("plan", "apply"), the
// management kubeconfig and each workload cluster's kubeconfig.
type rbacBed struct {
	f                  *testbed.Fleet
	namespace, records string
	kubeconfig         map[string]string            // identity -> management kubeconfig path
	workload           map[string]map[string][]byte // identity -> cluster -> kubeconfig
}

// use returns a PreConfig that points the Clusters' kubeconfig Secrets at identity's tokens.
func (b *rbacBed) use(t *testing.T, identity string) func() {
	return func() {
		mc, err := b.f.ManagementClient()
		if err != nil {
			t.Fatal(err)
		}
		for _, cluster := range rbacClusters {
			writeKubeconfigSecret(t, mc, b.namespace, cluster, b.workload[identity][cluster])
		}
	}
}

// events checks that the run wrote its Events on the management record (the rule on events in
// gradual-apply-records): an Event that cannot be written is dropped without failing the run, so
// only this check notices a missing rule.
func (b *rbacBed) events(t *testing.T) resource.TestCheckFunc {
	return func(*terraform.State) error {
		mc, err := b.f.ManagementClient()
		if err != nil {
			return err
		}
		var list corev1.EventList
		if err := mc.List(context.Background(), &list, client.InNamespace(b.records)); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Reason == records.EventReasonSucceeded {
				return nil
			}
		}
		t.Logf("Events in %s: %d", b.records, len(list.Items))
		return fmt.Errorf("no %s Event in the record namespace %s", records.EventReasonSucceeded, b.records)
	}
}

// setUpRBAC makes, with the admin's credentials: the guide's ClusterRoles in every cluster, a
// ServiceAccount per identity bound to them as the guide says, copies of rbacClusters in a
// namespace of their own, and kubeconfigs carrying the ServiceAccounts' tokens. Everything
// namespaced is deleted at the end; the ClusterRoles stay (the same on every run).
func setUpRBAC(t *testing.T, f *testbed.Fleet, name string) *rbacBed {
	t.Helper()
	ctx := context.Background()
	b := &rbacBed{f: f, namespace: name, records: name + "-records",
		kubeconfig: map[string]string{}, workload: map[string]map[string][]byte{"plan": {}, "apply": {}}}
	roles := func(file string) []*unstructured.Unstructured { return guideRoles(t, file) }

	// The management cluster.
	mgmtCfg, err := f.Management.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{b.namespace, b.records} {
		createNamespace(t, mc, ns)
	}
	applyAll(t, mc, append(roles("management-plan.yaml"), roles("management-apply.yaml")...))
	for _, cluster := range rbacClusters {
		copyCluster(t, mc, f.Namespace, b.namespace, cluster)
	}
	mgmtBindings := map[string][]binding{
		"plan":  {{role: "gradual-plan-namespaces"}, {role: "gradual-plan-fleet", namespace: b.namespace}, {role: "gradual-plan-records", namespace: b.records}},
		"apply": {{role: "gradual-apply-namespaces"}, {role: "gradual-plan-fleet", namespace: b.namespace}, {role: "gradual-apply-records", namespace: b.records}},
	}
	for identity, bindings := range mgmtBindings {
		token := serviceAccountToken(t, mc, mgmtCfg, name, identity, bindings)
		path := filepath.Join(t.TempDir(), identity+".kubeconfig")
		if err := os.WriteFile(path, tokenKubeconfig(t, mgmtCfg, token), 0o600); err != nil {
			t.Fatal(err)
		}
		b.kubeconfig[identity] = path
	}

	// Each workload cluster.
	for _, cluster := range rbacClusters {
		w, ok := f.Workloads[cluster]
		if !ok {
			t.Fatalf("the fleet has no workload %s", cluster)
		}
		cfg, err := w.RESTConfig()
		if err != nil {
			t.Fatal(err)
		}
		wc := workloadClient(t, f, cluster)
		createNamespace(t, wc, b.records)
		applyAll(t, wc, append(append(roles("workload-plan.yaml"), roles("workload-apply.yaml")...), roles("workload-bundle.yaml")...))
		bindings := map[string][]binding{
			"plan": {{role: "gradual-plan-workload-cluster"}, {role: "gradual-plan-workload-records", namespace: b.records}, {role: "gradual-plan-bundle"}},
			"apply": {{role: "gradual-apply-workload-cluster"}, {role: "gradual-apply-workload-records", namespace: b.records}, {role: "gradual-apply-bundle"},
				{role: "gradual-apply-bundle-namespace-content"}},
		}
		for identity, bs := range bindings {
			token := serviceAccountToken(t, wc, cfg, name, identity, bs)
			b.workload[identity][cluster] = tokenKubeconfig(t, cfg, token)
		}
		t.Cleanup(func() {
			for _, ns := range []string{b.records, name} {
				_ = wc.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			}
		})
	}
	t.Cleanup(func() {
		for _, ns := range []string{b.namespace, b.records} {
			_ = mc.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
	})
	return b
}

// guideRoles are the ClusterRoles of the RBAC guide's file (in rbacGuideDir).
func guideRoles(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(rbacGuideDir, file))
	if err != nil {
		t.Fatal(err)
	}
	set, err := manifest.Parse(string(raw))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return set.Objects
}

// binding binds role to a ServiceAccount: in namespace (a RoleBinding), or everywhere (a
// ClusterRoleBinding) when namespace is "".
type binding struct{ role, namespace string }

// serviceAccountToken makes ServiceAccount <name>-<identity> in the default namespace, binds
// it, and returns a token for it from the TokenRequest API.
func serviceAccountToken(t *testing.T, c client.Client, cfg *rest.Config, name, identity string, bindings []binding) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + identity, Namespace: "default"}}
	if err := c.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}
	var made []client.Object
	for _, bd := range bindings {
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: bd.role}
		meta := metav1.ObjectMeta{Name: sa.Name + "-" + bd.role, Namespace: bd.namespace}
		var obj client.Object = &rbacv1.RoleBinding{ObjectMeta: meta, Subjects: subject, RoleRef: ref}
		if bd.namespace == "" {
			obj = &rbacv1.ClusterRoleBinding{ObjectMeta: meta, Subjects: subject, RoleRef: ref}
		}
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		made = append(made, obj)
	}
	t.Cleanup(func() {
		for _, obj := range append(made, sa) {
			_ = c.Delete(context.Background(), obj)
		}
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(time.Hour / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// tokenKubeconfig is a kubeconfig for cfg's server (its CA inline) authenticating with token.
func tokenKubeconfig(t *testing.T, cfg *rest.Config, token string) []byte {
	t.Helper()
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	out := clientcmdapi.NewConfig()
	out.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: ca}
	out.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	out.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	out.CurrentContext = "c"
	raw, err := clientcmd.Write(*out)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// copyCluster copies Cluster name, spec and status, from namespace from to namespace to.
func copyCluster(t *testing.T, mc client.Client, from, to, name string) {
	t.Helper()
	ctx := context.Background()
	src := &unstructured.Unstructured{}
	src.SetGroupVersionKind(clusterGVK)
	if err := mc.Get(ctx, client.ObjectKey{Namespace: from, Name: name}, src); err != nil {
		t.Fatal(err)
	}
	dst := &unstructured.Unstructured{Object: map[string]any{"spec": src.Object["spec"]}}
	dst.SetGroupVersionKind(clusterGVK)
	dst.SetNamespace(to)
	dst.SetName(name)
	dst.SetLabels(src.GetLabels())
	if err := mc.Create(ctx, dst); err != nil {
		t.Fatal(err)
	}
	dst.Object["status"] = src.Object["status"]
	if err := mc.Status().Update(ctx, dst); err != nil {
		t.Fatal(err)
	}
}

// clusterGVK is the version of Cluster the test bed serves and writes.
var clusterGVK = schema.GroupVersionKind{Group: fleet.ClusterAPIGroup, Version: "v1beta2", Kind: "Cluster"}

// writeKubeconfigSecret writes the <cluster>-kubeconfig Secret the provider reads.
func writeKubeconfigSecret(t *testing.T, mc client.Client, namespace, cluster string, kubeconfig []byte) {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{}
	err := mc.Get(ctx, client.ObjectKey{Namespace: namespace, Name: fleet.KubeconfigSecretName(cluster)}, s)
	switch {
	case apierrors.IsNotFound(err):
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fleet.KubeconfigSecretName(cluster), Namespace: namespace,
			Labels: map[string]string{"cluster.x-k8s.io/cluster-name": cluster}},
			Type: "cluster.x-k8s.io/secret", Data: map[string][]byte{fleet.KubeconfigSecretKey: kubeconfig}}
		err = mc.Create(ctx, s)
	case err == nil:
		s.Data = map[string][]byte{fleet.KubeconfigSecretKey: kubeconfig}
		err = mc.Update(ctx, s)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func createNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// applyAll writes objs by server-side apply (the ClusterRoles are the same on every run).
func applyAll(t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("gradual-acc-rbac"), client.ForceOwnership); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}
