package delivery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestFluxFailClosedWebhookRevision: revision r2 brings a fail-closed webhook (its service is not
// there) over r1's ConfigMap. kustomize-controller dry-runs every object before it applies any,
// so its first reconcile of r2 passes and reports Ready; every later one fails at the
// ConfigMap's dry-run (InternalError: the webhook cannot be called), and so does any pin of r1,
// whose dry-runs meet the webhook before Flux would prune it. The verification of r2 must not
// pass (it would spread to the fleet) and must not blame the revision by a 500 (the
// infrastructure's, as delivering directly, where the cluster lost contact); the restore to r1
// must get past the webhook, and leave r1 running without it.
func TestFluxFailClosedWebhookRevision(t *testing.T) {
	w, mgmt := fluxWorldOf(t, inMemoryRegistry())
	ctx := t.Context()
	r1 := w.spec.Objects
	r2, err := manifest.Parse(string(mustCanonicalYAML(t, r1)) + `---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: policy
webhooks:
  - name: policy.example.com
    admissionReviewVersions: ["v1"]
    sideEffects: None
    failurePolicy: Fail
    clientConfig:
      service: {namespace: app, name: no-such-policy-engine}
    rules:
      - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["configmaps"]}
`)
	if err != nil {
		t.Fatal(err)
	}
	canonical1, err := r1.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	store, rkey := w.svc.fluxStore(w.spec.RecordNamespace), FluxRecordKey(w.spec.Key, "c1")
	if err := store.MarkProvisioning(ctx, rkey, records.Revision{Revision: "r1", Manifests: canonical1}); err != nil {
		t.Fatal(err)
	}
	if err := store.MarkCurrent(ctx, rkey, "r1"); err != nil {
		t.Fatal(err)
	}
	w.spec.Objects, w.spec.Revision = r2, "r2"
	w.engine = w.svc.engine.run(w)
	run := fluxRunOf(w)

	// What each artifact the engine may pin holds, by digest, for the fake controller.
	contents := map[string][]*unstructured.Unstructured{}
	addArtifact := func(tag string, objs []*unstructured.Unstructured) {
		m, err := fluxdelivery.Manifests(objs)
		if err != nil {
			t.Fatal(err)
		}
		if tag == "" {
			sum := sha256.Sum256(m)
			tag = "r1-" + hex.EncodeToString(sum[:])[:12]
		}
		d, err := fluxdelivery.ArtifactDigest(tag, m)
		if err != nil {
			t.Fatal(err)
		}
		contents[d] = objs
	}
	addArtifact("r2", r2.Objects)
	restored, err := manifest.FromCanonical(canonical1)
	if err != nil {
		t.Fatal(err)
	}
	addArtifact("", restored.Objects)
	addArtifact("", fluxdelivery.Disarmed(restored.Objects))
	kc := &webhookController{t: t, mgmt: mgmt, ks: fluxObject(fluxdelivery.KustomizationKind, fluxdelivery.ObjectName(w.spec.Key, "c1")),
		src: fluxObject(fluxdelivery.OCIRepositoryKind, ""), contents: contents}
	go kc.run(ctx)

	if err := w.Apply(ctx, "c1", "r2"); err != nil {
		t.Fatal(err)
	}
	vctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = run.verify(vctx, "c1", "r2")
	cancel()
	switch {
	case err == nil:
		t.Fatal("verify of r2 passed: its webhook refuses its own ConfigMap from the second reconcile on, and it would spread")
	case errors.Is(err, engine.ErrRevisionFailed) || blame.Of(err).Class != blame.Infrastructure:
		t.Fatalf("verify of r2: %v (%s), want the infrastructure's (a webhook that cannot be called: 500), as delivering directly", err, blame.Of(err))
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := run.restore(rctx, "c1", "r1"); err != nil {
		t.Fatalf("restore to r1: %v", err)
	}
	if webhook, objs := kc.cluster(); webhook || len(objs) != 1 || objs[0].GetKind() != "ConfigMap" {
		t.Fatalf("after the restore: webhook %v, objects %v; want r1's ConfigMap alone", webhook, objs)
	}
}

// mustCanonicalYAML is set's objects as a YAML stream.
func mustCanonicalYAML(t *testing.T, set *manifest.Set) []byte {
	t.Helper()
	m, err := fluxdelivery.Manifests(set.Objects)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// webhookController is a small kustomize-controller for one Kustomization on a cluster where
// an artifact's admission configuration takes effect once applied: an object of an artifact is
// dry-run (unless Flux's IfNotPresent skips it, as it exists) before anything is applied, and a
// dry-run fails while a webhook configuration runs there (its service is never there); then
// the artifact's objects run, and Flux prunes what it no longer holds. It reconciles on a new
// source digest and on a reconcile request, as Flux does.
type webhookController struct {
	t        *testing.T
	mgmt     client.Client
	ks, src  *unstructured.Unstructured
	contents map[string][]*unstructured.Unstructured

	mu      sync.Mutex
	running []*unstructured.Unstructured
	handled struct{ digest, token string }
}

func (c *webhookController) cluster() (webhook bool, objs []*unstructured.Unstructured) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fluxdelivery.HoldsAdmission(c.running), c.running
}

func (c *webhookController) run(ctx context.Context) {
	for ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
		ks, src := c.ks.DeepCopy(), c.src.DeepCopy()
		if c.mgmt.Get(ctx, client.ObjectKeyFromObject(ks), ks) != nil {
			continue
		}
		// The OCIRepository the Kustomization names: one per artifact, shared by the clusters.
		name, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "name")
		src.SetName(name)
		if c.mgmt.Get(ctx, client.ObjectKeyFromObject(src), src) != nil {
			continue
		}
		digest, _, _ := unstructured.NestedString(src.Object, "spec", "ref", "digest")
		token := ks.GetAnnotations()["reconcile.fluxcd.io/requestedAt"]
		c.mu.Lock()
		if c.handled.digest == digest && c.handled.token == token {
			c.mu.Unlock()
			continue
		}
		objs, known := c.contents[digest]
		if !known {
			c.mu.Unlock()
			c.t.Errorf("pinned to %s, an artifact the test does not know", digest)
			return
		}
		ready, reason, message, applied := "True", "ReconciliationSucceeded", "Applied revision", digest
		if c.refused(objs) {
			ready, reason, applied = "False", "ReconciliationFailed", ""
			message = `ConfigMap/app/settings dry-run failed (InternalError): Internal error occurred: failed calling webhook "policy.example.com": service "no-such-policy-engine" not found`
		} else {
			c.running = objs
		}
		c.mu.Unlock()
		status := map[string]any{"lastAttemptedRevision": "x@" + digest, "lastHandledReconcileAt": token,
			"conditions": []any{map[string]any{"type": "Ready", "status": ready, "reason": reason, "message": message}}}
		if old, _, _ := unstructured.NestedString(ks.Object, "status", "lastAppliedRevision"); applied == "" && old != "" {
			status["lastAppliedRevision"] = old
		} else if applied != "" {
			status["lastAppliedRevision"] = "x@" + applied
		}
		ks.Object["status"] = status
		if c.mgmt.Update(ctx, ks) == nil {
			c.mu.Lock()
			c.handled.digest, c.handled.token = digest, token
			c.mu.Unlock()
		}
	}
}

// refused says whether the dry-runs of objs fail: one of them is not skipped while a webhook
// configuration runs on the cluster. With mu held.
func (c *webhookController) refused(objs []*unstructured.Unstructured) bool {
	if !fluxdelivery.HoldsAdmission(c.running) {
		return false
	}
	for _, o := range objs {
		if o.GroupVersionKind().Group != "admissionregistration.k8s.io" && o.GetAnnotations()["kustomize.toolkit.fluxcd.io/ssa"] != "IfNotPresent" {
			return true
		}
	}
	return false
}
