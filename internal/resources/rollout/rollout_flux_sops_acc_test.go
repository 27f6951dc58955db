package rollout_test

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/fluxcd/pkg/oci"
	"github.com/google/go-containerregistry/pkg/crane"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestAccRollout_fluxSecretEncrypted delivers a Secret of sensitive_manifests through Flux: without
// delivery.flux.decryption the plan refuses, naming the setting; with it the Secret is published
// SOPS-encrypted to the age recipient, and each cluster's Kustomization decrypts it with the age
// key the user keeps in the Cluster's namespace (created here). Every cluster gets the Secret's
// value; the artifact pulled from the registry, the plan and apply output (and their TRACE logs),
// the state and the management cluster's records hold none of it, and the clusters are pinned to
// the digest the plan showed.
func TestAccRollout_fluxSecretEncrypted(t *testing.T) {
	f := acctest.FluxFleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("fluxsops")
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	repository := fluxRepository(f, name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// The age identity the user keeps in the management cluster, in the Clusters' namespace.
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	keySecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-age", Namespace: f.Namespace},
		StringData: map[string]string{"identity.agekey": id.String()}}
	if err := mc.Create(ctx, keySecret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Delete(context.Background(), keySecret) })

	value := "s3cr3t-flux-" + name
	if err := os.WriteFile(filepath.Join(tf.dir, "secret.yaml"), []byte(fmt.Sprintf(
		"apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %s}\nstringData: {password: %q}\n", name, value)), 0o600); err != nil {
		t.Fatal(err)
	}
	config := func(decryption string) string {
		return "terraform {\n  required_providers {\n    gradual = { source = \"gradual-dev/gradual\" }\n  }\n}\n" + rolloutConfig(f, name, allThree, fluxBundle(name, "one", false), fmt.Sprintf(`canary = ["staging-eu-1"]
  sensitive_manifests = file("${path.module}/secret.yaml")
  delivery = { flux = { repository = %q, insecure = true%s } }`, repository, decryption))
	}
	leaks := func(where, text string) {
		t.Helper()
		for _, form := range []string{value, base64.StdEncoding.EncodeToString([]byte(value))} {
			if strings.Contains(text, form) {
				t.Errorf("%s holds the Secret's value %q", where, form)
			}
		}
	}
	t.Cleanup(func() {
		if res := tf.run(context.Background(), "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})

	// Without decryption: refused at plan, naming what to set.
	tf.writeConfig(config(""))
	out := tf.mustRun(ctx, 1, "plan")
	if !strings.Contains(flat(out), "Sensitive Manifests Through Flux Need Decryption") || !strings.Contains(flat(out), "delivery.flux.decryption") {
		t.Fatalf("sensitive_manifests through Flux without decryption were not refused as such:\n%s", out)
	}
	leaks("the refusal", out)

	tf.writeConfig(config(fmt.Sprintf(", decryption = { age_recipient = %q, secret_name = %q }", id.Recipient().String(), keySecret.Name)))
	traced := func(args ...string) string {
		t.Helper()
		p := tf.start(true, args...)
		res := p.wait(t, 6*time.Minute)
		log, _ := os.ReadFile(p.logPath)
		if res.code != 0 {
			t.Fatalf("%s exited %d:\n%s", strings.Join(args, " "), res.code, res.output)
		}
		leaks(args[0]+" output", res.output)
		leaks(args[0]+"'s TRACE log", string(log))
		return res.output
	}
	out = traced("plan", "-out=tfplan")
	m := plannedDigest.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the plan shows no Flux Artifact digest:\n%s", out)
	}
	planned := m[1]
	leaks("the saved plan file", planFileText(t, filepath.Join(tf.dir, "tfplan")))
	traced("apply", "-input=false", "tfplan")

	for _, c := range clusters {
		expectSecret(t, f, c, name, value)
	}
	for c, pin := range acctest.FluxPins(t, f, key, clusters) {
		if pin != planned {
			t.Errorf("%s is pinned to %s, want the planned %s", c, pin, planned)
		}
	}
	stateFile, err := os.ReadFile(filepath.Join(tf.dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	leaks("the state file", string(stateFile))
	rev := tf.stateValues(ctx, "gradual_rollout.test").Revision

	artifact := pulledManifests(t, strings.TrimPrefix(repository, oci.OCIRepositoryPrefix)+"@"+planned)
	leaks("the published artifact", artifact)
	if !strings.Contains(artifact, "ENC[AES256_GCM") || !strings.Contains(artifact, id.Recipient().String()) {
		t.Errorf("the artifact holds no SOPS-encrypted Secret for the recipient:\n%s", artifact)
	}
	for _, c := range clusters {
		state, err := records.NewWorkloadStore(mc, records.DefaultNamespace).Load(ctx, delivery.FluxRecordKey(key, c))
		if err != nil {
			t.Fatal(err)
		}
		if state.Current == nil || state.Current.Revision != rev {
			t.Fatalf("%s: records %+v, want current %s", c, state.Current, rev)
		}
		leaks(c+"'s records in the management cluster", string(state.Current.Manifests))
	}
}

// pulledManifests is the manifests.yaml of the artifact at ref, pulled from the registry.
func pulledManifests(t *testing.T, ref string) string {
	t.Helper()
	img, err := crane.Pull(ref, crane.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("the artifact's layers: %v (%d)", err, len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatal("the artifact holds no manifests.yaml")
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "manifests.yaml" {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
}
