package acctest

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// CAPIBridgeFleet starts a fleet of its own with the real Cluster API controllers and one kwok
// cluster that Cluster API reconciles (testbed.WorkloadSpec.ClusterAPI), labelled label; it
// holds the Cluster API fleets' lock (CAPD binds fixed ports) until the test ends. Skipped
// unless GRADUAL_TEST_CLUSTER_API=1 and the controllers are built.
func CAPIBridgeFleet(t *testing.T, label string) *testbed.Fleet {
	t.Helper()
	return capiBridgeFleet(t, label, false)
}

// CAPIFluxBridgeFleet is CAPIBridgeFleet with Flux's source-controller and kustomize-controller
// and an OCI registry too (testbed.Options.Flux): the bridge of a resource that delivers through
// Flux. Skipped as CAPIBridgeFleet is, and when Flux's controllers are not built.
func CAPIFluxBridgeFleet(t *testing.T, label string) *testbed.Fleet {
	t.Helper()
	return capiBridgeFleet(t, label, true)
}

func capiBridgeFleet(t *testing.T, label string, flux bool) *testbed.Fleet {
	t.Helper()
	PreCheck(t)
	if os.Getenv("GRADUAL_TEST_CLUSTER_API") != "1" {
		t.Skip("set GRADUAL_TEST_CLUSTER_API=1 to run against the real Cluster API controllers")
	}
	tc, err := testbed.ToolchainFromEnv()
	if err != nil || !tc.HasClusterAPI() {
		t.Skipf("Cluster API controllers not built (tools/toolchain.sh cluster-api): %v", err)
	}
	if flux && !tc.HasFlux() {
		t.Skip("Flux's controllers not built (tools/toolchain.sh flux)")
	}
	lock, err := os.OpenFile("/tmp/gradual-capi.lock", os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	f, err := testbed.Up(ctx, tc, testbed.Options{ClusterAPI: true, Flux: flux, Logf: t.Logf, Workloads: []testbed.WorkloadSpec{
		{Name: "member-1", Labels: map[string]string{label: "yes"}, Ready: true, ClusterAPI: true},
	}})
	t.Cleanup(func() {
		if f != nil {
			dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer dcancel()
			_ = f.Down(dctx)
		}
		_ = lock.Close()
	})
	if err != nil {
		t.Fatalf("Cluster API fleet: %v", err)
	}
	return f
}

// AwaitBridged waits until cluster holds the ConfigMaps of each module (named after the module,
// in namespace ns), and returns their UIDs.
func AwaitBridged(t *testing.T, f *testbed.Fleet, cluster, ns string, names []string, within time.Duration) map[string]types.UID {
	t.Helper()
	c, err := f.WorkloadClient(cluster)
	if err != nil {
		t.Fatal(err)
	}
	deadline := clock.System{}.Now().Add(within)
	for {
		uids := map[string]types.UID{}
		for _, n := range names {
			cm := &corev1.ConfigMap{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: n}, cm); err == nil {
				uids[n] = cm.UID
			}
		}
		if len(uids) == len(names) {
			return uids
		}
		if (clock.System{}).Now().After(deadline) {
			t.Fatalf("%s got %d of the %d modules from the bridge within %s", cluster, len(uids), len(names), within)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// AwaitPlan plans until the output holds want (Cluster API binds and applies on its own time),
// and returns that output.
func AwaitPlan(ctx context.Context, t *testing.T, cli, work, rc, want string) string {
	t.Helper()
	deadline := clock.System{}.Now().Add(time.Minute)
	for {
		out, _ := RunCLI(ctx, t, cli, work, rc, "plan")
		if strings.Contains(out, want) {
			return out
		}
		if (clock.System{}).Now().After(deadline) {
			t.Fatalf("no plan within a minute says %q; the last:\n%s", want, Tail(out, 60))
		}
		time.Sleep(2 * time.Second)
	}
}

// ExpectCreatedInOrder checks that cluster's ConfigMaps names (in namespace ns, as the bridge
// created them and nothing changed them since) were created in that order: each one's
// resourceVersion above the one before. A resourceVersion is opaque to clients in general; on the
// test bed's API servers, each with an etcd of its own, it is the etcd revision of the object's
// last write, which here is its creation.
func ExpectCreatedInOrder(t *testing.T, f *testbed.Fleet, cluster, ns string, names ...string) {
	t.Helper()
	c, err := f.WorkloadClient(cluster)
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i, n := range names {
		cm := &corev1.ConfigMap{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: n}, cm); err != nil {
			t.Fatal(err)
		}
		rv, err := strconv.ParseUint(cm.ResourceVersion, 10, 64)
		if err != nil {
			t.Fatalf("%s/%s: resourceVersion %q: %v", ns, n, cm.ResourceVersion, err)
		}
		if i > 0 && rv <= last {
			t.Errorf("%s: %s/%s (resourceVersion %d) was created before %s (resourceVersion %d): the modules came out of order",
				cluster, ns, n, rv, names[i-1], last)
		}
		last = rv
	}
}
