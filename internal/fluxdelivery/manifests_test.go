package fluxdelivery

import (
	"strings"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
)

// TestManifestsKeepWhatFluxMustNotPrune: Namespaces, CRDs and objects marked
// gradual.dev/prune: disabled (annotation or label) carry Flux's prune opt-out in the artifact, as
// direct delivery never deletes them; other objects do not, and the objects given are not changed.
func TestManifestsKeepWhatFluxMustNotPrune(t *testing.T) {
	set, err := manifest.Parse(`apiVersion: v1
kind: Namespace
metadata: {name: app}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec: {group: example.com, names: {kind: Widget, plural: widgets}, scope: Namespaced, versions: []}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: shared, namespace: app, annotations: {gradual.dev/prune: disabled}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: labelled, namespace: app, labels: {gradual.dev/prune: disabled}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: app}
`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Manifests(set.Objects)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(out), "---\n")[1:]
	if len(docs) != 5 {
		t.Fatalf("%d documents, want 5:\n%s", len(docs), out)
	}
	kept := map[string]bool{"name: app\n": true, "name: widgets.example.com": true, "name: shared": true, "name: labelled": true, "name: settings": false}
	for name, want := range kept {
		found := false
		for _, doc := range docs {
			if strings.Contains(doc, name) {
				found = true
				if got := strings.Contains(doc, PruneDisabled+": disabled"); got != want {
					t.Errorf("%q carries the prune opt-out: %t, want %t:\n%s", name, got, want, doc)
				}
			}
		}
		if !found {
			t.Errorf("no document with %q", name)
		}
	}
	for _, o := range set.Objects {
		if _, ok := o.GetAnnotations()[PruneDisabled]; ok {
			t.Errorf("Manifests changed the %s it was given", o.GetKind())
		}
	}
}

// TestRevisionSettingsNameTheSource: where the artifact is (repository, insecure) and the pull
// Secrets change the revision, so that a change of either is rolled out in waves; credentials and
// the CA this process pushes with do not.
func TestRevisionSettingsNameTheSource(t *testing.T) {
	base := Settings{Repository: "oci://r.example/fleet/web"}
	same := base
	same.Credentials.Username, same.CABundle = "someone", "pem"
	if string(base.RevisionSettings()) != string(same.RevisionSettings()) {
		t.Error("credentials or the CA changed the revision")
	}
	for name, s := range map[string]Settings{
		"repository":  {Repository: "oci://r.example/fleet/web-2"},
		"insecure":    {Repository: base.Repository, Insecure: true},
		"pull Secret": {Repository: base.Repository, SecretRef: "pull"},
	} {
		if string(s.RevisionSettings()) == string(base.RevisionSettings()) {
			t.Errorf("%s did not change the revision", name)
		}
	}
}
