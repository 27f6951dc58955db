package fluxdelivery

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/oci"
	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

const pinManifests = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\n"

// testRegistry is go-containerregistry's in-memory registry (the test bed's) and a repository
// in it, as delivery.flux.repository names it.
func testRegistry(t *testing.T) (repo string) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/gradual/web"
}

// pushWithFlux pushes files (name → content) under ref with Flux's own client, as `flux push
// artifact` does: what someone who can push to the repository plants.
func pushWithFlux(t *testing.T, ref string, files map[string]string, meta oci.Metadata) string {
	t.Helper()
	dir := t.TempDir()
	// The modes the provider's artifacts have (t.TempDir's directory is 0755 under umask 022).
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pushed, err := oci.NewClient(append(oci.DefaultOptions(), crane.Insecure)).Push(context.Background(), ref, dir, oci.WithPushMetadata(meta))
	if err != nil {
		t.Fatal(err)
	}
	_, digest, _ := strings.Cut(pushed, "@")
	return digest
}

// The digest a plan computes from the planned content is the digest Publish pushes and the
// registry holds under the tag, and the artifact is the one Flux's client makes of the same
// file and metadata, byte for byte (source-controller reads it as any Flux artifact).
func TestArtifactDigestIsWhatIsPushed(t *testing.T) {
	repo := testRegistry(t)
	ref := strings.TrimPrefix(repo, oci.OCIRepositoryPrefix)
	planned, err := ArtifactDigest("rev1", []byte(pinManifests))
	if err != nil || !strings.HasPrefix(planned, "sha256:") {
		t.Fatalf("ArtifactDigest = %q, %v", planned, err)
	}
	key := records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "web"}
	d := New(nil, Settings{Repository: repo, Insecure: true}, key)
	if err := d.Check(context.Background(), "rev1", []byte(pinManifests)); err != nil {
		t.Fatalf("Check of a tag not published yet: %v", err)
	}
	pushed, err := d.Publish(context.Background(), "rev1", []byte(pinManifests))
	if err != nil || pushed != planned {
		t.Fatalf("Publish = %q, %v; want the planned %q", pushed, err, planned)
	}
	inRegistry, err := crane.Digest(ref+":rev1", crane.Insecure)
	if err != nil || inRegistry != planned {
		t.Fatalf("the registry holds %q under rev1 (%v), want the planned %q", inRegistry, err, planned)
	}
	if err := New(nil, Settings{Repository: repo, Insecure: true}, key).Check(context.Background(), "rev1", []byte(pinManifests)); err != nil {
		t.Fatalf("Check of the planned artifact: %v", err)
	}
	byFlux := pushWithFlux(t, ref+"-flux:rev1", map[string]string{artifactFile: pinManifests},
		oci.Metadata{Source: artifactSource, Revision: "rev1", Created: created})
	if byFlux != planned {
		t.Fatalf("Flux's client makes %s of the same file and metadata, ArtifactDigest %s", byFlux, planned)
	}
}

// The same content pushed twice, by two rollouts, to two repositories, makes one digest: the
// artifact names neither who publishes it nor when.
func TestSameContentSameDigest(t *testing.T) {
	repo := testRegistry(t)
	ctx := context.Background()
	web := records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "web"}
	api := records.Key{Kind: records.KindRollout, Namespace: "other", Name: "api"}
	first, err := New(nil, Settings{Repository: repo, Insecure: true}, web).Publish(ctx, "rev1", []byte(pinManifests))
	if err != nil {
		t.Fatal(err)
	}
	// Another rollout with the same objects shares the tag: it finds the artifact it plans.
	shared, err := New(nil, Settings{Repository: repo, Insecure: true}, api).Publish(ctx, "rev1", []byte(pinManifests))
	if err != nil || shared != first {
		t.Fatalf("another rollout publishing the same content: %q, %v; want %q", shared, err, first)
	}
	again, err := New(nil, Settings{Repository: repo + "-again", Insecure: true}, api).Publish(ctx, "rev1", []byte(pinManifests))
	if err != nil || again != first {
		t.Fatalf("the same content pushed again elsewhere: %q, %v; want %q", again, err, first)
	}
}

// An artifact planted under the planned tag is refused, naming the repository, the tag and both
// digests, and left as it is: nothing is pushed over it, and no digest is returned to pin.
func TestPublishRefusesAPlantedTag(t *testing.T) {
	repo := testRegistry(t)
	ref := strings.TrimPrefix(repo, oci.OCIRepositoryPrefix)
	key := records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "web"}
	planned, err := ArtifactDigest("rev1", []byte(pinManifests))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
	}{
		{"other objects", map[string]string{artifactFile: strings.ReplaceAll(pinManifests, "name: a", "name: evil")}},
		{"the planned file and another", map[string]string{artifactFile: pinManifests, "extra.yaml": "kind: Namespace\n"}},
		{"the planned file, longer", map[string]string{artifactFile: pinManifests + "data: {x: y}\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tagRef := ref + ":rev1"
			plantedDigest := pushWithFlux(t, tagRef, tc.files, oci.Metadata{Source: artifactSource, Revision: "rev1", Created: created})
			d := New(nil, Settings{Repository: repo, Insecure: true}, key)
			if err := d.Check(context.Background(), "rev1", []byte(pinManifests)); !errors.Is(err, ErrTagHoldsOther) {
				t.Fatalf("Check of a planted tag = %v, want ErrTagHoldsOther", err)
			}
			got, err := d.Publish(context.Background(), "rev1", []byte(pinManifests))
			if !errors.Is(err, ErrTagHoldsOther) || got != "" {
				t.Fatalf("Publish over a planted tag = %q, %v; want ErrTagHoldsOther and no digest", got, err)
			}
			for _, want := range []string{repo, "rev1", plantedDigest, planned} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal %q does not name %s", err, want)
				}
			}
			if still, err := crane.Digest(tagRef, crane.Insecure); err != nil || still != plantedDigest {
				t.Errorf("the tag holds %q (%v) after the refusal, want the planted %q left alone", still, err, plantedDigest)
			}
		})
	}
}

// An artifact an earlier version of the provider published under the tag (its source annotation
// named the rollout) holds the planned objects in other bytes: it is the planned content, and
// its digest is the one to pin, so that clusters pinned to it before the upgrade stay on it.
func TestPublishKeepsAnEarlierProvidersArtifact(t *testing.T) {
	repo := testRegistry(t)
	ref := strings.TrimPrefix(repo, oci.OCIRepositoryPrefix)
	key := records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "web"}
	earlier := pushWithFlux(t, ref+":rev1", map[string]string{artifactFile: pinManifests},
		oci.Metadata{Source: "gradual " + key.String(), Revision: "rev1", Created: created})
	planned, err := ArtifactDigest("rev1", []byte(pinManifests))
	if err != nil || planned == earlier {
		t.Fatalf("ArtifactDigest = %q, %v: want a digest other than the earlier artifact's %q", planned, err, earlier)
	}
	d := New(nil, Settings{Repository: repo, Insecure: true}, key)
	got, err := d.Publish(context.Background(), "rev1", []byte(pinManifests))
	if err != nil || got != earlier {
		t.Fatalf("Publish = %q, %v; want the earlier artifact %q", got, err, earlier)
	}
	if dg, err := d.Digest("rev1", []byte(pinManifests)); err != nil || dg != earlier {
		t.Fatalf("Digest after Publish = %q, %v; want the pinned %q", dg, err, earlier)
	}
}
