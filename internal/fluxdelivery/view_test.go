package fluxdelivery

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// kustomizationEvent is a Kustomization as kustomize-controller leaves it after applying a
// revision of four workloads to a cluster: what each event of the run's watch carries.
const kustomizationEvent = `{"apiVersion":"kustomize.toolkit.fluxcd.io/v1","kind":"Kustomization","metadata":{
"annotations":{"gradual.dev/cluster-name":"scale-0042","gradual.dev/rollout-key":"rollout/fleet/web"},
"creationTimestamp":"2026-11-28T04:31:07Z","finalizers":["finalizers.fluxcd.io"],"generation":3,
"labels":{"app.kubernetes.io/managed-by":"gradual","gradual.dev/cluster":"scale-0042","gradual.dev/rollout":"0123456789abcdef"},
"managedFields":[
{"apiVersion":"kustomize.toolkit.fluxcd.io/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{"f:gradual.dev/cluster-name":{},"f:gradual.dev/rollout-key":{}},"f:labels":{"f:app.kubernetes.io/managed-by":{},"f:gradual.dev/cluster":{},"f:gradual.dev/rollout":{}}},"f:spec":{"f:interval":{},"f:kubeConfig":{"f:secretRef":{"f:key":{},"f:name":{}}},"f:path":{},"f:prune":{},"f:retryInterval":{},"f:sourceRef":{"f:kind":{},"f:name":{}},"f:timeout":{},"f:wait":{}}},"manager":"gradual","operation":"Apply","time":"2026-11-28T04:31:07Z"},
{"apiVersion":"kustomize.toolkit.fluxcd.io/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:finalizers":{".":{},"v:\"finalizers.fluxcd.io\"":{}}}},"manager":"gotk-kustomize-controller","operation":"Update","time":"2026-11-28T04:31:08Z"},
{"apiVersion":"kustomize.toolkit.fluxcd.io/v1","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:conditions":{},"f:history":{},"f:inventory":{".":{},"f:entries":{}},"f:lastAppliedRevision":{},"f:lastAttemptedRevision":{},"f:observedGeneration":{}}},"manager":"gotk-kustomize-controller","operation":"Update","subresource":"status","time":"2026-11-28T04:31:19Z"}],
"name":"gradual-rollout-fleet-web-scale-0042-0123456789ab","namespace":"fleet","resourceVersion":"918273","uid":"5f8e2a34-1c1d-4c3b-9a61-0c7a1f3e9b21"},
"spec":{"interval":"10m","kubeConfig":{"secretRef":{"key":"value","name":"scale-0042-kubeconfig"}},"path":"./","prune":true,"retryInterval":"5s","sourceRef":{"kind":"OCIRepository","name":"gradual-rollout-fleet-web-scale-0042-0123456789ab"},"timeout":"4m0s","wait":true},
"status":{"conditions":[{"lastTransitionTime":"2026-11-28T04:31:19Z","message":"Applied revision: v2@sha256:7d2f0c1b8e4a6f3d9c5b2a1e0f8d7c6b5a4e3d2c1b0a9f8e7d6c5b4a3e2d1c0b","observedGeneration":3,"reason":"ReconciliationSucceeded","status":"True","type":"Ready"},{"lastTransitionTime":"2026-11-28T04:31:19Z","message":"Health check passed in 9.01s","observedGeneration":3,"reason":"Succeeded","status":"True","type":"Healthy"}],
"history":[{"digest":"sha256:1f2e3d4c5b6a79881726354453627180","firstReconciled":"2026-11-28T04:31:19Z","lastReconciled":"2026-11-28T04:31:19Z","lastReconciledDuration":"9.9s","lastReconciledStatus":"ReconciliationSucceeded","metadata":{"revision":"v2@sha256:7d2f0c1b8e4a6f3d9c5b2a1e0f8d7c6b5a4e3d2c1b0a9f8e7d6c5b4a3e2d1c0b"},"totalReconciliations":1}],
"inventory":{"entries":[{"id":"default_web-0__Service","v":"v1"},{"id":"default_web-1__Service","v":"v1"},{"id":"default_web-2__Service","v":"v1"},{"id":"default_web-3__Service","v":"v1"},{"id":"default_web-0_apps_Deployment","v":"v1"},{"id":"default_web-1_apps_Deployment","v":"v1"},{"id":"default_web-2_apps_Deployment","v":"v1"},{"id":"default_web-3_apps_Deployment","v":"v1"}]},
"lastAppliedRevision":"v2@sha256:7d2f0c1b8e4a6f3d9c5b2a1e0f8d7c6b5a4e3d2c1b0a9f8e7d6c5b4a3e2d1c0b","lastAttemptedRevision":"v2@sha256:7d2f0c1b8e4a6f3d9c5b2a1e0f8d7c6b5a4e3d2c1b0a9f8e7d6c5b4a3e2d1c0b","observedGeneration":3}}`

// BenchmarkDecodeKustomizationEvent is the decoding of one watch event into the view, as the
// client's codec does it: kustomize-controller writes a Kustomization's status several times a
// reconcile, and the run's watch decodes each write of the clusters it follows.
func BenchmarkDecodeKustomizationEvent(b *testing.B) {
	codecs := serializer.NewCodecFactory(StatusScheme())
	dec := codecs.UniversalDeserializer()
	data := []byte(kustomizationEvent)
	b.ReportAllocs()
	for b.Loop() {
		obj, _, err := dec.Decode(data, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if ks, ok := obj.(*kustomizationView); !ok || ks.status().Ready != "True" || ks.Annotations[annotationClusterName] != "scale-0042" {
			b.Fatalf("decoded %#v", obj)
		}
	}
}
