package scaleacc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// ScaleDirEnv names a running scale bed (see cmd/gradual-testbed --clusters).
const ScaleDirEnv = "GRADUAL_TESTBED_SCALE_DIR"

// planLineBudget is the most lines a plan may print for a change over a few hundred clusters
// (issue 13): it grows with the change, not with the fleet.
const planLineBudget = 200

// The drifted cluster has an API server of its own among the picked clusters: records live in
// the workload API server, so Clusters sharing one server drift together.
const drifted = "scale-api-3"

// TestAccScale_planLineBudget applies a gradual_rollout and a gradual_module_assignment to a few
// hundred Clusters of the scale bed, drifts one of them (objects deleted by hand), changes both
// revisions, and checks that the plan, read by a person in a pull request, stays within the line
// budget and names the drifted cluster with what drifted.
func TestAccScale_planLineBudget(t *testing.T) {
	s := setUp(t, "budget")
	ctx, f, cli, picked, label := s.ctx, s.fleet, s.cli, s.picked, s.label
	work := t.TempDir()
	rc := acctest.DevOverrides(t, work)
	run := func(args ...string) (string, time.Duration) {
		t.Helper()
		return acctest.RunCLI(ctx, t, cli, work, rc, args...)
	}
	// The rollout goes in two stages: a first of the drifted cluster and ten that share
	// scale-api-1's API server, then the rest. v1 goes to both; v2 is promoted until the first,
	// so its plan says who waits. (Clusters sharing an API server share what is applied there,
	// so the first stage keeps to one server, and scale-api-2's stays on v1.)
	first := []string{drifted}
	for _, name := range picked {
		if w := f.Workloads[name]; w != nil && w.Spec.SharesWith == "scale-api-1" && len(first) < 11 {
			first = append(first, name)
		}
	}
	write := func(version, promoteUntil string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(work, "main.tf"), []byte(config(f, label, version, first, promoteUntil)), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	write("v1", "")
	_, took := run("apply", "-auto-approve")
	t.Logf("%s: first apply to %d clusters: %s", filepath.Base(cli), len(picked), took.Round(100*time.Millisecond))
	// No destroy: the scale bed is this test's own and torn down after it (a destroy over ~300
	// clusters would double the run time); names and labels are unique to this run, so a run on
	// the other CLI on the same bed picks its own.

	// Drift on one cluster: an object of each bundle deleted by hand.
	wc, err := f.WorkloadClient(drifted)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{label + "-r", label + "-a"} {
		if err := wc.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}); err != nil {
			t.Fatal(err)
		}
	}

	write("v2", "first")
	out, took := run("plan", "-out=plan")
	lines := strings.Count(out, "\n")
	t.Logf("%s: plan of a revision change of both resources over %d clusters, one drifted: %d lines, %s", filepath.Base(cli), len(picked), lines, took.Round(100*time.Millisecond))
	if testing.Verbose() {
		t.Logf("the plan:\n%s", out)
	}
	if lines > planLineBudget {
		t.Errorf("the plan has %d lines, want at most %d:\n%s", lines, planLineBudget, out)
	}
	waiting := 0
	for _, name := range picked {
		if !slices.Contains(first, name) {
			waiting++
		}
	}
	if want := fmt.Sprintf("stops after stage first: %d clusters wait for stage rest", waiting); !strings.Contains(out, want) {
		t.Errorf("the plan does not say who waits (%q):\n%s", want, out)
	}
	for _, res := range []string{"gradual_rollout.scale", "gradual_module_assignment.scale"} {
		if !strings.Contains(out, "# "+res+" will be updated in-place") {
			t.Errorf("the plan does not update %s:\n%s", res, out)
		}
	}
	// Each resource's attention names the drifted cluster and the drifted object.
	for _, ns := range []string{label + "-r", label + "-a"} {
		re := regexp.MustCompile(`"` + drifted + `"\s*=\s*"drifted: [^"\n]*ConfigMap ` + regexp.QuoteMeta(ns) + `/settings`)
		if !re.MatchString(out) {
			t.Errorf("the plan does not name %s drifted (ConfigMap %s/settings):\n%s", drifted, ns, out)
		}
	}
	// Only the changed object is shown: the others' entries of `objects` are hidden, and
	// `manifests`, whose whole text the CLI would print, is sensitive.
	if strings.Contains(out, "unchanged-3") {
		t.Errorf("the plan shows objects that did not change (ConfigMap unchanged-3):\n%s", out)
	}
	if n := strings.Count(out, "unchanged elements hidden"); n < 2 {
		t.Errorf("the plan hides no unchanged objects (%d \"unchanged elements hidden\"), want both resources to:\n%s", n, out)
	}
	if others := regexp.MustCompile(`"(c-\d{4}|scale-api-[12])"\s*=\s*"`).FindAllString(out, -1); len(others) > 0 {
		t.Errorf("the plan lists other clusters one per line: %v", others)
	}
	if t.Failed() {
		return
	}
	_, took = run("apply", "plan")
	t.Logf("%s: apply of that plan: %s", filepath.Base(cli), took.Round(100*time.Millisecond))
	// A cluster of the second stage waits on v1, rendered with its values.
	const waiter = "scale-api-2"
	wwc, err := f.WorkloadClient(waiter)
	if err != nil {
		t.Fatal(err)
	}
	var settings, values corev1.ConfigMap
	if err := wwc.Get(ctx, client.ObjectKey{Namespace: label + "-r", Name: "settings"}, &settings); err != nil || settings.Data["setting"] != "v1" {
		t.Errorf("%s (stage rest, waiting): ConfigMap settings %v %v, want setting v1", waiter, settings.Data, err)
	}
	if err := wwc.Get(ctx, client.ObjectKey{Namespace: label + "-r", Name: "values"}, &values); err != nil || values.Data["picked"] != "picked-yes" {
		t.Errorf("%s: ConfigMap values %v %v, want picked-yes", waiter, values.Data, err)
	}
	for _, ns := range []string{label + "-r", label + "-a"} {
		var cm corev1.ConfigMap
		if err := wc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, &cm); err != nil || cm.Data["setting"] != "v2" {
			t.Errorf("%s: ConfigMap %s/settings after apply: %v %v, want setting v2", drifted, ns, cm.Data, err)
		}
	}
}

// scaleRun is what a test on the scale bed starts from: the bed, its management client, the CLI,
// and the Clusters picked for the test, labelled label=yes (unique to the run, so that runs on
// both CLIs share a bed).
type scaleRun struct {
	ctx        context.Context
	fleet      *testbed.Fleet
	management client.Client
	cli        string
	picked     []string
	label      string
}

// setUp loads the scale bed (skipping the test without one), picks its Clusters and labels
// them; prefix starts the label.
func setUp(t *testing.T, prefix string) scaleRun {
	t.Helper()
	dir := os.Getenv(ScaleDirEnv)
	if dir == "" {
		t.Skip("needs the scale bed: set " + ScaleDirEnv + " (tools/testacc.sh does)")
	}
	acctest.PreCheck(t)
	f, err := testbed.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	s := scaleRun{ctx: ctx, fleet: f, cli: os.Getenv("TF_ACC_TERRAFORM_PATH"), picked: pick(f), label: acctest.UniqueLabel(prefix)}
	if len(s.picked) < 200 {
		t.Fatalf("the scale bed offers %d Clusters for this test, want at least 200 (start it with --clusters 360)", len(s.picked))
	}
	if s.management, err = f.ManagementClient(); err != nil {
		t.Fatal(err)
	}
	if err := labelClusters(ctx, s.management, f.Namespace, s.picked, s.label); err != nil {
		t.Fatal(err)
	}
	return s
}

// pick returns the ready Clusters of the bed except those sharing the drifted cluster's API
// server, sorted.
func pick(f *testbed.Fleet) []string {
	var out []string
	for name, w := range f.Workloads {
		if w.Spec.SharesWith == drifted || !w.Spec.Ready || w.KubeconfigPath == "" {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// labelClusters sets label=yes on each Cluster object (a merge patch of metadata only).
func labelClusters(ctx context.Context, c client.Client, namespace string, names []string, label string) error {
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{%q:"yes"}}}`, label))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, name := range names {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cl := &clusterv1.Cluster{}
			cl.Namespace, cl.Name = namespace, name
			if err := c.Patch(ctx, cl, patch); err != nil {
				errs[i] = fmt.Errorf("label Cluster %s: %w", name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// unchangedObjects is how many ConfigMaps of each bundle stay the same when the version changes:
// ~100 lines of YAML per bundle, which a plan printing the whole text of `manifests` would
// repeat and blow the budget with.
const unchangedObjects = 8

// config is a rollout and an assignment over the labelled Clusters, each a Namespace, a
// ConfigMap holding version and unchangedObjects other ConfigMaps, in waves of a quarter of the
// fleet. The rollout also renders a ConfigMap per cluster (values) and goes in two stages: first
// (the clusters named), then rest, promoted until promoteUntil ("" = both).
func config(f *testbed.Fleet, label, version string, first []string, promoteUntil string) string {
	bundle := func(ns string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %[1]s\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: %[1]s\ndata:\n  setting: %[2]s\n", ns, version)
		for i := range unchangedObjects {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: unchanged-%[2]d\n  namespace: %[1]s\ndata:\n", ns, i)
			for k := range 5 {
				fmt.Fprintf(&b, "  key-%d: value-%d-%d\n", k, i, k)
			}
		}
		return b.String()
	}
	// $${ is a literal ${ in HCL: the provider substitutes it per cluster, from the Cluster's
	// label. The label's value is "yes", which YAML reads as a boolean once substituted alone
	// (Flux's rules), hence the prefix. Nothing that differs between Clusters (their names): the
	// Clusters sharing an API server on this bed share their records there, so a rendering that
	// differed would make each see the others' as its own, changed.
	perCluster := fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: values\n  namespace: %s\ndata:\n  picked: \"picked-$${picked}\"\n", label+"-r")
	names, _ := json.Marshal(first)
	until := "null"
	if promoteUntil != "" {
		until = strconv.Quote(promoteUntil)
	}
	return acctest.DevOverridesConfig(f) + fmt.Sprintf(`
resource "gradual_rollout" "scale" {
  name         = %[2]q
  namespace    = %[1]q
  selector     = { match_labels = { %[2]q = "yes" } }
  manifests    = <<-EOT
%[3]s%[6]s
EOT
  values       = { from_labels = { picked = %[2]q } }
  update_limit = "25%%"
  verify       = { timeout = "5m" }
  stages = [
    { name = "first", names = %[7]s, update_limit = "100%%" },
    { name = "rest", match_labels = { %[2]q = "yes" } },
  ]
  promote_until = %[8]s
}

resource "gradual_module_assignment" "scale" {
  name         = %[2]q
  namespace    = %[1]q
  selector     = { match_labels = { %[2]q = "yes" } }
  modules      = [{ name = "settings", version = %[5]q, manifests = <<-EOT
%[4]s
EOT
  }]
  update_limit = "25%%"
  verify       = { timeout = "5m" }
}
`, f.Namespace, label, bundle(label+"-r"), bundle(label+"-a"), version, perCluster, names, until)
}
