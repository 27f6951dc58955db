package rollout_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/oci"
	"github.com/google/go-containerregistry/pkg/crane"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// plannedDigest is the digest of the plan's Flux Artifact warning.
var plannedDigest = regexp.MustCompile(`Flux Artifact[\s\S]*?(sha256:[0-9a-f]{64})`)

// TestAccRollout_fluxPlantedTag: after a saved plan, someone who can push to the repository
// plants another artifact under the tag of the planned revision (`flux push artifact` would do).
// The plan showed the digest computed from the planned manifests; the apply of the saved plan
// refuses, naming the repository, the tag and both digests, and pins nothing: every cluster stays
// on the previous revision and nothing is recorded invalid. Once the tag is deleted, the next
// apply publishes the planned artifact and pins every cluster to the digest the plan showed.
// A saved plan is the CLI's: it runs on every lane.
func TestAccRollout_fluxPlantedTag(t *testing.T) {
	f := acctest.FluxFleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("fluxpin")
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	repository := f.Flux.RegistryURL("gradual/" + name)
	config := func(value string) string {
		return "terraform {\n  required_providers {\n    gradual = { source = \"gradual-dev/gradual\" }\n  }\n}\n" + rolloutConfig(f, name, allThree, fluxBundle(name, value, false), fmt.Sprintf(`canary = ["staging-eu-1"]
  delivery = { flux = { repository = %q, insecure = true } }`, repository))
	}
	t.Cleanup(func() {
		if res := tf.run(context.Background(), "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	tf.writeConfig(config("one"))
	tf.mustRun(ctx, 0, "apply", "-auto-approve")
	before := acctest.FluxPins(t, f, key, clusters)

	tf.writeConfig(config("two"))
	rev := fluxRevisionOf(t, fluxBundle(name, "two", false), repository)
	out := tf.mustRun(ctx, 0, "plan", "-out=tfplan")
	m := plannedDigest.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, ":"+rev) {
		t.Fatalf("the plan shows no Flux Artifact with revision %s and its digest:\n%s", rev, out)
	}
	planned := m[1]

	// Plant another artifact under the planned tag, with Flux's own client.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "manifests.yaml"), []byte(fluxBundle(name, "planted", false)), 0o600); err != nil {
		t.Fatal(err)
	}
	tag := strings.TrimPrefix(repository, oci.OCIRepositoryPrefix) + ":" + rev
	pushed, err := oci.NewClient(append(oci.DefaultOptions(), crane.Insecure)).Push(ctx, tag, dir)
	if err != nil {
		t.Fatal(err)
	}
	_, planted, _ := strings.Cut(pushed, "@")

	res := tf.run(ctx, "apply", "tfplan")
	if res.code == 0 {
		t.Fatalf("the saved plan applied over a planted tag:\n%s", res.output)
	}
	// Terraform wraps a diagnostic's lines: compare without the box and the line breaks.
	flat := strings.Join(strings.Fields(strings.ReplaceAll(res.output, "│", " ")), " ")
	for _, want := range []string{"Artifact Tag Holds Other Content", repository, rev, planted, planned} {
		if !strings.Contains(flat, want) {
			t.Errorf("the refusal does not name %s:\n%s", want, res.output)
		}
	}
	if after := acctest.FluxPins(t, f, key, clusters); !maps.Equal(before, after) {
		t.Errorf("OCIRepositories re-pinned by the refused apply: %v, were %v", after, before)
	}
	if ledger := ledgerOf(t, f, name); len(ledger) > 0 {
		t.Errorf("ledger %+v: a planted tag made the revision invalid", ledger)
	}
	if err := fluxConfigMaps(t, f, name, clusters, "one"); err != nil {
		t.Error(err)
	}

	// The tag deleted (the test bed's registry, go-containerregistry's, deletes a tag as such),
	// the next apply publishes the planned artifact and pins it everywhere.
	if err := crane.Delete(tag, crane.Insecure); err != nil {
		t.Fatal(err)
	}
	tf.mustRun(ctx, 0, "apply", "-auto-approve")
	for c, pin := range acctest.FluxPins(t, f, key, clusters) {
		if pin != planned {
			t.Errorf("%s is pinned to %s, want the planned %s", c, pin, planned)
		}
	}
	if err := fluxConfigMaps(t, f, name, clusters, "two"); err != nil {
		t.Error(err)
	}
}
