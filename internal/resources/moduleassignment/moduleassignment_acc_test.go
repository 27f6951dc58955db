package moduleassignment_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

func TestMain(m *testing.M) { acctest.Main(m) }

// module is one `modules` entry.
type module struct {
	name, version, manifests string
	dependsOn                []string
	defaultNamespace         string // "" for none
}

func assignmentConfig(f *testbed.Fleet, resName, name, label, extra string, mods ...module) string {
	var b strings.Builder
	for _, m := range mods {
		deps := ""
		if len(m.dependsOn) > 0 {
			deps = fmt.Sprintf("depends_on = [%q]", strings.Join(m.dependsOn, `", "`))
		}
		if m.defaultNamespace != "" {
			deps += fmt.Sprintf("\n      default_namespace = %q", m.defaultNamespace)
		}
		fmt.Fprintf(&b, "    {\n      name = %q\n      version = %q\n      %s\n      manifests = <<-EOT\n%s      EOT\n    },\n", m.name, m.version, deps, indent(m.manifests, "        "))
	}
	return fmt.Sprintf(`
resource "gradual_module_assignment" %q {
  name      = %q
  namespace = %q
  selector  = { match_labels = { %q = "yes" } }
  verify    = { timeout = "60s" }
  modules = [
%s  ]
  %s
}
`, resName, name, f.Namespace, label, b.String(), extra)
}

func indent(s, prefix string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(prefix + line + "\n")
	}
	return b.String()
}

// configMaps is a namespace and a ConfigMap per name, each holding setting.
func configMaps(ns, setting string, names ...string) string {
	out := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns)
	for _, n := range names {
		out += fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  setting: %q\n", n, ns, setting)
	}
	return out
}

// deployment is a Deployment kwok really rolls out; broken never becomes available.
func deployment(ns, name, version string, broken bool) string {
	nodeSelector := ""
	if broken {
		nodeSelector = "      nodeSelector: {gradual.dev/no-such-node: \"true\"}\n"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  replicas: 1
  progressDeadlineSeconds: 10
  selector:
    matchLabels: {app: %[2]s}
  template:
    metadata:
      labels: {app: %[2]s}
    spec:
%[4]s      containers:
        - name: web
          image: registry.example/web:%[3]s
`, ns, name, version, nodeSelector)
}

// labeler sets and clears a test-only label on clusters, restoring them when the test ends.
type labeler struct {
	t     *testing.T
	f     *testbed.Fleet
	label string
}

func newLabeler(t *testing.T, f *testbed.Fleet, label string, clusters ...string) *labeler {
	l := &labeler{t: t, f: f, label: label}
	t.Cleanup(func() {
		for name := range f.Workloads {
			l.set(name, false)
		}
	})
	for _, c := range clusters {
		l.set(c, true)
	}
	return l
}

func (l *labeler) set(cluster string, on bool) {
	l.t.Helper()
	labels := map[string]string{}
	for k, v := range l.f.Workloads[cluster].Spec.Labels {
		labels[k] = v
	}
	if on {
		labels[l.label] = "yes"
	} else if _, had := labels[l.label]; !had {
		return
	} else {
		delete(labels, l.label)
	}
	if err := l.f.SetLabels(context.Background(), cluster, labels); err != nil {
		l.t.Fatal(err)
	}
}

func cmSetting(f *testbed.Fleet, cluster, ns, name string) (string, error) {
	c, err := f.WorkloadClient(cluster)
	if err != nil {
		return "", err
	}
	var cm corev1.ConfigMap
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return "<none>", nil
		}
		return "", err
	}
	return cm.Data["setting"], nil
}

func expectSetting(f *testbed.Fleet, cluster, ns, name, want string) error {
	got, err := cmSetting(f, cluster, ns, name)
	if err != nil {
		return fmt.Errorf("%s: %w", cluster, err)
	}
	if got != want {
		return fmt.Errorf("%s: ConfigMap %s/%s setting %q, want %q", cluster, ns, name, got, want)
	}
	return nil
}

// statusConfig is a gradual_module_assignment_status data source named resName reading the
// assignment resName, after it applies.
func statusConfig(f *testbed.Fleet, resName, name string) string {
	return fmt.Sprintf(`
data "gradual_module_assignment_status" %[1]q {
  namespace  = %[2]q
  name       = %[3]q
  depends_on = [gradual_module_assignment.%[1]s]
}
`, resName, f.Namespace, name)
}

// bindingCheck checks, in the gradual_module_assignment_status data source named after the
// resource res, that cluster's binding at index has module and result.
func bindingCheck(res, cluster string, index int, module, result string) resource.TestCheckFunc {
	ds := "data.gradual_module_assignment_status." + strings.TrimPrefix(res, "gradual_module_assignment.")
	return func(s *terraform.State) error {
		rs, ok := s.RootModule().Resources[ds]
		if !ok {
			return fmt.Errorf("%s not in state", ds)
		}
		a := rs.Primary.Attributes
		for i := 0; a[fmt.Sprintf("clusters.%d.name", i)] != ""; i++ {
			if a[fmt.Sprintf("clusters.%d.name", i)] != cluster {
				continue
			}
			prefix := fmt.Sprintf("clusters.%d.bindings.%d.", i, index)
			if a[prefix+"module"] != module || a[prefix+"result"] != result || a[prefix+"revision"] == "" {
				return fmt.Errorf("%s: binding %d on %s is module %q result %q revision %q, want %s %s", ds, index, cluster,
					a[prefix+"module"], a[prefix+"result"], a[prefix+"revision"], module, result)
			}
			if result == "applied" && a[prefix+"applied_at"] == "" {
				return fmt.Errorf("%s: binding %d on %s has no applied_at", ds, index, cluster)
			}
			return nil
		}
		return fmt.Errorf("%s lists no cluster %s: %v", ds, cluster, a)
	}
}

// summaryIs checks the assignment's `summary` and that `attention` is empty (every cluster fine).
func summaryIs(res string, want map[string]int64) statecheck.StateCheck {
	checks := map[string]knownvalue.Check{}
	for k, v := range want {
		checks[k] = knownvalue.Int64Exact(v)
	}
	return statecheck.ExpectKnownValue(res, tfjsonpath.New("summary"), knownvalue.MapExact(checks))
}

func noAttention(res string) statecheck.StateCheck {
	return statecheck.ExpectKnownValue(res, tfjsonpath.New("attention"), knownvalue.MapExact(map[string]knownvalue.Check{}))
}

// wavesAre checks the plan shows module's waves as this text.
func wavesAre(res, module, text string) plancheck.PlanCheck {
	return plancheck.ExpectKnownValue(res, tfjsonpath.New("waves").AtMapKey(module), knownvalue.StringExact(text))
}

// attentionBefore checks that the plan's prior (refreshed) state of res has an `attention`
// entry for cluster containing every string of want: what a reviewer reads in the plan.
type attentionBefore struct {
	res, cluster string
	want         []string
}

func (a attentionBefore) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != a.res || rc.Change == nil {
			continue
		}
		before, _ := rc.Change.Before.(map[string]any)
		attention, _ := before["attention"].(map[string]any)
		note, _ := attention[a.cluster].(string)
		for _, w := range a.want {
			if !strings.Contains(note, w) {
				resp.Error = fmt.Errorf("attention for %s before the plan is %q, want it to contain %q (attention: %v)", a.cluster, note, w, attention)
				return
			}
		}
		return
	}
	resp.Error = fmt.Errorf("the plan has no change to %s", a.res)
}

const res = "gradual_module_assignment.test"

// ApplyOnce: a module goes once to each matching cluster; a later change of the module is not
// re-applied to the cluster that has it (the plan warns), but a cluster that joins gets the new
// version; a cluster that stops matching loses the module (deletion_policy = delete).
func TestAccModuleAssignment_applyOnceJoinLeave(t *testing.T) {
	acctest.OnOneLane(t, 0)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("once")
	l := newLabeler(t, f, name, "prod-eu-1")
	v1 := module{name: "cfg", version: "1.0.0", manifests: configMaps(name, "v1", "settings")}
	v2 := module{name: "cfg", version: "2.0.0", manifests: configMaps(name, "v2", "settings")}
	once := `mode = "ApplyOnce"`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			return expectSetting(f, "prod-eu-1", name, "settings", "<none>")
		},
		Steps: []resource.TestStep{
			{
				Config: acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, once, v1) + statusConfig(f, "test", name),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					// A create has no state to plan from: the waves are known after apply.
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("waves")),
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("summary")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{summaryIs(res, map[string]int64{"current": 1}), noAttention(res),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("waves"), knownvalue.MapExact(map[string]knownvalue.Check{
						"cfg": knownvalue.StringExact("1 wave of 1 cluster"),
					}))},
				Check: resource.ComposeAggregateTestCheckFunc(bindingCheck(res, "prod-eu-1", 0, "cfg", "applied"),
					func(*terraform.State) error { return expectSetting(f, "prod-eu-1", name, "settings", "v1") }),
			},
			{
				ResourceName: res, ImportState: true, ImportStateId: f.Namespace + "/" + name,
				ImportStateVerify: true, ImportStateVerifyIdentifierAttribute: "id", ImportStateVerifyIgnore: []string{"timeouts", "waves"},
			},
			{
				// The module changes and prod-us-1 joins: prod-eu-1 keeps v1, prod-us-1 gets v2.
				PreConfig: func() { l.set("prod-us-1", true) },
				Config:    acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, once, v2) + statusConfig(f, "test", name),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					// One wave, to the cluster that joined (ApplyOnce: prod-eu-1 keeps v1); the
					// plan names it as joining. Where clusters end up is known after apply.
					wavesAre(res, "cfg", "1 wave of 1 cluster"),
					attentionBefore{res: res, cluster: "prod-us-1", want: []string{"joining"}},
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("summary")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{summaryIs(res, map[string]int64{"current": 1, "kept": 1}), noAttention(res)},
				Check: resource.ComposeAggregateTestCheckFunc(
					bindingCheck(res, "prod-eu-1", 0, "cfg", "applied"), bindingCheck(res, "prod-us-1", 0, "cfg", "applied"),
					func(*terraform.State) error {
						if err := expectSetting(f, "prod-eu-1", name, "settings", "v1"); err != nil {
							return err
						}
						return expectSetting(f, "prod-us-1", name, "settings", "v2")
					}),
			},
			{
				// prod-us-1 leaves: its module is deleted and its binding dropped.
				PreConfig: func() { l.set("prod-us-1", false) },
				Config:    acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, once, v2) + statusConfig(f, "test", name),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					attentionBefore{res: res, cluster: "prod-us-1", want: []string{"leaving", "deletion_policy"}},
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					summaryIs(res, map[string]int64{"kept": 1}), noAttention(res),
					statecheck.ExpectKnownValue("data.gradual_module_assignment_status.test", tfjsonpath.New("clusters"), knownvalue.ListSizeExact(1)),
				},
				Check: func(*terraform.State) error {
					if err := expectSetting(f, "prod-us-1", name, "settings", "<none>"); err != nil {
						return err
					}
					return expectSetting(f, "prod-eu-1", name, "settings", "v1")
				},
			},
		},
	})
}

// Reconcile: a module change goes out in waves of one cluster, each verified; drift (an object
// deleted by hand) shows in the plan and is repaired; a cluster that leaves with
// deletion_policy = orphan keeps its objects.
func TestAccModuleAssignment_reconcileDriftOrphan(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("recon")
	l := newLabeler(t, f, name, "prod-eu-1", "prod-us-1")
	mod := func(v string) module {
		return module{name: "web", version: v, manifests: deployment(name, "web", v, false) + "---\n" + strings.TrimPrefix(configMaps(name, v, "settings"), fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n---\n", name))}
	}
	extra := `update_limit = "1"
  deletion_policy = "orphan"`
	cfg := func(v string) string {
		return acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, extra, mod(v))
	}
	modKey := records.Key{Kind: "module", Namespace: f.Namespace, Name: name + ".web"}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: cfg("v1")},
			{
				Config: cfg("v2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					// A revision change of web: two waves of one cluster, known at plan.
					wavesAre(res, "web", "2 waves of 1 cluster"),
				}},
				ConfigStateChecks: []statecheck.StateCheck{summaryIs(res, map[string]int64{"current": 2}), noAttention(res)},
				Check: func(*terraform.State) error {
					for _, c := range []string{"prod-eu-1", "prod-us-1"} {
						if err := expectSetting(f, c, name, "settings", "v2"); err != nil {
							return err
						}
					}
					return expectOneAtATime(f, modKey, []string{"prod-eu-1", "prod-us-1"})
				},
			},
			{
				PreConfig: func() {
					c, err := f.WorkloadClient("prod-eu-1")
					if err != nil {
						t.Fatal(err)
					}
					if err := c.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: name}}); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg("v2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					// The plan names the drifted cluster, module and object, and repairs only it.
					attentionBefore{res: res, cluster: "prod-eu-1", want: []string{"drifted", "module web", "ConfigMap " + name + "/settings"}},
					wavesAre(res, "web", "1 wave of 1 cluster"),
				}},
				ConfigStateChecks: []statecheck.StateCheck{summaryIs(res, map[string]int64{"current": 2}), noAttention(res)},
				Check:             func(*terraform.State) error { return expectSetting(f, "prod-eu-1", name, "settings", "v2") },
			},
			{
				PreConfig: func() { l.set("prod-us-1", false) },
				Config:    cfg("v2"),
				Check: func(*terraform.State) error {
					if err := expectSetting(f, "prod-us-1", name, "settings", "v2"); err != nil {
						return fmt.Errorf("orphaned objects should stay: %w", err)
					}
					c, _ := f.WorkloadClient("prod-us-1")
					state, err := records.NewWorkloadStore(c, "").Load(context.Background(), modKey)
					if err != nil {
						return err
					}
					if state.Current != nil {
						return fmt.Errorf("prod-us-1 keeps records after leaving: %+v", state.Current)
					}
					return nil
				},
			},
		},
	})
}

// expectOneAtATime checks from the module's progress record that no two clusters changed at once.
func expectOneAtATime(f *testbed.Fleet, key records.Key, clusters []string) error {
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	p, err := records.NewManagementStore(mc, "").LoadProgress(context.Background(), key)
	if err != nil || p == nil {
		return fmt.Errorf("progress record of %s: %v (%v)", key, p, err)
	}
	a, b := p.Clusters[clusters[0]], p.Clusters[clusters[1]]
	if a.StartedAt.IsZero() || b.StartedAt.IsZero() {
		return fmt.Errorf("progress has no times: %+v", p.Clusters)
	}
	if a.StartedAt.After(b.StartedAt) {
		a, b = b, a
	}
	if b.StartedAt.Before(a.FinishedAt) {
		return fmt.Errorf("two clusters changed at once: %+v", p.Clusters)
	}
	return nil
}

// A module that fails verification is restored (its Deployment removed) and the module that
// depends on it is not applied there; the independent module is.
func TestAccModuleAssignment_failedModuleBlocksDependents(t *testing.T) {
	acctest.OnOneLane(t, 0)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("fail")
	newLabeler(t, f, name, "staging-eu-1")
	base := module{name: "base", version: "1", manifests: configMaps(name, "base", "base")}
	broken := module{name: "broken", version: "1", manifests: deployment(name, "broken", "v1", true), dependsOn: []string{"base"}}
	after := module{name: "after", version: "1", manifests: configMaps(name, "after", "after"), dependsOn: []string{"broken"}}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, "", after, broken, base),
				ExpectError: regexp.MustCompile(`(?s)Module Assignment Failed.*module broken`),
			},
			{
				PreConfig: func() {
					if err := expectSetting(f, "staging-eu-1", name, "base", "base"); err != nil {
						t.Fatal(err)
					}
					if err := expectSetting(f, "staging-eu-1", name, "after", "<none>"); err != nil {
						t.Fatal(err)
					}
					c, _ := f.WorkloadClient("staging-eu-1")
					err := c.Get(context.Background(), client.ObjectKey{Namespace: name, Name: "broken"}, &appsv1.Deployment{})
					if !apierrors.IsNotFound(err) {
						t.Fatalf("the failed module's Deployment should be restored away: %v", err)
					}
					mc, _ := f.ManagementClient()
					b, err := records.NewBindingStore(mc, "").List(context.Background(), records.Key{Kind: "module-assignment", Namespace: f.Namespace, Name: name})
					if err != nil {
						t.Fatal(err)
					}
					got := map[string]string{}
					for _, m := range b["staging-eu-1"] {
						got[m.Module] = string(m.Result)
					}
					if got["base"] != "applied" || got["broken"] != "failed" || got["after"] != "blocked" {
						t.Fatalf("bindings: %+v", b)
					}
				},
				// The failed revision is refused at plan time.
				Config:      acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, "", after, broken, base),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Revision Recorded Invalid.*of module`),
			},
		},
	})
}

// Two assignments bind the same cluster without clobbering each other's bindings; a module that
// would manage an object the other assignment manages is refused naming both.
func TestAccModuleAssignment_twoAssignmentsOneCluster(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("two")
	newLabeler(t, f, name, "staging-eu-1")
	a := module{name: "m", version: "1", manifests: configMaps(name+"-a", "a", "a")}
	b := module{name: "m", version: "1", manifests: configMaps(name+"-b", "b", "b")}
	claim := module{name: "steal", version: "1", manifests: strings.Replace(configMaps(name+"-a", "x", "a"), "kind: Namespace\nmetadata:\n  name: "+name+"-a", "kind: Namespace\nmetadata:\n  name: "+name+"-a", 1)}
	two := func(extra ...module) string {
		return acctest.ProviderConfig(f) + assignmentConfig(f, "a", name+"-a", name, "", a) + assignmentConfig(f, "b", name+"-b", name, "", append([]module{b}, extra...)...) +
			statusConfig(f, "a", name+"-a") + statusConfig(f, "b", name+"-b")
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: two(),
				Check: resource.ComposeAggregateTestCheckFunc(
					bindingCheck("gradual_module_assignment.a", "staging-eu-1", 0, "m", "applied"),
					bindingCheck("gradual_module_assignment.b", "staging-eu-1", 0, "m", "applied"),
					func(*terraform.State) error {
						if err := expectSetting(f, "staging-eu-1", name+"-a", "a", "a"); err != nil {
							return err
						}
						return expectSetting(f, "staging-eu-1", name+"-b", "b", "b")
					}),
			},
			{
				Config:      two(claim),
				ExpectError: regexp.MustCompile(`(?s)Object Claimed By Two Owners.*ConfigMap ` + name + `-a/a.*module-assignment ` + f.Namespace + `/` + name + `-a \(module m\)`),
			},
		},
	})
}

// Bad input is refused at plan time, before anything is read or applied.
func TestAccModuleAssignment_badInput(t *testing.T) {
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("bad")
	m := func(n string, deps ...string) module {
		return module{name: n, version: "1", manifests: configMaps(name, n, n), dependsOn: deps}
	}
	step := func(extra string, re string, mods ...module) resource.TestStep {
		return resource.TestStep{
			Config: acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, extra, mods...), PlanOnly: true,
			ExpectError: regexp.MustCompile(re),
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			return expectSetting(f, "staging-eu-1", name, "a", "<none>")
		},
		Steps: []resource.TestStep{
			step("", `(?s)Invalid Modules.*cycle: a → b → a`, m("a", "b"), m("b", "a")),
			step("", `(?s)Invalid Modules.*"a" is used more than once`, m("a"), m("a")),
			step("", `(?s)Invalid Modules.*depends on "zz"`, m("a", "zz")),
			step(`mode = "Sometimes"`, `(?s)mode.*Reconcile.*ApplyOnce`, m("a")),
			// Terraform would print it and keep it in state: refused, naming the Secret, not its data.
			step("", `(?s)Secret In Manifests.*`+name+`/db.*sensitive_manifests`, module{name: "s", version: "1",
				manifests: configMaps(name, "s", "s") + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: " + name + "}\nstringData: {p: x}\n"}),
		},
	})
}

// adopt = false: a module whose objects exist already on a cluster, made with kubectl, is
// refused at plan, naming the cluster, the object and its field manager.
func TestAccModuleAssignment_adoptFalseRefuses(t *testing.T) {
	acctest.OnOneLane(t, 0)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("noadopt")
	newLabeler(t, f, name, "staging-eu-1")
	acctest.Kubectl(t, f, "staging-eu-1", "create", "namespace", name)
	t.Cleanup(func() { acctest.Kubectl(t, f, "staging-eu-1", "delete", "namespace", name, "--wait=false") })
	acctest.Kubectl(t, f, "staging-eu-1", "create", "configmap", "pre", "-n", name, "--from-literal=setting=mine")
	m := module{name: "m", version: "1", manifests: configMaps(name, "ours", "pre")}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      acctest.ProviderConfig(f) + assignmentConfig(f, "a", name, name, "adopt = false", m),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)Objects Exist Already.*cluster\s+staging-eu-1:\s+ConfigMap\s+` + name + `/pre\s+\(managed\s+by\s+kubectl-create\)`),
		}},
	})
}
