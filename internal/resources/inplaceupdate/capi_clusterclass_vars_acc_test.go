package inplaceupdate_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// topologyVarsCluster is an in-memory cluster built from ClusterClass topologyClass like
// topologyCluster, for TestAccCAPIInPlace_topologyVariables alone (no test label: no fleet
// test picks it). provision creates it with the shared fleet, on both lanes.
const topologyVarsCluster = "mem-topo-vars"

var topologyVarsInMemory = testbed.InMemoryCluster{Name: topologyVarsCluster, Class: topologyClass, ControlPlaneVersion: "v1.34.2", InPlaceRollout: true}

func topologyVarsConfig(f *testbed.Fleet, vars string) string {
	return acctest.ProviderConfig(f) + fmt.Sprintf(`
data "gradual_inplace_update_plan" "vars" {
  namespace            = %[1]q
  cluster              = %[2]q
  update_control_plane = true
  topology_variables   = %[3]s
  fallback             = "rolling"
}

resource "gradual_inplace_update" "vars" {
  namespace            = %[1]q
  cluster              = %[2]q
  update_control_plane = true
  topology_variables   = %[3]s
  fallback             = "rolling"
  verify               = { timeout = "4m" }
}
`, testbed.DefaultClusterAPINamespace, topologyVarsCluster, vars)
}

var kubeadmConfigTemplateGVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfigTemplate"}
var kubeadmConfigGVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}

// workerNote is the content of testbed.WorkerNoteFile in the files of a KubeadmConfigTemplate's
// template spec or a KubeadmConfig's spec (field: the path to the files), "" when there is none.
func workerNote(ctx context.Context, mc client.Client, gvk schema.GroupVersionKind, name string, field ...string) (string, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := mc.Get(ctx, client.ObjectKey{Namespace: testbed.DefaultClusterAPINamespace, Name: name}, u); err != nil {
		return "", err
	}
	files, _, _ := unstructured.NestedSlice(u.Object, field...)
	for _, f := range files {
		if m, ok := f.(map[string]any); ok && m["path"] == testbed.WorkerNoteFile {
			s, _ := m["content"].(string)
			return s, nil
		}
	}
	return "", nil
}

// clusterVariable is the Cluster's spec.topology.variables value of name (raw JSON).
func clusterVariable(cl *clusterv1.Cluster, name string) string {
	for _, v := range cl.Spec.Topology.Variables {
		if v.Name == name {
			return string(v.Value.Raw)
		}
	}
	return ""
}

// Named topology variables through the resource, on the real Cluster API controllers and
// webhooks, on every CLI: a variable the ClusterClass does not define is refused at plan, naming
// it and the class's variables, and a value against the variable's schema is refused at plan by
// Cluster API's own Cluster webhook (the server-side dry run), both with nothing written to the
// Cluster (its generation, revision annotation and variables unchanged). Then workerNote, which
// the ClusterClass's patch writes into the workers' KubeadmConfigTemplate as a file, is changed
// alone (no version): the preview shows every machine unchanged (it cannot run the patches; the
// plan warns so), apply writes the variable to the Cluster, and Cluster API carries it out: the
// topology controller reconciles (TopologyReconciled True), the MachineDeployment's bootstrap
// template carries the new file content, the worker Machine's KubeadmConfig too, and the
// Machines are what Cluster API made of it, logged beside the plan: the worker kept (same UID),
// updated in place by the test extension, which covers KubeadmConfigSpec.Files, and `status`
// says `updated`; the control plane, which the patch does not touch, kept and `unchanged`. The
// next plan is empty; once the variable is set back on the Cluster by hand, the next plan (after
// its refresh) updates the resource again and warns, naming the cluster and both values.
func TestAccCAPIInPlace_topologyVariables(t *testing.T) {
	f, mc := capiFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	t0 := time.Now()
	if err := f.CreateClusterClass(ctx, topologyClass); err != nil {
		t.Fatal(err)
	}
	if err := f.ProvisionInMemory(ctx, topologyVarsInMemory); err != nil {
		t.Fatalf("provision %s from ClusterClass %s: %v", topologyVarsCluster, topologyClass, err)
	}
	playKubelet(t, mc, topologyVarsCluster)
	cpBefore, workerBefore := topologyMachines(t, mc, topologyVarsCluster)
	t.Logf("%s built from ClusterClass %s (waited %s)", topologyVarsCluster, topologyClass, time.Since(t0).Round(time.Second))
	readCluster := func() (*clusterv1.Cluster, error) {
		var cl clusterv1.Cluster
		err := mc.Get(context.Background(), client.ObjectKey{Namespace: testbed.DefaultClusterAPINamespace, Name: topologyVarsCluster}, &cl)
		return &cl, err
	}
	before, err := readCluster()
	if err != nil {
		t.Fatal(err)
	}
	if v := clusterVariable(before, testbed.WorkerNoteVariable); v != fmt.Sprintf("%q", testbed.WorkerNoteDefault) {
		t.Fatalf("%s starts with %s = %s, want %q", topologyVarsCluster, testbed.WorkerNoteVariable, v, testbed.WorkerNoteDefault)
	}
	untouched := func() error {
		now, err := readCluster()
		if err != nil {
			return err
		}
		// The controllers write the status meanwhile (resourceVersion moves): the spec's
		// generation and our revision annotation say whether anything wrote the Cluster.
		if now.Generation != before.Generation || now.Annotations[owners.AnnotationRevision] != before.Annotations[owners.AnnotationRevision] ||
			clusterVariable(now, testbed.WorkerNoteVariable) != clusterVariable(before, testbed.WorkerNoteVariable) {
			return fmt.Errorf("Cluster %s written by a refused plan: generation %d → %d, revision %q → %q, %s %s → %s", topologyVarsCluster, before.Generation, now.Generation,
				before.Annotations[owners.AnnotationRevision], now.Annotations[owners.AnnotationRevision], testbed.WorkerNoteVariable,
				clusterVariable(before, testbed.WorkerNoteVariable), clusterVariable(now, testbed.WorkerNoteVariable))
		}
		return nil
	}
	const note = "v2-" + "from-terraform"
	const res, plan = "gradual_inplace_update.vars", "data.gradual_inplace_update_plan.vars"
	warnings := &planWarnings{}
	var setBack time.Time
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: warnings.factories(),
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{
			{
				// A variable the ClusterClass does not define: refused by the provider, naming it.
				Config:      topologyVarsConfig(f, `{ workerNoet = jsonencode("x") }`),
				ExpectError: regexp.MustCompile(`Topology Variable Not In The ClusterClass(.|\n)*workerNoet(.|\n)*it\s+defines:\s+workerNote`),
			},
			{
				// A value against the variable's schema (a string of at most 63 characters):
				// refused by Cluster API's Cluster webhook in the dry run, quoted.
				PreConfig:   func() { mustNil(t, untouched()) },
				Config:      topologyVarsConfig(f, `{ workerNote = jsonencode(42) }`),
				ExpectError: regexp.MustCompile(`Cluster API Refuses The Topology Variables(.|\n)*must\s+be\s+of\s+type\s+string`),
			},
			{
				PreConfig: func() { mustNil(t, untouched()) },
				Config:    topologyVarsConfig(f, fmt.Sprintf(`{ %s = jsonencode(%q) }`, testbed.WorkerNoteVariable, note)),
				Check: func(s *terraform.State) error {
					attrs := s.RootModule().Resources[plan].Primary.Attributes
					preview := map[string]string{}
					for i := 0; attrs[fmt.Sprintf("machines.%d.name", i)] != ""; i++ {
						preview[attrs[fmt.Sprintf("machines.%d.name", i)]] = attrs[fmt.Sprintf("machines.%d.strategy", i)]
					}
					status := s.RootModule().Resources[res].Primary.Attributes
					cl, err := readCluster()
					if err != nil {
						return err
					}
					var errs []string
					if v := clusterVariable(cl, testbed.WorkerNoteVariable); v != fmt.Sprintf("%q", note) {
						errs = append(errs, fmt.Sprintf("Cluster %s = %s, want %q", testbed.WorkerNoteVariable, v, note))
					}
					if cl.Spec.Topology.Version != topologyVarsInMemory.ControlPlaneVersion {
						errs = append(errs, fmt.Sprintf("Cluster spec.topology.version %s, want it left at %s", cl.Spec.Topology.Version, topologyVarsInMemory.ControlPlaneVersion))
					}
					if c := meta.FindStatusCondition(cl.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition); c == nil || c.Status != "True" || c.ObservedGeneration != cl.Generation {
						errs = append(errs, fmt.Sprintf("TopologyReconciled %+v at generation %d, want True at it", c, cl.Generation))
					}
					var mds clusterv1.MachineDeploymentList
					if err := mc.List(context.Background(), &mds, client.InNamespace(testbed.DefaultClusterAPINamespace), client.MatchingLabels{clusterv1.ClusterNameLabel: topologyVarsCluster}); err != nil {
						return err
					}
					if len(mds.Items) != 1 {
						return fmt.Errorf("%d MachineDeployments, want 1", len(mds.Items))
					}
					tmpl := mds.Items[0].Spec.Template.Spec.Bootstrap.ConfigRef.Name
					if got, err := workerNote(context.Background(), mc, kubeadmConfigTemplateGVK, tmpl, "spec", "template", "spec", "files"); err != nil || got != note {
						errs = append(errs, fmt.Sprintf("KubeadmConfigTemplate %s (the topology controller's): %s content %q (%v), want %q", tmpl, testbed.WorkerNoteFile, got, err, note))
					}
					cpAfter, workerAfter := topologyMachines(t, mc, topologyVarsCluster)
					config := workerAfter.Spec.Bootstrap.ConfigRef.Name
					if got, err := workerNote(context.Background(), mc, kubeadmConfigGVK, config, "spec", "files"); err != nil || got != note {
						errs = append(errs, fmt.Sprintf("worker %s's KubeadmConfig %s: %s content %q (%v), want %q", workerAfter.Name, config, testbed.WorkerNoteFile, got, err, note))
					}
					fate := func(before, after clusterv1.Machine) string {
						if before.UID == after.UID {
							return fmt.Sprintf("kept %s (UID %s)", after.Name, after.UID)
						}
						return fmt.Sprintf("replaced %s by %s", before.Name, after.Name)
					}
					t.Logf("plan: preview control plane %s %q, worker %s %q; status control plane %q, worker %q. Cluster API: template %s carries %q; control plane %s; worker %s",
						cpBefore.Name, preview[cpBefore.Name], workerBefore.Name, preview[workerBefore.Name],
						status["status."+cpBefore.Name], status["status."+workerBefore.Name], tmpl, note, fate(cpBefore, cpAfter), fate(workerBefore, workerAfter))
					if preview[cpBefore.Name] != "unchanged" || preview[workerBefore.Name] != "unchanged" {
						errs = append(errs, fmt.Sprintf("preview %v: want every machine unchanged (the preview does not run the ClusterClass's patches)", preview))
					}
					// The test extension covers KubeadmConfigSpec.Files: Cluster API updates the
					// worker in place; the patch does not touch the control plane.
					if workerAfter.UID != workerBefore.UID || cpAfter.UID != cpBefore.UID {
						errs = append(errs, fmt.Sprintf("control plane %s, worker %s: want both kept", fate(cpBefore, cpAfter), fate(workerBefore, workerAfter)))
					}
					// The status tells the worker Cluster API updated in place (moved to the new
					// MachineSet, same UID) from the control plane nothing changed.
					if status["status."+workerBefore.Name] != owners.StatusUpdated || status["status."+cpBefore.Name] != owners.StatusUnchanged {
						errs = append(errs, fmt.Sprintf("status worker %q, control plane %q: want %s, %s", status["status."+workerBefore.Name], status["status."+cpBefore.Name], owners.StatusUpdated, owners.StatusUnchanged))
					}
					if len(errs) > 0 {
						return fmt.Errorf("%s", strings.Join(errs, "\n"))
					}
					return nil
				},
			},
			{
				// Nothing left to do: the next plan is empty.
				Config:             topologyVarsConfig(f, fmt.Sprintf(`{ %s = jsonencode(%q) }`, testbed.WorkerNoteVariable, note)),
				PlanOnly:           true,
				ExpectNonEmptyPlan: false,
			},
			{
				// Someone sets the variable back on the Cluster: the refresh finds it, and the
				// plan, from that state, changes the cluster again and says why, naming the
				// cluster, the variable, the Cluster's value and the configured one. (The
				// topology controller starts rolling the set-back template out meanwhile, so
				// the machines alone could make the plan non-empty: the warning is the proof.)
				PreConfig: func() {
					cl, err := readCluster()
					mustNil(t, err)
					for i, v := range cl.Spec.Topology.Variables {
						if v.Name == testbed.WorkerNoteVariable {
							cl.Spec.Topology.Variables[i].Value.Raw = []byte(fmt.Sprintf("%q", testbed.WorkerNoteDefault))
						}
					}
					mustNil(t, mc.Update(context.Background(), cl))
					warnings.reset()
					setBack = time.Now()
				},
				Config:             topologyVarsConfig(f, fmt.Sprintf(`{ %s = jsonencode(%q) }`, testbed.WorkerNoteVariable, note)),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					warnings.expect("Topology Variables Changed Outside Terraform", topologyVarsCluster,
						fmt.Sprintf(`topology variable %s is %q on the Cluster, want %q`, testbed.WorkerNoteVariable, testbed.WorkerNoteDefault, note)),
					logged(func() { t.Logf("variable set back: plans done in %s", time.Since(setBack).Round(100*time.Millisecond)) }),
				}},
			},
		},
	})
}

// planWarnings records the warnings the provider's PlanResourceChange returns, across the
// provider processes a test case starts, for a test to check what a plan said.
type planWarnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *planWarnings) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = nil
}

// factories are acctest.ProviderFactories with the plans' warnings recorded in w.
func (w *planWarnings) factories() map[string]func() (tfprotov6.ProviderServer, error) {
	return map[string]func() (tfprotov6.ProviderServer, error){
		"gradual": func() (tfprotov6.ProviderServer, error) {
			s, err := acctest.ProviderFactories["gradual"]()
			return &warningServer{ProviderServer: s, w: w}, err
		},
	}
}

// expect is a plan check: a warning seen since reset has summary and every one of details.
func (w *planWarnings) expect(summary string, details ...string) plancheck.PlanCheck {
	return warningCheck{w: w, summary: summary, details: details}
}

type warningCheck struct {
	w       *planWarnings
	summary string
	details []string
}

func (c warningCheck) CheckPlan(_ context.Context, _ plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	for _, s := range c.w.seen {
		if !strings.HasPrefix(s, c.summary+": ") {
			continue
		}
		ok := true
		for _, d := range c.details {
			ok = ok && strings.Contains(s, d)
		}
		if ok {
			return
		}
	}
	resp.Error = fmt.Errorf("no plan warning %q saying %q; the plans warned:\n%s", c.summary, c.details, strings.Join(c.w.seen, "\n"))
}

// logged is a plan check that runs f and passes.
type logged func()

func (f logged) CheckPlan(context.Context, plancheck.CheckPlanRequest, *plancheck.CheckPlanResponse) {
	f()
}

type warningServer struct {
	tfprotov6.ProviderServer
	w *planWarnings
}

func (s *warningServer) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	resp, err := s.ProviderServer.PlanResourceChange(ctx, req)
	if resp != nil {
		s.w.mu.Lock()
		for _, d := range resp.Diagnostics {
			if d != nil && d.Severity == tfprotov6.DiagnosticSeverityWarning {
				s.w.seen = append(s.w.seen, d.Summary+": "+d.Detail)
			}
		}
		s.w.mu.Unlock()
	}
	return resp, err
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
