//go:build unix

package rollout_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// A holder paused past its Lease (SIGSTOP: a frozen CI runner, a VM migration) while a second
// apply of the same state takes over: the second converges, and the first, once resumed, makes
// no write at all — it finds its Lease lost and stops, without restoring the cluster it had in
// flight (which now runs the second apply's revision). Checked by the resourceVersions of every
// record and every object of the rollout, before and after the first resumes.
func TestAccRollout_pausedHolderMakesNoWrite(t *testing.T) {
	acctest.OnOneLane(t, 1) // the Lease's fencing, not how a CLI drives the provider
	testPausedHolderMakesNoWrite(t, directEngine)
}

// TestAccRollout_fluxContract_pausedHolderMakesNoWrite: the same through Flux. The paused
// holder's cluster in flight is one whose Kustomization it pinned; the second apply's run
// pins it again, and the resumed holder must neither re-pin any Kustomization (a restore
// would take that cluster back) nor write a record in the management cluster.
func TestAccRollout_fluxContract_pausedHolderMakesNoWrite(t *testing.T) {
	acctest.OnOneLane(t, 0) // the Lease's fencing, not how a CLI drives the provider
	testPausedHolderMakesNoWrite(t, fluxEngine)
}

func testPausedHolderMakesNoWrite(t *testing.T, e engineUnderTest) {
	f := e.fleet(t)
	first := newCLIRun(t)
	name := acctest.UniqueLabel("paused")
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	v1, v2 := app(name, "v1", false, ""), slowReady(app(name, "v2", false, ""), interruptMinReady)
	rev2 := e.revision(t, f, name, v2)
	key := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}
	second := newCLIRun(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if res := second.run(ctx, "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})
	const lease = 15 * time.Second
	config := func(manifests string) string {
		return strings.Replace(e.withDeliveryHCL(f, name, interruptConfig(f, name, manifests)), "provider \"gradual\" {\n",
			fmt.Sprintf("provider \"gradual\" {\n  lease_duration = %q\n", lease), 1)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	first.writeConfig(config(v1))
	first.mustRun(ctx, 0, "apply", "-auto-approve")

	// The first apply of v2, paused while its first cluster is in flight.
	first.writeConfig(config(v2))
	p := first.start(false, "apply", "-auto-approve")
	defer p.kill()
	inFlight := waitInFlight(t, f, key, rev2, "v2", p, 3*time.Minute)
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP: %v", err)
	}
	paused := time.Now()
	t.Logf("paused the first apply (process group %d) with %s in flight", p.cmd.Process.Pid, inFlight.cluster)

	// A second apply of the same state (as a re-run CI job would find it) waits out the Lease
	// and the takeover margin, then takes v2 everywhere.
	for _, file := range []string{"main.tf", "terraform.tfstate"} {
		b, err := os.ReadFile(filepath.Join(first.dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(second.dir, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	second.mustRun(ctx, 0, "apply", "-auto-approve", "-lock=false")
	if waited := time.Since(paused); waited < lease {
		t.Errorf("the second apply finished %s after the pause, before the paused holder's Lease (%s) expired", waited, lease)
	}
	if err := expectDeployment(f, clusters, name, "v2", true); err != nil {
		t.Fatalf("after the second apply: %v", err)
	}
	before := rolloutVersions(t, e, f, clusters, key)

	// The first resumes: it must find its Lease lost and write nothing.
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT: %v", err)
	}
	res := p.wait(t, 3*time.Minute)
	t.Logf("the resumed apply exited %d:\n%s", res.code, res.output)
	if res.code == 0 {
		t.Error("the resumed apply exited 0 after losing its Lease")
	}
	if !regexp.MustCompile(`Lease Lost|lease lost`).MatchString(res.output) {
		t.Error("the resumed apply does not say it lost its Lease")
	}
	after := rolloutVersions(t, e, f, clusters, key)
	for obj, v := range before {
		if after[obj] != v {
			t.Errorf("%s changed after the paused holder resumed: resourceVersion %s → %q", obj, v, after[obj])
		}
	}
	for obj := range after {
		if _, ok := before[obj]; !ok {
			t.Errorf("%s was created after the paused holder resumed", obj)
		}
	}
	if err := expectDeployment(f, clusters, name, "v2", true); err != nil {
		t.Errorf("after the resume: %v", err)
	}

	// The second workspace's next plan is empty, and nothing is recorded invalid.
	second.mustRun(ctx, 0, "plan", "-detailed-exitcode", "-lock=false")
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	if ledger, err := records.NewManagementStore(mc, records.DefaultNamespace).Ledger(ctx, key); err != nil || len(ledger) != 0 {
		t.Errorf("ledger %+v, %v: want empty", ledger, err)
	}
}

// rolloutVersions maps every object of the rollout key — what engine e keeps for it
// (e.owned), and the objects of its bundle (in namespace key.Name) in each cluster — to its
// resourceVersion (a Deployment to its generation).
func rolloutVersions(t *testing.T, e engineUnderTest, f *testbed.Fleet, clusters []string, key records.Key) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := e.owned(t, f, clusters, key)
	for _, cluster := range clusters {
		c, err := f.WorkloadClient(cluster)
		if err != nil {
			t.Fatal(err)
		}
		var cms corev1.ConfigMapList
		if err := c.List(ctx, &cms, client.InNamespace(key.Name)); err != nil {
			t.Fatalf("%s: %v", cluster, err)
		}
		for i := range cms.Items {
			out[objectAt(cluster, &cms.Items[i])] = cms.Items[i].ResourceVersion
		}
		// A Deployment's status changes with its pods: its generation counts writes of its spec.
		var ds appsv1.DeploymentList
		if err := c.List(ctx, &ds, client.InNamespace(key.Name)); err != nil {
			t.Fatalf("%s: %v", cluster, err)
		}
		for _, d := range ds.Items {
			out[fmt.Sprintf("%s: Deployment %s/%s generation", cluster, d.Namespace, d.Name)] = fmt.Sprint(d.Generation)
		}
	}
	if len(out) == 0 {
		t.Fatal("found nothing of the rollout to compare")
	}
	return out
}

func objectAt(where string, o client.Object) string {
	return fmt.Sprintf("%s: %T %s/%s", where, o, o.GetNamespace(), o.GetName())
}

// recordVersions maps the record Secrets of the rollouts keys in the record namespace c
// reaches (where names it) to their resourceVersions; it fails the test if there are none.
func recordVersions(t *testing.T, out map[string]string, where string, c client.Client, keys ...records.Key) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace(records.DefaultNamespace)); err != nil {
		t.Fatalf("%s: list records: %v", where, err)
	}
	want := map[string]bool{}
	for _, k := range keys {
		want[k.String()] = true
	}
	n := 0
	for i := range secrets.Items {
		if want[secrets.Items[i].Annotations[records.AnnotationRolloutKey]] {
			out[objectAt(where, &secrets.Items[i])] = secrets.Items[i].ResourceVersion
			n++
		}
	}
	if n == 0 {
		t.Fatalf("%s: no record of %v", where, keys)
	}
}
