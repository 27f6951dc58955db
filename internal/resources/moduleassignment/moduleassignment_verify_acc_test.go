package moduleassignment_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// withVerify is assignmentConfig's configuration with verify replaced by verify (which the
// plain one sets to a timeout alone).
func withVerify(config, verify string) string {
	return strings.Replace(config, `verify    = { timeout = "60s" }`, verify, 1)
}

// bindingsOf reads the assignment's bindings in the management cluster, by cluster and module.
func bindingsOf(t *testing.T, f *testbed.Fleet, name string) map[string]map[string]records.BindingResult {
	t.Helper()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	b, err := records.NewBindingStore(mc, "").List(context.Background(), records.Key{Kind: records.KindAssignment, Namespace: f.Namespace, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]records.BindingResult{}
	for cluster, bs := range b {
		out[cluster] = map[string]records.BindingResult{}
		for _, m := range bs {
			out[cluster][m.Module] = m.Result
		}
	}
	return out
}

// The plan's dry-run preview of the modules: a ValidatingAdmissionPolicy in prod-eu-1 rejects a
// ConfigMap of module app; the plan fails naming the cluster, the module, the object and the
// policy's message, and nothing is written (no object, no binding, no module record). With the
// policy gone the same configuration applies.
func TestAccModuleAssignment_previewRejects(t *testing.T) {
	acctest.OnOneLane(t, 1) // what the provider asks the fleet at plan time, not how a CLI drives it
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("mapreview")
	clusters := []string{"prod-eu-1", "prod-us-1"}
	newLabeler(t, f, name, clusters...)
	// In namespace default, which exists, so the dry-run reaches admission (an object in a
	// namespace the bundle brings is counted created without the server's word).
	cm := func(cmName string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: default}\ndata: {setting: v1}\n", cmName)
	}
	base := module{name: "base", version: "1", manifests: cm(name + "-base")}
	app := module{name: "app", version: "1", manifests: cm(name), dependsOn: []string{"base"}}
	// Both clusters in the first wave of each module: the default preview ("canary") asks both.
	config := acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, `update_limit = "2"`, base, app)
	wc, err := f.WorkloadClient("prod-eu-1")
	if err != nil {
		t.Fatal(err)
	}
	removePolicy := acctest.DenyConfigMap(t, wc, name)
	nothingWritten := func() {
		for _, c := range clusters {
			for _, n := range []string{name, name + "-base"} {
				if err := expectSetting(f, c, "default", n, "<none>"); err != nil {
					t.Fatalf("written by a refused plan: %v", err)
				}
			}
			wc, err := f.WorkloadClient(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []string{"base", "app"} {
				st, err := records.NewWorkloadStore(wc, "").LoadCurrent(context.Background(), records.Key{Kind: records.KindModule, Namespace: f.Namespace, Name: name + "." + m})
				if err != nil || st.Current != nil || st.Provisioning != nil {
					t.Fatalf("%s: module %s records written by a refused plan: %+v (%v)", c, m, st, err)
				}
			}
		}
		if b := bindingsOf(t, f, name); len(b) > 0 {
			t.Fatalf("bindings written by a refused plan: %v", b)
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy:             func(*terraform.State) error { return expectSetting(f, "prod-us-1", "default", name, "<none>") },
		Steps: []resource.TestStep{
			{
				Config: config,
				ExpectError: regexp.MustCompile(`(?s)Manifests Rejected By The API Server.*` +
					acctest.Words("prod-eu-1: module app: ConfigMap default/"+name+":") + `.*` + acctest.Words(acctest.DeniedMessage(name))),
			},
			{
				PreConfig: func() {
					nothingWritten()
					removePolicy()
				},
				Config:            config,
				ConfigStateChecks: []statecheck.StateCheck{summaryIs(res, map[string]int64{"current": 2})},
				Check: func(*terraform.State) error {
					for _, c := range clusters {
						if err := expectSetting(f, c, "default", name, "v1"); err != nil {
							return err
						}
					}
					return nil
				},
			},
		},
	})
}

// checkJobConfig is verify with a check Job in namespace ns that kwok runs on a node whose
// kubernetes.io/os label is the cluster's variable os (a template: $${ is ${ in HCL): "linux"
// completes at once; anything else never schedules, and the Job fails at its deadline.
func checkJobConfig(ns string) string {
	job := fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: smoke, namespace: %s}
spec:
  backoffLimit: 0
  activeDeadlineSeconds: 3
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {kubernetes.io/os: "$${os}"}
      containers: [{name: smoke, image: registry.example/smoke:1}]
`, ns)
	return fmt.Sprintf(`verify = {
    timeout   = "60s"
    check_job = {
      timeout  = "30s"
      manifest = <<-EOT
%s      EOT
    }
  }`, indent(job, "        "))
}

// verify.check_job on a module assignment, rendered with each cluster's values: a variable the
// Job uses that a cluster lacks fails the plan naming the cluster and the variable; a Job that
// completes on every cluster lets the modules through and is deleted; one that fails on one
// cluster (its rendering there cannot schedule) fails the last module there alone, which is
// restored, naming the Job and its condition, while the other cluster keeps the new modules.
func TestAccModuleAssignment_checkJob(t *testing.T) {
	acctest.OnOneLane(t, 0) // what the provider verifies, not how a CLI drives it
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("majob")
	clusters := []string{"prod-eu-1", "prod-us-1"}
	newLabeler(t, f, name, clusters...)
	mods := func(setting string) []module {
		return []module{
			{name: "base", version: "1", manifests: configMaps(name, "v1", "base")},
			{name: "app", version: "1", manifests: fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: %s}\ndata: {setting: %s}\n", name, setting), dependsOn: []string{"base"}},
		}
	}
	config := func(setting, values string) string {
		return acctest.ProviderConfig(f) + withVerify(assignmentConfig(f, "test", name, name, `update_limit = "2"`+"\n  values = "+values, mods(setting)...), checkJobConfig(name))
	}
	jobGone := func() error {
		for _, c := range clusters {
			wc, err := f.WorkloadClient(c)
			if err != nil {
				return err
			}
			if err := wc.Get(context.Background(), client.ObjectKey{Namespace: name, Name: "smoke"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: check Job %s/smoke: want it deleted, got err %v", c, name, err)
			}
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy:             func(*terraform.State) error { return expectSetting(f, "prod-eu-1", name, "app", "<none>") },
		Steps: []resource.TestStep{
			{
				Config:      config("v1", `{ clusters = { "prod-eu-1" = { os = "linux" } } }`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Missing Variable.*` + acctest.Words("prod-us-1: verify.check_job: variable os not set")),
			},
			{
				Config:            config("v1", `{ clusters = { "prod-eu-1" = { os = "linux" }, "prod-us-1" = { os = "linux" } } }`),
				ConfigStateChecks: []statecheck.StateCheck{summaryIs(res, map[string]int64{"current": 2}), noAttention(res)},
				Check: func(*terraform.State) error {
					for _, c := range clusters {
						if err := expectSetting(f, c, name, "app", "v1"); err != nil {
							return err
						}
					}
					return jobGone()
				},
			},
			{
				Config: config("v2", `{ clusters = { "prod-eu-1" = { os = "linux" }, "prod-us-1" = { os = "plan9" } } }`),
				ExpectError: regexp.MustCompile(`(?s)Module Assignment Failed.*module app.*prod-us-1.*` +
					acctest.Words("check Job "+name+"/smoke failed: Failed (DeadlineExceeded)")),
			},
			{
				PreConfig: func() {
					if err := jobGone(); err != nil {
						t.Fatal(err)
					}
					// prod-eu-1 took v2; prod-us-1 failed the Job after app: app is restored there.
					if err := expectSetting(f, "prod-eu-1", name, "app", "v2"); err != nil {
						t.Fatal(err)
					}
					if err := expectSetting(f, "prod-us-1", name, "app", "v1"); err != nil {
						t.Fatal(err)
					}
					if b := bindingsOf(t, f, name); b["prod-eu-1"]["app"] != records.BindingApplied || b["prod-us-1"]["app"] != records.BindingFailed ||
						b["prod-us-1"]["base"] != records.BindingApplied {
						t.Fatalf("bindings %v: want app applied on prod-eu-1, failed on prod-us-1 (base applied)", b)
					}
				},
				Config:   config("v2", `{ clusters = { "prod-eu-1" = { os = "linux" }, "prod-us-1" = { os = "plan9" } } }`),
				PlanOnly: true,
			},
		},
	})
}
