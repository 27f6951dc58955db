package moduleassignment_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestAccModuleAssignment_fluxEngineMoveKilled: the CLI (and its provider) killed while the first
// module moves to Flux on the first cluster. Every module on every cluster is then in the charge
// of exactly one engine and runs; the next plan, once the killed holder's Lease expired,
// continues the move in place; its apply completes it with every object the one first seen (no
// UID changed), nothing in the ledger, no direct records left; and a plan after it shows no
// change.
func TestAccModuleAssignment_fluxEngineMoveKilled(t *testing.T) {
	acctest.OnOneLane(t, 0) // what a killed move leaves; the rollout's runs on the other lane
	m := newMoveFixture(t, "fluxmovemk", `update_limit = "1"`)
	cli := os.Getenv("TF_ACC_TERRAFORM_PATH")
	work := t.TempDir()
	rc := acctest.DevOverrides(t, work)
	// A short Lease: the next apply waits out the killed holder's.
	write := func(config string) {
		t.Helper()
		config = "terraform {\n  required_providers {\n    gradual = { source = \"gradual-dev/gradual\" }\n  }\n}\n\n" +
			strings.Replace(config, "provider \"gradual\" {\n", "provider \"gradual\" {\n  lease_duration = \"20s\"\n", 1)
		if err := os.WriteFile(filepath.Join(work, "main.tf"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if out, _, code := acctest.TryCLI(context.Background(), cli, work, rc, "destroy", "-auto-approve"); code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", code, acctest.Tail(out, 40))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	write(m.direct)
	acctest.RunCLI(ctx, t, cli, work, rc, "apply", "-auto-approve")
	if err := m.onEngines(m.clusters...)(nil); err != nil { // also notes each object's UID
		t.Fatal(err)
	}

	write(m.flux)
	p := acctest.StartCLI(t, cli, work, rc, "apply", "-auto-approve")
	fluxStore := records.NewWorkloadStore(m.mc, records.DefaultNamespace)
	moving := func() bool {
		for _, c := range m.clusters {
			if st, err := fluxStore.Load(ctx, delivery.FluxRecordKey(m.key("base"), c)); err == nil && st.Provisioning != nil {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(3 * time.Minute); !moving(); {
		if time.Now().After(deadline) {
			t.Fatal("module base was never recorded moving to Flux")
		}
		select {
		case <-p.Done():
			t.Fatalf("apply ended before module base was moving:\n%s", acctest.Tail(p.Output(), 40))
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.Kill()
	killed := time.Now()
	m.oneEngineEach(ctx, fluxStore)

	// The next plan continues the move, once the killed holder's Lease has expired.
	var out string
	for {
		o, _, code := acctest.TryCLI(ctx, cli, work, rc, "plan", "-detailed-exitcode", "-out=resume.tfplan")
		if code == 2 {
			out = o
			break
		}
		if !strings.Contains(o, "Already Running") || time.Since(killed) > 3*time.Minute {
			t.Fatalf("plan after the kill exited %d:\n%s", code, acctest.Tail(o, 60))
		}
		time.Sleep(5 * time.Second)
	}
	if !strings.Contains(out, "Delivery Engine Moves") || !strings.Contains(out, "updated in-place") {
		t.Errorf("the plan after the kill does not continue the move in place:\n%s", out)
	}
	for {
		o, _, code := acctest.TryCLI(ctx, cli, work, rc, "apply", "resume.tfplan")
		if code == 0 {
			break
		}
		if !strings.Contains(o, "Already Running") || time.Since(killed) > 4*time.Minute {
			t.Fatalf("apply after the kill exited %d:\n%s", code, acctest.Tail(o, 60))
		}
		time.Sleep(5 * time.Second)
		if _, _, code := acctest.TryCLI(ctx, cli, work, rc, "plan", "-detailed-exitcode", "-out=resume.tfplan"); code != 2 {
			t.Fatalf("plan before applying again exited %d, want 2", code)
		}
	}
	if err := m.onEngines()(nil); err != nil {
		t.Fatal(err)
	}
	if o, _, code := acctest.TryCLI(ctx, cli, work, rc, "plan", "-detailed-exitcode"); code != 0 {
		t.Fatalf("plan after the move exited %d, want 0 (no change):\n%s", code, acctest.Tail(o, 60))
	}
}

// oneEngineEach checks, right after a kill, that each module on each cluster is in the charge of
// exactly one engine (its records current on one side only) and that the app runs there.
func (m *moveFixture) oneEngineEach(ctx context.Context, fluxStore *records.WorkloadStore) {
	m.t.Helper()
	for _, c := range m.clusters {
		wc, err := m.f.WorkloadClient(c)
		if err != nil {
			m.t.Fatal(err)
		}
		for _, module := range []string{"base", "app"} {
			onDirect, err := records.NewWorkloadStore(wc, records.DefaultNamespace).Load(ctx, m.key(module))
			if err != nil {
				m.t.Fatal(err)
			}
			viaFlux, err := fluxStore.Load(ctx, delivery.FluxRecordKey(m.key(module), c))
			if err != nil {
				m.t.Fatal(err)
			}
			if (onDirect.Current != nil) == (viaFlux.Current != nil) {
				m.t.Errorf("%s, module %s, after the kill: direct records current %v, Flux records current %v; want exactly one engine in charge",
					c, module, onDirect.Current != nil, viaFlux.Current != nil)
			}
		}
		if err := wc.Get(ctx, client.ObjectKey{Namespace: m.name, Name: "app"}, &corev1.ConfigMap{}); err != nil {
			m.t.Errorf("%s: the app after the kill: %v", c, fmt.Errorf("read ConfigMap %s/app: %w", m.name, err))
		}
	}
}
