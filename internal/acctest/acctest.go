// Package acctest connects acceptance tests to the real things: the provider served in-process to
// a real OpenTofu or Terraform CLI (chosen by TF_ACC_TERRAFORM_PATH), and a real local fleet from
// internal/testbed.
//
// `make testacc` starts one fleet for every test package and both CLIs and names it in
// GRADUAL_TESTBED_DIR; a test binary run by hand starts its own fleet and stops it in Main.
package acctest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/gradual-dev/terraform-provider-gradual/internal/provider"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// TestbedDirEnv names a running test bed (see cmd/gradual-testbed) for tests to share.
const TestbedDirEnv = "GRADUAL_TESTBED_DIR"

// helperTimeout bounds one read or write a helper makes of the test bed (a check function gets
// no context, and a cleanup runs after the test's own is done).
const helperTimeout = 30 * time.Second

// ProviderFactories serve the provider in-process to the CLI under test.
var ProviderFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"gradual": providerserver.NewProtocol6WithError(provider.New("test")()),
}

var shared struct {
	once    sync.Once
	fleet   *testbed.Fleet
	err     error
	started bool
}

// Main runs the package's tests and then stops the fleet this binary started, if any.
func Main(m *testing.M) {
	code := m.Run()
	if shared.started && shared.fleet != nil {
		// The fleet logged through the first test's t, which has completed by now.
		shared.fleet.SetLogf(func(format string, args ...any) { fmt.Fprintf(os.Stderr, "acctest: "+format+"\n", args...) })
		// Every test's context is done by now: one of its own, bounded so that a stuck bed
		// cannot hang the binary.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := shared.fleet.Down(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "acctest: stopping the test bed: %v\n", err)
		}
		cancel()
	}
	os.Exit(code)
}

// FluxFleet is Fleet for the tests of delivery through Flux: it skips the test on a test bed
// without Flux's controllers (`gradual-testbed up --flux`; tools/testacc.sh's Flux stage starts
// one for them).
func FluxFleet(t *testing.T) *testbed.Fleet {
	t.Helper()
	f := Fleet(t)
	if f.Flux == nil {
		t.Skip("the test bed runs no Flux (gradual-testbed up --flux; tools/testacc.sh's flux stage)")
	}
	return f
}

// Fleet returns the shared test bed, starting it on first use when none is named in the
// environment. It skips the test unless TF_ACC is set, as terraform-plugin-testing does.
func Fleet(t *testing.T) *testbed.Fleet {
	t.Helper()
	PreCheck(t)
	shared.once.Do(func() {
		if dir := os.Getenv(TestbedDirEnv); dir != "" {
			shared.fleet, shared.err = testbed.Load(dir)
			return
		}
		tc, err := testbed.ToolchainFromEnv()
		if err != nil {
			shared.err = err
			return
		}
		// Not t's context: the bed is the package's, started by whichever test comes first.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		shared.fleet, shared.err = testbed.Up(ctx, tc, testbed.Options{Workloads: DefaultWorkloads(), Logf: t.Logf})
		shared.started = shared.err == nil
	})
	if shared.err != nil {
		t.Fatalf("test bed: %v", shared.err)
	}
	return shared.fleet
}

// DefaultWorkloads is the fleet acceptance tests expect: two prod clusters and one staging.
func DefaultWorkloads() []testbed.WorkloadSpec {
	return []testbed.WorkloadSpec{
		{Name: "prod-eu-1", Labels: map[string]string{"env": "prod", "region": "eu"}, Ready: true},
		{Name: "prod-us-1", Labels: map[string]string{"env": "prod", "region": "us"}, Ready: true},
		{Name: "staging-eu-1", Labels: map[string]string{"env": "staging", "region": "eu"}, Ready: true},
	}
}

// PreCheck skips the test unless acceptance tests are enabled and a CLI is chosen.
func PreCheck(t *testing.T) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1 (make testacc does)")
	}
	if os.Getenv("TF_ACC_TERRAFORM_PATH") == "" {
		t.Fatal("TF_ACC_TERRAFORM_PATH must name the tofu or terraform binary to test with (make testacc sets it)")
	}
}

// ProviderConfig is a provider block connected to the fleet's management cluster.
func ProviderConfig(f *testbed.Fleet) string {
	return fmt.Sprintf("provider \"gradual\" {\n  kubeconfig_path = %q\n}\n", f.Management.KubeconfigPath)
}

// UniqueLabel returns a label value unique to this test run, so that tests sharing a fleet can
// pick only the clusters they made.
func UniqueLabel(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// LaneEnv, set to "i/n" by tools/testacc.sh when n CLI lanes run side by side (lane 0 OpenTofu,
// lane 1 Terraform), spreads the tests marked with OnOneLane over the lanes.
const LaneEnv = "GRADUAL_ACC_LANE"

// OnOneLane marks a test whose subject is what the provider does to the fleet (waves, faults,
// records, drift), not how a CLI drives the provider: when tools/testacc.sh runs one lane per
// CLI, such a test runs on lane (mod n) only, and the CLI-specific tests (plans, saved plans,
// import, signals, what the CLI prints) run on every lane. Each test names its lane, so that
// the lanes take about as long. Without LaneEnv (a developer's run, the serial mode) it runs.
func OnOneLane(t *testing.T, lane int) {
	t.Helper()
	runs, err := RunsOnLane(lane)
	if err != nil {
		t.Fatal(err)
	}
	if !runs {
		t.Skipf("runs on lane %s only (%s): it tests what the provider does to the fleet, not the CLI", laneOf(lane), LaneEnv)
	}
}

// RunsOnLane says whether the tests marked OnOneLane(t, lane) run in this process: always
// without LaneEnv. A shared fixture uses it to leave out what only the other lane's tests use.
func RunsOnLane(lane int) (bool, error) {
	i, n, err := thisLane()
	if err != nil || n == 0 {
		return true, err
	}
	return lane%n == i, nil
}

// thisLane parses LaneEnv: n is 0 when it is not set.
func thisLane() (i, n int, err error) {
	env := os.Getenv(LaneEnv)
	if env == "" {
		return 0, 0, nil
	}
	if _, err := fmt.Sscanf(env, "%d/%d", &i, &n); err != nil || n <= 0 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("%s=%q: want i/n with 0 <= i < n", LaneEnv, env)
	}
	return i, n, nil
}

// laneOf names lane as "i/n" for LaneEnv's n.
func laneOf(lane int) string {
	_, n, _ := thisLane()
	return fmt.Sprintf("%d/%d", lane%n, n)
}
