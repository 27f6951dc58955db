//go:build unix

package rollout_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// The fault model: a rollout that meets a fault is never worse than one that did
// nothing, and what Terraform records is what happened — never "Provider produced inconsistent
// result after apply", never a taint that would turn the next apply into a fleet-wide delete.

// A failure within max_failures on Create: apply succeeds with a warning, the state is saved
// (no taint), and the next plan is empty — no replace, nothing deleted. The revision, recorded
// invalid where it failed, stays where it runs and goes nowhere else.
func TestAccRollout_failureWithinBudgetOnCreate(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("budget")
	// Schedulable only on the nodes this test labels on prod-eu-1 and prod-us-1: staging-eu-1
	// never becomes ready.
	zone := "gradual.dev/zone-" + name
	labelNodes(t, f, "prod-eu-1", zone, "a")
	labelNodes(t, f, "prod-us-1", zone, "a")
	v1 := strings.Replace(app(name, "v1", false, ""), "    spec:\n      containers:", "    spec:\n      nodeSelector: {"+zone+": a}\n      containers:", 1)
	rev1 := revisionOf(t, v1)
	config := rolloutConfig(f, name, allThree, v1, `update_limit = "1"
  max_failures = "1"`)
	var uid string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			return expectGone(f, []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}, name)
		},
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionCreate),
					plancheck.ExpectUnknownValue("gradual_rollout.test", tfjsonpath.New("summary")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					stateCheck(f, name, "prod-eu-1", "current", rev1), stateCheck(f, name, "prod-us-1", "current", rev1),
					stateCheck(f, name, "staging-eu-1", "pending", ""),
					statecheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("invalid_revisions").AtSliceIndex(0).AtMapKey("clusters"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("staging-eu-1")})),
				},
				Check: func(*terraform.State) error {
					if err := expectDeployment(f, []string{"prod-eu-1", "prod-us-1"}, name, "v1", true); err != nil {
						return err
					}
					uid = deploymentUID(t, f, "prod-eu-1", name)
					return expectConfigMap(f, "staging-eu-1", name, "settings", false) // restored to nothing
				},
				// The plan after apply must be empty (the test framework checks it): no replace,
				// and the failed cluster is not retried.
			},
			{
				// The same configuration again: nothing to do, nothing deleted anywhere.
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
				Check: func(*terraform.State) error {
					if got := deploymentUID(t, f, "prod-eu-1", name); got != uid {
						return fmt.Errorf("prod-eu-1's Deployment was recreated (uid %s, was %s)", got, uid)
					}
					return expectDeployment(f, []string{"prod-eu-1", "prod-us-1"}, name, "v1", true)
				},
			},
		},
	})
}

// A saved plan, then the fleet changes before it is applied: a cluster joins, one goes not
// ready, one's kubeconfig Secret is deleted. Applying the saved plan keeps to it (the joiner is
// left for the next plan), reports what differs, and Terraform accepts the result; the next
// plan shows the rest, and applying it converges.
func TestAccRollout_savedPlanThenFleetChanges(t *testing.T) {
	f := acctest.Fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("stale")
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	v1, v2 := app(name, "v1", false, ""), app(name, "v2", false, "")
	rev1, rev2 := revisionOf(t, v1), revisionOf(t, v2)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		for _, c := range clusters {
			if err := f.SetReady(context.Background(), c, true); err != nil {
				t.Error(err)
			}
		}
		if res := tf.run(context.Background(), "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})

	tf.writeConfig(interruptConfig(f, name, v1))
	tf.mustRun(ctx, 0, "apply", "-auto-approve")

	// staging-eu-1 is not ready when the plan is made: it is not in it.
	setReady(t, f, "staging-eu-1", false)
	tf.writeConfig(interruptConfig(f, name, v2))
	planOut := tf.mustRun(ctx, 2, "plan", "-detailed-exitcode", "-out=stale.tfplan")
	change := tf.planChange(ctx, "stale.tfplan", "gradual_rollout.test")
	if got := change.After.Waves; got != "2 waves of 1 cluster" {
		t.Fatalf("planned waves %q, want two of one cluster", got)
	}
	if err := expectWaveClusters(planOut, "prod-eu-1", "prod-us-1"); err != nil {
		t.Fatal(err)
	}

	// Between plan and apply: staging-eu-1 joins, prod-us-1 goes not ready, prod-eu-1's
	// kubeconfig Secret is deleted.
	setReady(t, f, "staging-eu-1", true)
	setReady(t, f, "prod-us-1", false)
	restore := deleteKubeconfig(t, f, "prod-eu-1")

	out := tf.mustRun(ctx, 0, "apply", "-input=false", "stale.tfplan")
	if strings.Contains(out, "inconsistent result") {
		t.Fatalf("apply of the saved plan produced an inconsistent result:\n%s", out)
	}
	for _, want := range []string{"Apply Differs From The Plan", "staging-eu-1: not in the plan being applied", "planned prod-us-1", "planned prod-eu-1"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	for _, c := range clusters {
		if recs := workloadRecords(t, f, c, name); recs.Current == nil || recs.Current.Revision != rev1 || recs.Provisioning != nil {
			t.Errorf("%s: records current %s provisioning %s, want untouched on %s", c, revOf(recs.Current), revOf(recs.Provisioning), rev1)
		}
	}

	// Back to normal: the next plan shows all three, and applying it converges.
	restore()
	setReady(t, f, "prod-us-1", true)
	planOut = tf.mustRun(ctx, 2, "plan", "-detailed-exitcode", "-out=next.tfplan")
	change = tf.planChange(ctx, "next.tfplan", "gradual_rollout.test")
	if got := change.After.Waves; got != "3 waves of 1 cluster" {
		t.Errorf("next plan's waves %q, want all three", got)
	}
	if err := expectWaveClusters(planOut, "prod-eu-1", "prod-us-1", "staging-eu-1"); err != nil {
		t.Error(err)
	}
	tf.mustRun(ctx, 0, "apply", "-input=false", "next.tfplan")
	if err := expectDeployment(f, clusters, name, "v2", true); err != nil {
		t.Error(err)
	}
	if err := tf.stateValues(ctx, "gradual_rollout.test").expectAllCurrent(int64(len(clusters)), rev2); err != nil {
		t.Errorf("state: %v", err)
	}
}

// A kubeconfig Secret deleted while the rollout runs (before the cluster's wave), with the
// defaults max_failures = 0 and on_failure = rollback: the cluster is set aside as gone, the
// clusters done stay done, the revision is not recorded invalid, and apply succeeds, saying so.
func TestAccRollout_kubeconfigDeletedMidRollout(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("gone")
	key := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}
	v1 := slowReady(app(name, "v1", false, ""), 5)
	rev1 := revisionOf(t, v1)
	t.Cleanup(func() {
		if res := tf.run(context.Background(), "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})
	tf.writeConfig(interruptConfig(f, name, v1))
	p := tf.start(false, "apply", "-auto-approve")
	defer p.kill()
	inFlight := waitInFlight(t, f, key, rev1, "v1", p, 3*time.Minute)
	if inFlight.cluster != "prod-eu-1" {
		t.Fatalf("first cluster in flight is %s, want prod-eu-1", inFlight.cluster)
	}
	restore := deleteKubeconfig(t, f, "prod-us-1") // wave 2's cluster
	res := p.wait(t, 5*time.Minute)
	restore()
	if res.code != 0 {
		t.Fatalf("apply exited %d, want 0 (a vanished cluster is not a failure):\n%s", res.code, res.output)
	}
	if !regexp.MustCompile(`(?s)prod-us-1 vanished during the rollout.*kubeconfig Secret`).MatchString(res.output) {
		t.Errorf("apply does not report prod-us-1 gone:\n%s", res.output)
	}
	if err := expectDeployment(f, []string{"prod-eu-1", "staging-eu-1"}, name, "v1", true); err != nil {
		t.Errorf("the clusters done were not kept: %v", err)
	}
	if recs := workloadRecords(t, f, "prod-us-1", name); recs.Current != nil || recs.Provisioning != nil {
		t.Errorf("prod-us-1 was changed after its kubeconfig went: current %s provisioning %s", revOf(recs.Current), revOf(recs.Provisioning))
	}
	if ledger := ledgerOf(t, f, name); len(ledger) > 0 {
		t.Errorf("ledger %+v: a vanished cluster made the revision invalid", ledger)
	}
}

// A workload API server that stops answering (frozen with SIGSTOP) while its cluster's wave
// verifies: that cluster lost contact after its change; its restore cannot reach it either, so it
// ends unsettled (apply says so and fails), nothing is recorded invalid and nothing rolled back;
// within max_unsettled = "1" the other clusters get the revision; once it answers again the next
// apply converges. The request timeout is shorter than the verify timeout, as in production
// (30 s against minutes): kstatus' poller takes a timed-out request for its own shutdown, and
// verification must not take that for success.
func TestAccRollout_workloadAPIDownDuringVerify(t *testing.T) {
	acctest.OnOneLane(t, 0)
	f := acctest.Fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("down")
	key := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	v1 := slowReady(app(name, "v1", false, ""), 10)
	rev1 := revisionOf(t, v1)
	// Short request and verify timeouts: a frozen API server costs one request timeout per read.
	config := strings.Replace(interruptConfig(f, name, v1), `verify = { timeout = "90s" }`, `verify = { timeout = "15s" }`, 1)
	config = strings.Replace(config, "provider \"gradual\" {\n", "provider \"gradual\" {\n  request_timeout = \"5s\"\n", 1)
	config = strings.Replace(config, `update_limit = "1"`, `update_limit = "1"`+"\n  max_unsettled = \"1\"", 1)
	if !strings.Contains(config, `request_timeout = "5s"`) {
		t.Fatal("workloadAPIDownDuringVerify: acctest.ProviderConfig changed")
	}
	t.Cleanup(func() {
		if res := tf.run(context.Background(), "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})
	tf.writeConfig(config)
	p := tf.start(true, "apply", "-auto-approve")
	defer p.kill()
	// Freeze prod-us-1 (wave 2) once its records say provisioning and its Deployment carries
	// v1: applied, and being verified (minReadySeconds keeps it there for a while).
	const frozen = "prod-us-1"
	waitApplied(t, f, key, frozen, rev1, "v1", p, 3*time.Minute)
	thaw := freeze(t, f, frozen)
	probe, cancelProbe := context.WithTimeout(context.Background(), 2*time.Second)
	var ns corev1.Namespace
	if err := workloadClient(t, f, frozen).Get(probe, client.ObjectKey{Name: name}, &ns); err == nil {
		t.Logf("%s still answers after SIGSTOP of %v", frozen, f.Processes())
	}
	cancelProbe()
	res := p.wait(t, 6*time.Minute)
	thaw()
	t.Logf("apply with %s frozen exited %d:\n%s", frozen, res.code, res.output)
	if res.code == 0 {
		if raw, err := os.ReadFile(p.logPath); err == nil {
			var lines []string
			for _, line := range strings.Split(string(raw), "\n") {
				if strings.Contains(line, "provider") && (strings.Contains(line, frozen) || strings.Contains(line, "wave")) {
					lines = append(lines, line[:min(len(line), 300)])
				}
			}
			t.Logf("provider log lines naming %s:\n%s", frozen, strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
		t.Fatal("apply exited 0 with a cluster left unsettled")
	}
	if !strings.Contains(res.output, "left unsettled") {
		t.Errorf("apply does not say a cluster was left unsettled")
	}
	if ledger := ledgerOf(t, f, name); len(ledger) > 0 {
		t.Errorf("ledger %+v: an unreachable cluster made the revision invalid", ledger)
	}
	if recs := workloadRecords(t, f, frozen, name); recs.Provisioning == nil || recs.Provisioning.Revision != rev1 || len(recs.Invalid) > 0 {
		t.Errorf("%s: records provisioning %s invalid %v, want still provisioning %s and nothing invalid", frozen, revOf(recs.Provisioning), recs.Invalid, rev1)
	}
	if !strings.Contains(res.output, frozen) {
		t.Errorf("apply does not name %s", frozen)
	}
	if err := expectDeployment(f, []string{"prod-eu-1", "staging-eu-1"}, name, "v1", true); err != nil {
		t.Errorf("the other clusters did not get v1: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	tf.mustRun(ctx, 0, "apply", "-auto-approve")
	if err := expectDeployment(f, clusters, name, "v1", true); err != nil {
		t.Error(err)
	}
	for _, c := range clusters {
		if recs := workloadRecords(t, f, c, name); recs.Current == nil || recs.Current.Revision != rev1 || recs.Provisioning != nil {
			t.Errorf("%s: records current %s provisioning %s, want current %s", c, revOf(recs.Current), revOf(recs.Provisioning), rev1)
		}
	}
}

// A workload API server slowed, not stopped — its control plane frozen 2 s in every 3 for 24 s
// while a good revision verifies there — is a brownout: reads that time out beside reads that
// show the Deployment still progressing say nothing of the revision. Verification goes on
// within verify.timeout and the revision goes through on every cluster, nothing recorded invalid.
func TestAccRollout_workloadAPISlowDuringVerify(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("slow")
	key := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	v1 := slowReady(app(name, "v1", false, ""), 8)
	rev1 := revisionOf(t, v1)
	config := strings.Replace(interruptConfig(f, name, v1), "provider \"gradual\" {\n", "provider \"gradual\" {\n  request_timeout = \"2s\"\n", 1)
	if !strings.Contains(config, `request_timeout = "2s"`) {
		t.Fatal("workloadAPISlowDuringVerify: acctest.ProviderConfig changed")
	}
	t.Cleanup(func() {
		if res := tf.run(context.Background(), "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})
	tf.writeConfig(config)
	p := tf.start(true, "apply", "-auto-approve")
	defer p.kill()
	const slowed = "prod-us-1"
	waitApplied(t, f, key, slowed, rev1, "v1", p, 3*time.Minute)
	for i := 0; i < 8; i++ { // 8 × (2 s frozen + 1 s answering)
		thaw := freeze(t, f, slowed)
		time.Sleep(2 * time.Second)
		thaw()
		time.Sleep(time.Second)
	}
	res := p.wait(t, 6*time.Minute)
	t.Logf("apply with %s slowed exited %d:\n%s", slowed, res.code, res.output)
	if res.code != 0 {
		t.Fatalf("a slow API server failed the apply of a good revision")
	}
	if ledger := ledgerOf(t, f, name); len(ledger) > 0 {
		t.Errorf("ledger %+v: a slow cluster made the revision invalid", ledger)
	}
	if err := expectDeployment(f, clusters, name, "v1", true); err != nil {
		t.Error(err)
	}
}

// SIGKILL of the CLI and its provider right after a cluster is recorded provisioning, before
// its objects are all applied. Once the Lease expires, the next plan shows the interrupted run
// and the next apply converges on the same revision — applied again, not merely verified, so
// the objects never created exist and the ones the previous revision had are pruned — and the
// revision is not recorded invalid.
func TestAccRollout_killedMidApply(t *testing.T) { testKilledMidApply(t, directEngine) }

// TestAccRollout_fluxContract_killedMidApply: the same through Flux (the cluster's Kustomization
// pinned to the revision when the CLI is killed).
func TestAccRollout_fluxContract_killedMidApply(t *testing.T) {
	acctest.OnOneLane(t, 0) // what a killed run leaves in Flux; the direct test runs on both CLIs
	testKilledMidApply(t, fluxEngine)
}

func testKilledMidApply(t *testing.T, e engineUnderTest) {
	f := e.fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("killed")
	key := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	v1, v2 := app(name, "v1", false, "dropped"), slowReady(app(name, "v2", false, ""), 5)
	rev2 := e.revision(t, f, name, v2)
	t.Cleanup(func() {
		if res := tf.run(context.Background(), "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// A short Lease, so that the wait for the killed holder's Lease to expire (the behaviour
	// under test) takes 20 s rather than the default minute.
	config := func(manifests string) string {
		return strings.Replace(e.withDeliveryHCL(f, name, interruptConfig(f, name, manifests)), "provider \"gradual\" {\n", "provider \"gradual\" {\n  lease_duration = \"20s\"\n", 1)
	}
	tf.writeConfig(config(v1))
	tf.mustRun(ctx, 0, "apply", "-auto-approve")

	tf.writeConfig(config(v2))
	p := tf.start(false, "apply", "-auto-approve")
	defer p.kill()
	// Kill as soon as prod-eu-1's records say provisioning v2.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if time.Now().After(deadline) {
			t.Fatal("prod-eu-1 was never recorded provisioning v2")
		}
		st, err := e.records(t, f, "prod-eu-1", records.DefaultNamespace, key)
		if err == nil && st.Provisioning != nil && st.Provisioning.Revision == rev2 {
			break
		}
		select {
		case <-p.done:
			t.Fatalf("apply ended before prod-eu-1 was provisioning:\n%s", p.result().output)
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.kill()
	killed := time.Now()
	t.Logf("killed the CLI and the provider with prod-eu-1 provisioning %s", rev2)

	// The Lease outlives the killed holder; the next apply waits it out, then resumes.
	var out string
	for {
		res := tf.run(ctx, "plan", "-detailed-exitcode", "-out=resume.tfplan")
		if res.code == 2 {
			out = res.output
			break
		}
		if !strings.Contains(res.output, "Already Running") || time.Since(killed) > 3*time.Minute {
			t.Fatalf("plan after the kill exited %d:\n%s", res.code, res.output)
		}
		time.Sleep(5 * time.Second)
	}
	if !strings.Contains(out, "Earlier Apply Did Not Finish") || !strings.Contains(out, "prod-eu-1") {
		t.Errorf("the plan after the kill does not show the interrupted run:\n%s", out)
	}
	for {
		res := tf.run(ctx, "apply", "-input=false", "resume.tfplan")
		if res.code == 0 {
			break
		}
		if !strings.Contains(res.output, "Already Running") || time.Since(killed) > 4*time.Minute {
			t.Fatalf("apply after the kill exited %d:\n%s", res.code, res.output)
		}
		time.Sleep(5 * time.Second)
		tf.mustRun(ctx, 2, "plan", "-detailed-exitcode", "-out=resume.tfplan")
	}
	t.Logf("converged %s after the kill", time.Since(killed).Round(time.Second))
	if waited := time.Since(killed); waited < 15*time.Second {
		t.Errorf("converged %s after the kill: the killed holder's 20 s Lease was not waited out", waited.Round(time.Second))
	}
	if err := expectDeployment(f, clusters, name, "v2", true); err != nil {
		t.Error(err)
	}
	for _, c := range clusters {
		if err := expectConfigMap(f, c, name, "dropped", false); err != nil {
			t.Errorf("v1's ConfigMap was not pruned: %v", err)
		}
		recs, err := e.records(t, f, c, records.DefaultNamespace, key)
		if err != nil {
			t.Fatal(err)
		}
		if recs.Current == nil || recs.Current.Revision != rev2 || len(recs.Invalid) > 0 {
			t.Errorf("%s: records current %s invalid %v, want current %s, nothing invalid", c, revOf(recs.Current), recs.Invalid, rev2)
		}
	}
	if ledger := ledgerOf(t, f, name); len(ledger) > 0 {
		t.Errorf("ledger %+v after a kill, want empty", ledger)
	}
}

// waitApplied polls cluster's own records and objects until it is recorded provisioning
// revision and its Deployment carries version: applied, being verified. It fails if the CLI
// exits first or nothing happens within timeout.
func waitApplied(t *testing.T, f *testbed.Fleet, key records.Key, cluster, revision, version string, p *cliProcess, timeout time.Duration) {
	t.Helper()
	waitAppliedBy(t, directEngine, f, key, cluster, revision, version, p, timeout)
}

// waitAppliedBy is waitApplied for engine e (whose records say where the cluster is).
func waitAppliedBy(t *testing.T, e engineUnderTest, f *testbed.Fleet, key records.Key, cluster, revision, version string, p *cliProcess, timeout time.Duration) {
	t.Helper()
	c := workloadClient(t, f, cluster)
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := e.records(t, f, cluster, records.DefaultNamespace, key)
		var d appsv1.Deployment
		if err == nil && st.Provisioning != nil && st.Provisioning.Revision == revision &&
			c.Get(ctx, client.ObjectKey{Namespace: key.Name, Name: "web"}, &d) == nil &&
			strings.HasSuffix(d.Spec.Template.Spec.Containers[0].Image, ":"+version) {
			cancel()
			return
		}
		cancel()
		select {
		case <-p.done:
			t.Fatalf("the apply exited (%d) before %s was applied:\n%s", p.result().code, cluster, p.result().output)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not applied %s within %s", cluster, revision, timeout)
		}
	}
}

func setReady(t *testing.T, f *testbed.Fleet, cluster string, ready bool) {
	t.Helper()
	if err := f.SetReady(context.Background(), cluster, ready); err != nil {
		t.Fatal(err)
	}
}

// deleteKubeconfig deletes cluster's kubeconfig Secret and returns a func that puts it back
// (also run at cleanup, so that a failing test leaves the fleet whole).
func deleteKubeconfig(t *testing.T, f *testbed.Fleet, cluster string) (restore func()) {
	t.Helper()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var secret corev1.Secret
	if err := mc.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: fleet.KubeconfigSecretName(cluster)}, &secret); err != nil {
		t.Fatal(err)
	}
	if err := mc.Delete(ctx, &secret); err != nil {
		t.Fatal(err)
	}
	done := false
	restore = func() {
		if done {
			return
		}
		done = true
		again := corev1.Secret{Type: secret.Type, Data: secret.Data}
		again.Name, again.Namespace, again.Labels = secret.Name, secret.Namespace, secret.Labels
		if err := mc.Create(ctx, &again); err != nil {
			t.Errorf("restore the kubeconfig Secret of %s: %v", cluster, err)
		}
	}
	t.Cleanup(restore)
	return restore
}

// freeze stops (SIGSTOP) every process of cluster's control plane, so that its API server
// accepts connections and never answers, and returns a func that resumes them (also run at
// cleanup).
func freeze(t *testing.T, f *testbed.Fleet, cluster string) (thaw func()) {
	t.Helper()
	var kwokName string
	for _, w := range f.Workloads {
		if w.Spec.Name == cluster {
			kwokName = w.KwokName
		}
	}
	pids := f.Processes()[kwokName]
	if len(pids) == 0 {
		t.Fatalf("no processes for %s (kwok cluster %q)", cluster, kwokName)
	}
	return acctest.StopProcesses(t, pids)
}
