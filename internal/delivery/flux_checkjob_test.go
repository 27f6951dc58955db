package delivery

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestFluxArtifactCarriesCheckJob: through Flux the desired revision's artifact holds the check
// Job, named for the revision, with timeout as its deadline and no TTL (Flux would re-create
// it), and the plan's digest is that artifact's; a revision restored from the records is not
// checked: its artifact holds no Job.
func TestFluxArtifactCarriesCheckJob(t *testing.T) {
	ctx := context.Background()
	w, _ := fluxWorldOf(t, inMemoryRegistry())
	cj := testCheckJob(t, 90*time.Second)
	_ = unstructured.SetNestedField(cj.Job.Object, int64(30), "spec", "ttlSecondsAfterFinished")
	w.spec.CheckJob, w.spec.Revision = cj, "0123456789ab"
	w.engine = w.svc.engine.run(w)
	run := w.engine.(*fluxRun)
	tag, manifests, err := run.fluxArtifact(ctx, "c1", w.spec.Revision)
	if err != nil {
		t.Fatal(err)
	}
	job := jobIn(t, manifests)
	if job == nil || job.GetName() != "smoke-01234567" || job.GetNamespace() != "demo" {
		t.Fatalf("artifact %s holds Job %v, want smoke-01234567 in demo:\n%s", tag, job, manifests)
	}
	if d, _, _ := unstructured.NestedInt64(job.Object, "spec", "activeDeadlineSeconds"); d != 90 {
		t.Errorf("activeDeadlineSeconds = %d, want the check Job's timeout, 90", d)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(job.Object, "spec", "ttlSecondsAfterFinished"); ok {
		t.Error("ttlSecondsAfterFinished kept: Flux would re-create the Job the TTL deletes")
	}
	if cj.Job.GetName() != "smoke" {
		t.Error("the spec's Job was renamed")
	}
	pinned, err := w.svc.engine.pinned(w.spec)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := fluxdelivery.ArtifactDigest(tag, manifests); pinned.Digest != want {
		t.Errorf("plan's digest %s, the artifact's %s: the plan must show what is pinned", pinned.Digest, want)
	}

	canonical, err := w.spec.Objects.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.svc.fluxStore(w.spec.RecordNamespace).MarkProvisioning(ctx, FluxRecordKey(w.spec.Key, "c1"),
		records.Revision{Revision: "r0", Manifests: canonical}); err != nil {
		t.Fatal(err)
	}
	_, restored, err := run.fluxArtifact(ctx, "c1", "r0")
	if err != nil {
		t.Fatal(err)
	}
	if job := jobIn(t, restored); job != nil {
		t.Errorf("the restored revision's artifact holds the check Job %s", job.GetName())
	}
}

func jobIn(t *testing.T, manifests []byte) *unstructured.Unstructured {
	t.Helper()
	set, err := manifest.Parse(string(manifests))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range set.Objects {
		if o.GetKind() == "Job" {
			return o
		}
	}
	return nil
}

// TestCheckJobForFlux: the name keeps within 63 characters, a deadline the Job sets is kept, a
// cluster that runs no Job gets none.
func TestCheckJobForFlux(t *testing.T) {
	cj := testCheckJob(t, time.Minute)
	cj.Job.SetName(strings.Repeat("a", 60))
	_ = unstructured.SetNestedField(cj.Job.Object, int64(10), "spec", "activeDeadlineSeconds")
	job, err := cj.ForFlux("c1", "fedcba9876543210", false)
	if err != nil {
		t.Fatal(err)
	}
	if n := job.GetName(); len(n) != 63 || !strings.HasSuffix(n, "-fedcba98") {
		t.Errorf("name %q (%d), want 63 characters ending -fedcba98", n, len(n))
	}
	if d, _, _ := unstructured.NestedInt64(job.Object, "spec", "activeDeadlineSeconds"); d != 10 {
		t.Errorf("activeDeadlineSeconds = %d, want the Job's own 10", d)
	}
	cj.Only = map[string]bool{"c2": true}
	if job, err := cj.ForFlux("c1", "fedcba98", false); job != nil || err != nil {
		t.Errorf("ForFlux on a cluster that runs none = %v, %v", job, err)
	}
	var none *CheckJob
	if job, err := none.ForFlux("c1", "r", false); job != nil || err != nil {
		t.Errorf("nil CheckJob ForFlux = %v, %v", job, err)
	}
}

// TestCheckJobFluxRevision: the Job and its timeout are part of the revision through Flux (its
// artifact holds them); without a Job the revision is the content's.
func TestCheckJobFluxRevision(t *testing.T) {
	var none *CheckJob
	if r, _ := none.FluxRevision("0123456789ab"); r != "0123456789ab" {
		t.Errorf("without a Job: %s", r)
	}
	a, b := testCheckJob(t, time.Minute), testCheckJob(t, 2*time.Minute)
	ra, _ := a.FluxRevision("0123456789ab")
	ra2, _ := testCheckJob(t, time.Minute).FluxRevision("0123456789ab")
	rb, _ := b.FluxRevision("0123456789ab")
	rc, _ := a.FluxRevision("ba9876543210")
	if ra != ra2 || ra == rb || ra == rc || ra == "0123456789ab" || len(ra) != manifest.RevisionLength {
		t.Errorf("revisions %s %s %s %s: want one per content, Job and timeout", ra, ra2, rb, rc)
	}
}
