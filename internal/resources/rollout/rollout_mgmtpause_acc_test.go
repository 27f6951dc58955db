//go:build unix

package rollout_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// A revision fails verification on its first cluster while the management cluster's API server
// is paused (SIGSTOP, 60 s): the failure cannot reach the ledger, and the apply ends on its
// lost Lease. Once the management cluster is back, the next plan still refuses the revision,
// naming the cluster and why (the cluster's own records hold the failure), and a plain apply
// does not take it to any cluster; only retry_invalid would.
func TestAccRollout_managementPausedWhenRevisionFails(t *testing.T) {
	acctest.OnOneLane(t, 1) // what the provider does when the management cluster stops answering, not how a CLI drives it
	testManagementPausedWhenRevisionFails(t, "")
}

// The same with lease_duration = "15s": the Lease lapses during the pause, while the failure is
// being recorded, and the run is cut off (Lease Lost) with nothing more written — but the verdict
// it saw is kept in prod-eu-1's own records, so the next plan still refuses the revision there
// with the evidence, instead of offering it again as an apply that did not finish.
func TestAccRollout_managementPausedPastTheLeaseWhenRevisionFails(t *testing.T) {
	acctest.OnOneLane(t, 0) // what the provider does when its Lease lapses, not how a CLI drives it
	testManagementPausedWhenRevisionFails(t, "15s")
}

func testManagementPausedWhenRevisionFails(t *testing.T, lease string) {
	f := acctest.Fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("mgmtpause")
	key := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	v1, bad := app(name, "v1", false, ""), app(name, "v2", true, "")
	revBad := revisionOf(t, bad)
	config := func(manifests string) string {
		c := strings.Replace(interruptConfig(f, name, manifests), `verify = { timeout = "90s" }`, `verify = { timeout = "15s" }`, 1)
		if lease != "" {
			c = strings.Replace(c, "provider \"gradual\" {\n", "provider \"gradual\" {\n  lease_duration = \""+lease+"\"\n", 1)
		}
		return strings.Replace(c, "provider \"gradual\" {\n", "provider \"gradual\" {\n  request_timeout = \"5s\"\n", 1)
	}
	t.Cleanup(func() {
		// -refresh=false: destroy first plans the configuration (to refresh), and that plan
		// refuses the revision; the recovery guide says so.
		if res := tf.run(context.Background(), "destroy", "-auto-approve", "-refresh=false"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	tf.writeConfig(config(v1))
	tf.mustRun(ctx, 0, "apply", "-auto-approve")

	tf.writeConfig(config(bad))
	p := tf.start(false, "apply", "-auto-approve")
	defer p.kill()
	waitApplied(t, f, key, "prod-eu-1", revBad, "v2", p, 3*time.Minute)
	thaw := freezeManagement(t, f)
	time.Sleep(60 * time.Second)
	thaw()
	res := p.wait(t, 4*time.Minute)
	t.Logf("the apply with the management cluster paused exited %d:\n%s", res.code, res.output)
	if res.code == 0 {
		t.Fatal("the apply exited 0")
	}

	// The next plan refuses the revision, naming where and why it failed.
	out := tf.mustRun(ctx, 1, "plan")
	if lease != "" && !strings.Contains(res.output, "Lease Lost") {
		t.Errorf("the apply with a %s Lease paused 60 s did not end on its lost Lease:\n%s", lease, res.output)
	}
	if !regexp.MustCompile(`(?s)Revision Recorded Invalid.*prod-eu-1`).MatchString(out) {
		t.Errorf("the plan after the pause does not refuse the failed revision naming prod-eu-1:\n%s", out)
	}
	// And no apply takes it anywhere.
	tf.mustRun(ctx, 1, "apply", "-auto-approve")
	if lease == "" {
		// The run restored prod-eu-1 once the management cluster answered: every cluster is
		// back on, or still on, v1.
		if err := expectDeployment(f, clusters, name, "v1", true); err != nil {
			t.Errorf("after the refused apply: %v", err)
		}
		return
	}
	// The run that lost its Lease wrote nothing more (no restore): prod-eu-1 is left in flight on
	// the failed revision, which only a changed configuration settles. Going back to v1 restores
	// it, and that apply writes to the ledger the failure only the cluster's records held.
	if err := expectDeployment(f, []string{"prod-us-1", "staging-eu-1"}, name, "v1", true); err != nil {
		t.Errorf("the revision reached a cluster past prod-eu-1: %v", err)
	}
	tf.writeConfig(config(v1))
	tf.mustRun(ctx, 0, "apply", "-auto-approve")
	if err := expectDeployment(f, clusters, name, "v1", true); err != nil {
		t.Errorf("after going back to v1: %v", err)
	}
	if ledger := ledgerOf(t, f, name); len(ledger) != 1 || ledger[0].Revision != revBad || strings.Join(ledger[0].Clusters, ",") != "prod-eu-1" {
		t.Errorf("ledger after going back to v1: %+v, want %s failed on prod-eu-1", ledger, revBad)
	}
}

// freezeManagement stops (SIGSTOP) every process of the management cluster's control plane and
// returns a func that resumes them (also run at cleanup).
func freezeManagement(t *testing.T, f *testbed.Fleet) (thaw func()) {
	t.Helper()
	pids := f.Processes()[f.Management.KwokName]
	if len(pids) == 0 {
		t.Fatalf("no processes for the management cluster (kwok cluster %q)", f.Management.KwokName)
	}
	return acctest.StopProcesses(t, pids)
}

// TestAccRollout_fluxContract_managementPausedWhenRevisionFails: the same fault through Flux,
// asserting what that engine can promise. Through Flux the per-cluster records live in the
// management cluster, beside the ledger, and kustomize-controller itself runs against it: a
// verdict that comes in while the management cluster is paused can be written nowhere (the
// direct engine keeps it in the cluster's own records), and Flux cannot even report it until the
// management cluster is back. So the promise is: the revision goes no further than its first
// cluster; nothing is recorded invalid that did not fail (the ledger is empty, or holds the
// revision on prod-eu-1 for a health failure Flux reported); and the next apply settles it — the
// revision recorded invalid on prod-eu-1 and refused from then on, every cluster back on v1
// once the configuration goes back to it.
func TestAccRollout_fluxContract_managementPausedWhenRevisionFails(t *testing.T) {
	acctest.OnOneLane(t, 1) // what the provider does when the management cluster stops answering, not how a CLI drives it
	e := fluxEngine
	f := e.fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("mgmtpause")
	key := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	v1, bad := app(name, "v1", false, ""), app(name, "v2", true, "")
	rev1, revBad := e.revision(t, f, name, v1), e.revision(t, f, name, bad)
	config := func(manifests string) string {
		c := strings.Replace(e.withDeliveryHCL(f, name, interruptConfig(f, name, manifests)), `verify = { timeout = "90s" }`, `verify = { timeout = "15s" }`, 1)
		return strings.Replace(c, "provider \"gradual\" {\n", "provider \"gradual\" {\n  request_timeout = \"5s\"\n", 1)
	}
	t.Cleanup(func() {
		if res := tf.run(context.Background(), "destroy", "-auto-approve", "-refresh=false"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tf.writeConfig(config(v1))
	tf.mustRun(ctx, 0, "apply", "-auto-approve")

	tf.writeConfig(config(bad))
	p := tf.start(false, "apply", "-auto-approve")
	defer p.kill()
	waitAppliedBy(t, e, f, key, "prod-eu-1", revBad, "v2", p, 3*time.Minute)
	thaw := freezeManagement(t, f)
	time.Sleep(60 * time.Second)
	thaw()
	res := p.wait(t, 4*time.Minute)
	t.Logf("the apply with the management cluster paused exited %d:\n%s", res.code, res.output)
	if res.code == 0 {
		t.Fatal("the apply exited 0")
	}
	fluxNoFalseInvalid(t, e, f, key, clusters[1:], rev1, revBad)

	// The next apply of the same configuration settles it: refused at plan if the verdict was
	// recorded, else prod-eu-1 (still on the failed revision) is judged again and recorded.
	out := tf.mustRun(ctx, 1, "apply", "-auto-approve")
	t.Logf("the next apply:\n%s", out)
	fluxNoFalseInvalid(t, e, f, key, clusters[1:], rev1, revBad)
	if ledger := ledgerOf(t, f, name); len(ledger) != 1 {
		t.Fatalf("ledger after the next apply: %+v, want %s failed on prod-eu-1", ledger, revBad)
	}
	out = tf.mustRun(ctx, 1, "plan")
	if !regexp.MustCompile(`(?s)Revision Recorded Invalid.*prod-eu-1`).MatchString(out) {
		t.Errorf("the plan after the next apply does not refuse the failed revision naming prod-eu-1:\n%s", out)
	}
	tf.writeConfig(config(v1))
	tf.mustRun(ctx, 0, "apply", "-auto-approve")
	if err := expectDeployment(f, clusters, name, "v1", true); err != nil {
		t.Errorf("after going back to v1: %v", err)
	}
	for _, c := range clusters {
		if st, err := e.records(t, f, c, records.DefaultNamespace, key); err != nil {
			t.Error(err)
		} else if st.Provisioning != nil || st.Current == nil || st.Current.Revision != rev1 {
			t.Errorf("%s: records %+v after going back to v1, want current %s and nothing in flight", c, st, rev1)
		}
	}
	fluxNoFalseInvalid(t, e, f, key, clusters[1:], rev1, revBad)
}

// fluxNoFalseInvalid checks that the failed revision revBad reached none of others (objects and
// records still on rev1), and that the ledger holds nothing but revBad failed on prod-eu-1, for
// the health failure Flux reported (not for the management cluster's silence).
func fluxNoFalseInvalid(t *testing.T, e engineUnderTest, f *testbed.Fleet, key records.Key, others []string, rev1, revBad string) {
	t.Helper()
	if err := expectDeployment(f, others, key.Name, "v1", true); err != nil {
		t.Errorf("the revision reached a cluster past prod-eu-1: %v", err)
	}
	for _, c := range others {
		if st, err := e.records(t, f, c, records.DefaultNamespace, key); err != nil {
			t.Error(err)
		} else if st.Provisioning != nil || st.Current == nil || st.Current.Revision != rev1 {
			t.Errorf("%s: records %+v, want current %s and nothing in flight", c, st, rev1)
		}
	}
	for _, entry := range ledgerOf(t, f, key.Name) {
		if entry.Revision != revBad || strings.Join(entry.Clusters, ",") != "prod-eu-1" || !regexp.MustCompile(`HealthCheckFailed|Deployment`).MatchString(entry.Reason) {
			t.Errorf("ledger entry %+v: want only %s failed on prod-eu-1 for its health", entry, revBad)
		}
	}
}
