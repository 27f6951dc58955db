package rollout_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// gatedConfig is a rollout of app to staging-eu-1 alone with verify as given.
func gatedConfig(f *testbed.Fleet, name, manifests, verify string) string {
	return strings.Replace(rolloutConfig(f, name, `clusters = ["staging-eu-1"]`, manifests, verify),
		"  verify = { timeout = \"90s\" }\n", "", 1)
}

// verify.health_checks: an expression that does not compile fails the plan naming it, before
// anything is applied; a Deployment that kstatus calls ready (kwok rolls it out) but whose
// `current` expression never holds fails the cluster at the verify timeout, naming the object
// and the expression; the cluster is restored and the revision recorded invalid.
func TestAccRollout_healthExpressions(t *testing.T) {
	acctest.OnOneLane(t, 1) // what the provider verifies, not how a CLI drives it
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("cel")
	v1, v2 := app(name, "v1", false, ""), app(name, "v2", false, "")
	rev2 := revisionOf(t, v2)
	verify := func(current string) string {
		return fmt.Sprintf(`verify = {
    timeout       = "8s"
    health_checks = [{
      api_version = "apps/v1"
      kind        = "Deployment"
      current     = %q
      failed      = "status.conditions.exists(e, e.type == 'Progressing' && e.status == 'False')"
    }]
  }`, current)
	}
	const ready = "status.conditions.filter(e, e.type == 'Available').all(e, e.status == 'True')"
	const neverSmokeTested = "status.conditions.exists(e, e.type == 'SmokeTested' && e.status == 'True')"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy:             func(*terraform.State) error { return expectGone(f, []string{"staging-eu-1"}, name) },
		Steps: []resource.TestStep{
			{
				Config:      gatedConfig(f, name, v1, verify("status.conditions.exists(e, e.type == ")),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Invalid CEL Expression.*verify.health_checks\[0\].current`),
			},
			{Config: gatedConfig(f, name, v1, verify(ready))},
			{
				Config:      gatedConfig(f, name, v2, verify(neverSmokeTested)),
				ExpectError: regexp.MustCompile(`(?s)Rollout Failed.*staging-eu-1.*` + name + `/web:\s+InProgress:\s+health\s+expression\s+current`),
			},
			{
				PreConfig: func() {
					if err := expectDeployment(f, []string{"staging-eu-1"}, name, "v1", true); err != nil {
						t.Fatal(err)
					}
				},
				Config:      gatedConfig(f, name, v2, verify(neverSmokeTested)),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Revision Recorded Invalid.*` + rev2 + `.*staging-eu-1`),
			},
		},
	})
}

// verify.cluster_gates, Nodes: a Node of staging-eu-1 that is Ready before the change and goes
// NotReady once the new revision's objects are there fails that cluster, naming the Node and
// what its Ready condition says; the cluster is restored to the backup revision and the next
// plan refuses the revision as invalid. kwok would set the Node back to Ready within a second,
// so the test makes one kwok leaves alone (testbed.UnmanagedNodeLabel) and plays its kubelet:
// heartbeats while it should be Ready, then the NotReady status.
func TestAccRollout_nodeNotReadyAfterTheChange(t *testing.T) {
	acctest.OnOneLane(t, 0) // what the provider verifies, not how a CLI drives it
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("node")
	node := name + "-worker"
	v1, v2 := app(name, "v1", false, ""), app(name, "v2", false, "")
	rev1, rev2 := revisionOf(t, v1), revisionOf(t, v2)
	const verify = `verify = {
    timeout   = "60s"
    bake_time = "3s"
  }`
	kubelet := startKubelet(t, f, "staging-eu-1", node)
	const why = "container runtime network not ready: NetworkPluginNotReady"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy:             func(*terraform.State) error { return expectGone(f, []string{"staging-eu-1"}, name) },
		Steps: []resource.TestStep{
			{Config: gatedConfig(f, name, v1, verify)},
			{
				// The Node goes NotReady as soon as v2's Deployment is on the cluster: after the
				// gate was read healthy before the change, before the bake ends.
				PreConfig: func() {
					kubelet.notReadyOnce(func() bool {
						return expectDeployment(f, []string{"staging-eu-1"}, name, "v2", false) == nil
					}, why)
				},
				Config: gatedConfig(f, name, v2, verify),
				ExpectError: regexp.MustCompile(`(?s)Rollout Failed.*staging-eu-1.*` +
					words("cluster gate: Node became NotReady: Node "+node+" Ready is False (KubeletNotReady): "+why+" (Ready before the change)")),
			},
			{
				// Restored to v1 and v2 recorded invalid on staging-eu-1; the Node goes (every
				// gate of every later test reads every Node), and the plan refuses v2.
				PreConfig: func() {
					if err := expectDeployment(f, []string{"staging-eu-1"}, name, "v1", true); err != nil {
						t.Fatal(err)
					}
					ledger := ledgerOf(t, f, name)
					if len(ledger) != 1 || ledger[0].Revision != rev2 || strings.Join(ledger[0].Clusters, ",") != "staging-eu-1" {
						t.Fatalf("ledger = %+v, want %s failed on staging-eu-1", ledger, rev2)
					}
					if rs := workloadRecords(t, f, "staging-eu-1", name); rs.Current == nil || rs.Current.Revision != rev1 {
						t.Fatalf("staging-eu-1 records: current %+v, want %s", rs.Current, rev1)
					}
					kubelet.remove()
				},
				Config:      gatedConfig(f, name, v2, verify),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Revision Recorded Invalid.*` + rev2 + `.*staging-eu-1`),
			},
		},
	})
}

// verify.cluster_gates judges change, not state: during the bake of a good revision on
// staging-eu-1, Nodes change the way a cluster autoscaler, a node repair and a spot market change
// them every day — one joins NotReady, one is cordoned and drained (NotReady), one is deleted, one
// goes silent (Ready Unknown) — and the revision goes through: not restored, nothing in the
// ledger, the new Deployment on the cluster. TestAccRollout_nodeNotReadyAfterTheChange is the
// other half: a Node the change itself makes NotReady fails the revision.
func TestAccRollout_nodeChurnDuringTheBake(t *testing.T) {
	acctest.OnOneLane(t, 0) // what the provider verifies, not how a CLI drives it
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("churn")
	v1, v2 := app(name, "v1", false, ""), app(name, "v2", false, "")
	const verify = `verify = {
    timeout   = "60s"
    bake_time = "4s"
  }`
	c := workloadClient(t, f, "staging-eu-1")
	drained := startKubelet(t, f, "staging-eu-1", name+"-drained")
	deleted := startKubelet(t, f, "staging-eu-1", name+"-deleted")
	spot := startKubelet(t, f, "staging-eu-1", name+"-spot")
	joiner := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name + "-joiner", Labels: map[string]string{testbed.UnmanagedNodeLabel: "true"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: testbed.UnmanagedNodeLabel, Effect: corev1.TaintEffectNoSchedule}}}}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), joiner); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Node %s: %v", joiner.Name, err)
		}
	})
	v2There := func() bool { return expectDeployment(f, []string{"staging-eu-1"}, name, "v2", false) == nil }
	churn := func() {
		// The autoscaler's Node joins, not Ready yet.
		if err := c.Create(context.Background(), joiner); err != nil {
			t.Errorf("create Node %s: %v", joiner.Name, err)
		}
		// Again on a conflict: the controller manager writes a new Node too (taints, annotations).
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var n corev1.Node
			if err := c.Get(context.Background(), client.ObjectKey{Name: joiner.Name}, &n); err != nil {
				return err
			}
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
				Message: "container runtime network not ready", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
			return c.Status().Update(context.Background(), &n)
		}); err != nil {
			t.Errorf("Node %s NotReady: %v", joiner.Name, err)
		}
		// The repaired Node is cordoned before it is drained and goes NotReady.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var n corev1.Node
			if err := c.Get(context.Background(), client.ObjectKey{Name: drained.node}, &n); err != nil {
				return err
			}
			n.Spec.Unschedulable = true
			return c.Update(context.Background(), &n)
		}); err != nil {
			t.Errorf("cordon Node %s: %v", drained.node, err)
		}
		deleted.remove()
	}
	var churned atomic.Bool
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy:             func(*terraform.State) error { return expectGone(f, []string{"staging-eu-1"}, name) },
		Steps: []resource.TestStep{
			{Config: gatedConfig(f, name, v1, verify)},
			{
				// The churn starts once v2's Deployment is on the cluster: after the gate's read
				// before the change, before the bake ends and the gate reads again.
				PreConfig: func() {
					drained.notReadyOnce(func() bool {
						if !v2There() {
							return false
						}
						if churned.CompareAndSwap(false, true) {
							churn()
						}
						return true
					}, "node is draining for repair")
					spot.lostOnce(churned.Load)
				},
				Config: gatedConfig(f, name, v2, verify),
				Check: func(*terraform.State) error {
					if !churned.Load() {
						return fmt.Errorf("the Nodes never churned: the test proves nothing")
					}
					if err := expectDeployment(f, []string{"staging-eu-1"}, name, "v2", true); err != nil {
						return err
					}
					if ledger := ledgerOf(t, f, name); len(ledger) != 0 {
						return fmt.Errorf("ledger = %+v, want nothing recorded invalid", ledger)
					}
					if rs := workloadRecords(t, f, "staging-eu-1", name); rs.Current == nil || rs.Current.Revision != revisionOf(t, v2) {
						return fmt.Errorf("staging-eu-1 records: current %+v, want %s", rs.Current, revisionOf(t, v2))
					}
					return nil
				},
			},
		},
	})
}

// fakeKubelet keeps one Node that kwok does not manage Ready, as a kubelet would, until told to
// turn it NotReady.
type fakeKubelet struct {
	t       *testing.T
	c       client.Client
	node    string
	cluster string
	arm     chan armed
	stop    context.CancelFunc
	done    chan struct{}
}

type armed struct {
	when        func() bool
	status      corev1.ConditionStatus
	reason, why string
}

// startKubelet creates node on cluster, labelled for kwok to leave alone and tainted so that
// nothing schedules onto it, and heartbeats it Ready until notReadyOnce's condition holds; the
// Node is deleted at the end of the test at the latest.
func startKubelet(t *testing.T, f *testbed.Fleet, cluster, node string) *fakeKubelet {
	t.Helper()
	c := workloadClient(t, f, cluster)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{testbed.UnmanagedNodeLabel: "true"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: testbed.UnmanagedNodeLabel, Effect: corev1.TaintEffectNoSchedule}}},
	}
	if err := c.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &fakeKubelet{t: t, c: c, node: node, cluster: cluster, arm: make(chan armed, 1), stop: cancel, done: make(chan struct{})}
	go k.run(ctx)
	t.Cleanup(k.remove)
	if err := k.setReady(ctx, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"); err != nil {
		t.Fatal(err)
	}
	return k
}

// notReadyOnce turns the Node NotReady (reason KubeletNotReady, message why) once when holds,
// polled every 200ms, and stops the heartbeat.
func (k *fakeKubelet) notReadyOnce(when func() bool, why string) {
	k.arm <- armed{when: when, status: corev1.ConditionFalse, reason: "KubeletNotReady", why: why}
}

// lostOnce stops the heartbeat once when holds and marks the Node the way the node lifecycle
// controller marks one whose kubelet stopped posting (Ready Unknown, NodeStatusUnknown): a spot
// interruption, a lost host.
func (k *fakeKubelet) lostOnce(when func() bool) {
	k.arm <- armed{when: when, status: corev1.ConditionUnknown, reason: "NodeStatusUnknown", why: "Kubelet stopped posting node status."}
}

func (k *fakeKubelet) run(ctx context.Context) {
	defer close(k.done)
	var pending *armed
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case a := <-k.arm:
			pending = &a
		case <-tick.C:
		}
		switch {
		case pending != nil && pending.when():
			if err := k.setReady(ctx, pending.status, pending.reason, pending.why); err != nil {
				k.t.Errorf("turn Node %s NotReady: %v", k.node, err)
			}
			return // no more heartbeats
		case time.Since(last) >= 5*time.Second:
			// Well within the grace period after which the controller manager marks a Node
			// whose heartbeats stopped Unknown (kwokctl sets 3m20s; a slow run can last that).
			if err := k.setReady(ctx, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"); err != nil && ctx.Err() == nil {
				k.t.Logf("heartbeat of Node %s: %v", k.node, err)
			}
			last = time.Now()
		}
	}
}

// setReady writes the Node's Ready condition, heartbeat now; again on a conflict (the controller
// manager writes the Node too: taints, annotations).
func (k *fakeKubelet) setReady(ctx context.Context, status corev1.ConditionStatus, reason, message string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var n corev1.Node
		if err := k.c.Get(ctx, client.ObjectKey{Name: k.node}, &n); err != nil {
			return err
		}
		now := metav1.Now()
		cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: status, Reason: reason, Message: message, LastHeartbeatTime: now, LastTransitionTime: now}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == status {
				cond.LastTransitionTime = c.LastTransitionTime
			}
		}
		n.Status.Conditions = []corev1.NodeCondition{cond}
		return k.c.Status().Update(ctx, &n)
	})
}

// remove stops the heartbeat and deletes the Node (idempotent).
func (k *fakeKubelet) remove() {
	k.stop()
	<-k.done
	if err := k.c.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.node}}); err != nil && !apierrors.IsNotFound(err) {
		k.t.Errorf("delete Node %s of %s: %v", k.node, k.cluster, err)
	}
}

// checkJob is a Job in namespace ns: kwok completes its pod at once; broken, its pod can never be
// scheduled and the Job fails at its active deadline.
func checkJob(ns string, broken bool) string {
	extra := ""
	if broken {
		extra = "  activeDeadlineSeconds: 2\n"
	}
	selector := ""
	if broken {
		selector = "      nodeSelector: {gradual.dev/no-such-node: \"true\"}\n"
	}
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: smoke, namespace: %s}
spec:
  backoffLimit: 0
%s  template:
    spec:
      restartPolicy: Never
%s      containers: [{name: smoke, image: registry.example/smoke:1}]
`, ns, extra, selector)
}

// verify.check_job: a manifest that is no batch/v1 Job fails the plan naming the attribute; a Job
// that completes lets the revision through and is deleted; one that fails (its active deadline
// passes) fails the cluster naming the Job and its condition, the cluster is restored, the Job is
// gone and the revision is recorded invalid.
func TestAccRollout_checkJob(t *testing.T) {
	acctest.OnOneLane(t, 1) // what the provider verifies, not how a CLI drives it
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("job")
	v1, v2 := app(name, "v1", false, ""), app(name, "v2", false, "")
	rev2 := revisionOf(t, v2)
	verify := func(job string) string {
		return fmt.Sprintf(`verify = {
    timeout   = "60s"
    check_job = {
      timeout  = "30s"
      manifest = <<-EOT
%s      EOT
    }
  }`, indent(indent(job)))
	}
	jobGone := func() {
		t.Helper()
		err := workloadClient(t, f, "staging-eu-1").Get(context.Background(), client.ObjectKey{Namespace: name, Name: "smoke"}, &batchv1.Job{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("check Job %s/smoke: want it deleted, got err %v", name, err)
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy:             func(*terraform.State) error { return expectGone(f, []string{"staging-eu-1"}, name) },
		Steps: []resource.TestStep{
			{
				Config:      gatedConfig(f, name, v1, verify(strings.Replace(checkJob(name, false), "kind: Job", "kind: CronJob", 1))),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Invalid Check Job.*verify.check_job.manifest.*` + words("want a batch/v1 Job, found batch/v1 CronJob")),
			},
			{Config: gatedConfig(f, name, v1, verify(checkJob(name, false)))},
			{
				PreConfig: jobGone,
				Config:    gatedConfig(f, name, v2, verify(checkJob(name, true))),
				ExpectError: regexp.MustCompile(`(?s)Rollout Failed.*staging-eu-1.*` +
					words("check Job "+name+"/smoke failed: Failed (DeadlineExceeded): Job was active longer than specified deadline")),
			},
			{
				PreConfig: func() {
					jobGone()
					if err := expectDeployment(f, []string{"staging-eu-1"}, name, "v1", true); err != nil {
						t.Fatal(err)
					}
				},
				Config:      gatedConfig(f, name, v2, verify(checkJob(name, true))),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Revision Recorded Invalid.*` + rev2 + `.*staging-eu-1`),
			},
		},
	})
}
