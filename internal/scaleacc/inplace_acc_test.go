package scaleacc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed/updateext"
)

// surged is the picked cluster whose MachineDeployment rolls out with maxSurge 1: Cluster API
// creates a new Machine first and deletes an old one instead of updating it in place, whatever
// the extensions answer, and which one no one can tell; so the plan must name that cluster, and
// it alone, as needing attention.
const surged = "c-0010"

// TestAccScale_inPlacePlanLineBudget plans a Kubernetes upgrade of every worker of a few hundred
// Clusters of the scale bed with gradual_inplace_update (the fleet form), through the real CLI,
// and checks that the plan stays within the line budget: waves in one line, a summary of counts,
// and per-cluster lines only for the one cluster whose machines Cluster API would replace.
//
// Plan only. The MachineDeployments and Machines are written by the test bed as Cluster API's
// controllers would have made them (no controllers run on a scale bed), and the update extension
// is the reference one, answering CanUpdateMachine: what is measured is what the provider reads,
// asks and prints at this size. Whether Cluster API then does what the preview says is checked
// against the real controllers (internal/resources/inplaceupdate, TestAccCAPIInPlace_*).
func TestAccScale_inPlacePlanLineBudget(t *testing.T) {
	s := setUp(t, "inplace")
	ctx, f, mc, cli, picked, label := s.ctx, s.fleet, s.management, s.cli, s.picked, s.label
	start := time.Now()
	if err := addWorkers(ctx, f, mc, picked, label); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote a MachineDeployment with 2 Machines for each of %d Clusters in %s", len(picked), time.Since(start).Round(100*time.Millisecond))
	ext, err := updateext.Start(updateext.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ext.Close() })

	work := t.TempDir()
	rc := acctest.DevOverrides(t, work)
	if err := os.WriteFile(filepath.Join(work, "main.tf"), []byte(inPlaceConfig(f, label, ext)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, took := acctest.RunCLI(ctx, t, cli, work, rc, "plan")
	lines := strings.Count(out, "\n")
	t.Logf("%s: plan of an in-place upgrade of %d MachineDeployments (%d machines) over %d clusters: %d lines, %s; CanUpdateMachine calls: %d",
		filepath.Base(cli), len(picked), 2*len(picked), len(picked), lines, took.Round(100*time.Millisecond), ext.Calls()["CanUpdateMachine"])
	if testing.Verbose() {
		t.Logf("the plan:\n%s", out)
	}
	if lines > planLineBudget {
		t.Errorf("the plan has %d lines, want at most %d:\n%s", lines, planLineBudget, out)
	}
	if !strings.Contains(out, "# gradual_inplace_update.scale will be created") {
		t.Errorf("the plan does not create gradual_inplace_update.scale:\n%s", out)
	}
	// Every worker planned in place, the extension covering the version; the surged cluster
	// named with what Cluster API may do there, and no other cluster on a line of its own. A
	// create has no refreshed state to plan from, so `summary` and `attention` are known after
	// apply and the preview is the In-Place Preview warning (which the CLI may wrap: "│ " and
	// line breaks count as spaces).
	const sp = `[\s│]+`
	if want := fmt.Sprintf(`\b%d`+sp+`machine\(s\)`+sp+`updated`+sp+`in`+sp+`place`, 2*len(picked)); !regexp.MustCompile(want).MatchString(out) {
		t.Errorf("the preview does not count %d machines in place:\n%s", 2*len(picked), out)
	}
	if !regexp.MustCompile(surged + `:` + sp + `machines` + sp + `[\s\S]*?may` + sp + `be` + sp + `replaced` + sp + `by` + sp + `Cluster` + sp + `API` + sp + `\([\s\S]*?maxSurge` + sp + `1`).MatchString(out) {
		t.Errorf("the preview does not name %s with the machines Cluster API may replace and why:\n%s", surged, out)
	}
	others := regexp.MustCompile(`-`+sp+`(c-\d{4}|scale-api-\d):`+sp).FindAllString(out, -1)
	if len(others) != 1 {
		t.Errorf("the plan lists %d clusters one per line, want only %s: %v", len(others), surged, others)
	}
	if n := ext.Calls()["CanUpdateMachine"]; n < len(picked) {
		t.Errorf("the extension was asked %d times, want at least once per cluster (%d)", n, len(picked))
	}
}

// addWorkers writes, for each cluster, a MachineDeployment <cluster>-<label> with two Machines on
// the old version, labelled label=yes; the surged cluster's rolls out with maxSurge 1.
func addWorkers(ctx context.Context, f *testbed.Fleet, mc client.Client, clusters []string, label string) error {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, cluster := range clusters {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			name := cluster + "-" + label
			_, err := f.AddMachineDeployment(ctx, testbed.MachineDeploymentSpec{
				Cluster: cluster, Name: name, Replicas: 2, Labels: map[string]string{label: "yes"},
			})
			if err == nil && cluster == surged {
				md := &unstructured.Unstructured{}
				md.SetAPIVersion("cluster.x-k8s.io/v1beta2")
				md.SetKind("MachineDeployment")
				md.SetNamespace(f.Namespace)
				md.SetName(name)
				err = mc.Patch(ctx, md, client.RawPatch("application/merge-patch+json",
					[]byte(`{"spec":{"rollout":{"strategy":{"rollingUpdate":{"maxSurge":1,"maxUnavailable":0}}}}}`)))
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", cluster, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d clusters: %v", len(errs), errs[0])
	}
	return nil
}

// inPlaceConfig upgrades the labelled MachineDeployments of the labelled Clusters to a new
// Kubernetes version, a tenth of the clusters at a time, with the reference extension; machines
// Cluster API would replace are let be replaced (fallback "rolling"), and shown.
func inPlaceConfig(f *testbed.Fleet, label string, ext *updateext.Server) string {
	return acctest.DevOverridesConfig(f) + fmt.Sprintf(`
resource "gradual_inplace_update" "scale" {
  namespace                   = %[1]q
  selector                    = { match_labels = { %[2]q = "yes" } }
  machine_deployment_selector = { match_labels = { %[2]q = "yes" } }
  version                     = "v1.37.0"
  update_limit                = "10%%"
  fallback                    = "rolling"
  extensions = [{
    name      = "gradual-update"
    url       = %[3]q
    ca_bundle = <<-EOT
%[4]s
EOT
  }]
}
`, f.Namespace, label, ext.URL(), strings.TrimSpace(string(ext.CABundle())))
}
