package fluxdelivery

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/fluxcd/pkg/oci"
	"github.com/google/go-containerregistry/pkg/crane"
	gcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The artifact of a revision is built here, the way Flux's client builds one (oci.Client.Push:
// its tarball layer, media types and annotations), but without pushing it, so that its digest is
// known from the planned content alone: at plan, and at apply before anything is pushed or
// pinned. Everything in it is a function of the tag and the objects: Flux's tar zeroes owners
// and times, gzip writes no time, the creation stamp is fixed (created), and nothing names who
// publishes it (two rollouts with the same objects share the tag, and so the artifact).

// artifactSource is every artifact's source annotation: the same whoever publishes it.
const artifactSource = "gradual"

// ErrTagHoldsOther is Publish's error when the tag of a revision holds an artifact with other
// content than the planned one: published by someone else, it is never pinned.
var ErrTagHoldsOther = errors.New("the tag holds other content than the planned revision")

// buildArtifact is the artifact tagged tag holding manifests (manifestsFile): the image
// oci.Client.Push would push for them, built in memory.
func buildArtifact(tag string, manifests []byte) (gcrv1.Image, error) {
	dir, err := os.MkdirTemp("", "gradual-artifact-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	src := filepath.Join(dir, "src")
	// The tar headers keep the modes: set, not left to the umask (as the provider's artifacts
	// always had them: a directory of MkdirTemp's 0700, the file 0600).
	file := filepath.Join(src, artifactFile)
	if err := os.Mkdir(src, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, manifests, 0o600); err != nil {
		return nil, err
	}
	if err := errors.Join(os.Chmod(src, 0o700), os.Chmod(file, 0o600)); err != nil {
		return nil, err
	}
	tgz := filepath.Join(dir, "artifact.tgz")
	// Flux's own archiver (oci.Client.Build: fluxcd/pkg/tar), as Push uses.
	if err := (&oci.Client{}).Build(tgz, src, nil); err != nil {
		return nil, fmt.Errorf("build the artifact: %w", err)
	}
	layerBytes, err := os.ReadFile(tgz)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(oci.CanonicalContentMediaType))
	if err != nil {
		return nil, err
	}
	stamp, err := time.Parse(time.RFC3339, created)
	if err != nil {
		return nil, err
	}
	meta := oci.Metadata{Source: artifactSource, Revision: tag, Created: created}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, oci.CanonicalConfigMediaType)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg.Created = gcrv1.Time{Time: stamp}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	annotated, ok := mutate.Annotations(img, meta.ToAnnotations()).(gcrv1.Image)
	if !ok {
		return nil, errors.New("annotating the artifact gave no image")
	}
	return mutate.Append(annotated, mutate.Addendum{Layer: layer})
}

// ArtifactDigest is the digest ("sha256:…") of the artifact tagged tag holding manifests: what
// Publish pushes and pins for them, known before anything is pushed.
func ArtifactDigest(tag string, manifests []byte) (string, error) {
	img, err := buildArtifact(tag, manifests)
	if err != nil {
		return "", err
	}
	h, err := img.Digest()
	if err != nil {
		return "", err
	}
	return h.String(), nil
}

// holdsManifests reports whether the artifact at ref holds exactly manifests as its one file:
// the same content as the planned artifact in other bytes (published by an earlier version of
// the provider, whose artifacts named the rollout that published them).
func (d *Delivery) holdsManifests(ctx context.Context, ref string, manifests []byte) (bool, error) {
	img, err := crane.Pull(ref, append(d.oci.GetOptions(), crane.WithContext(ctx))...)
	if err != nil {
		return false, err
	}
	layers, err := img.Layers()
	if err != nil {
		return false, err
	}
	if len(layers) != 1 {
		return false, nil
	}
	if mt, err := layers[0].MediaType(); err != nil || mt != oci.CanonicalContentMediaType {
		return false, err
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return false, err
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	found := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return found, nil
		}
		if err != nil {
			return false, err
		}
		switch {
		case h.Typeflag == tar.TypeDir && (h.Name == "." || h.Name == "./"):
		case h.Typeflag == tar.TypeReg && h.Name == artifactFile && !found:
			// Read one byte more than the planned content: a longer file is other content.
			got, err := io.ReadAll(io.LimitReader(tr, int64(len(manifests))+1))
			if err != nil {
				return false, err
			}
			if !bytes.Equal(got, manifests) {
				return false, nil
			}
			found = true
		default:
			return false, nil // any other file is other content
		}
	}
}
