package manifest

import (
	"errors"
	"strings"
	"testing"
)

// parseDuplicate parses text, wants a duplicate key error in document index, and returns it.
func parseDuplicate(t *testing.T, text string, index int) (*DocumentError, *DuplicateKeyError) {
	t.Helper()
	_, err := Parse(text)
	var doc *DocumentError
	var dup *DuplicateKeyError
	if !errors.As(err, &doc) || !errors.As(err, &dup) {
		t.Fatalf("want a duplicate key DocumentError, got %v", err)
	}
	if doc.Index != index {
		t.Fatalf("document %d named, want %d: %v", doc.Index, index, err)
	}
	return doc, dup
}

func TestParseRefusesDuplicateTopLevelKey(t *testing.T) {
	text := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\ndata: {k: first}\ndata: {k: second}\n"
	doc, dup := parseDuplicate(t, text, 1)
	if dup.Key != "data" || dup.Path != "" || dup.FirstLine != 4 || dup.Line != 5 {
		t.Errorf("got %+v", dup)
	}
	want := `document 1 (v1 ConfigMap a): duplicate key "data" at the top level (lines 4 and 5 of the document)`
	if doc.Error() != want {
		t.Errorf("message:\n got %s\nwant %s", doc.Error(), want)
	}
	if msg := doc.Error(); strings.Contains(msg, "first") || strings.Contains(msg, "second") {
		t.Errorf("message quotes a value: %s", msg)
	}
	// A duplicate among the fields that name the object leaves the object unnamed.
	doc, dup = parseDuplicate(t, "apiVersion: v1\nkind: ConfigMap\nkind: Secret\nmetadata: {name: a}\n", 1)
	if dup.Key != "kind" || doc.Object != "" || !strings.HasPrefix(doc.Error(), `document 1: duplicate key "kind" at the top level`) {
		t.Errorf("got %v", doc)
	}
}

func TestParseRefusesDuplicateNestedKey(t *testing.T) {
	text := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: demo
  labels:
    app: web
    tier: front
    app: other
spec:
  replicas: 2
`
	doc, dup := parseDuplicate(t, text, 1)
	if dup.Key != "app" || dup.Path != "metadata.labels" || doc.Object != "apps/v1 Deployment web" {
		t.Errorf("got %+v in %q", dup, doc.Object)
	}
	if !strings.Contains(doc.Error(), `duplicate key "app" at metadata.labels`) {
		t.Errorf("message: %s", doc.Error())
	}
	// In lists and under keys a dot would misread, the path says where.
	list := `apiVersion: v1
kind: Pod
metadata:
  name: p
  annotations:
    example.com/config:
      a: 1
      a: 2
spec:
  containers:
  - name: app
    image: app:1
  - name: sidecar
    env:
    - {name: A, value: "1", name: B}
`
	_, dup = parseDuplicate(t, list, 1)
	if dup.Key != "a" || dup.Path != `metadata.annotations["example.com/config"]` {
		t.Errorf("got %+v", dup)
	}
	_, dup = parseDuplicate(t, strings.Replace(list, "      a: 2\n", "", 1), 1)
	if dup.Key != "name" || dup.Path != "spec.containers[1].env[0]" {
		t.Errorf("got %+v", dup)
	}
}

func TestParseRefusesDuplicateKeyInSecondDocument(t *testing.T) {
	text := namespace + "---\n" + strings.Replace(deployment, "  replicas: 2\n", "  replicas: 2\n  replicas: 3\n", 1)
	doc, _ := parseDuplicate(t, text, 2)
	want := `document 2 (apps/v1 Deployment web): duplicate key "replicas" at spec (lines 7 and 8 of the document)`
	if doc.Error() != want {
		t.Errorf("message:\n got %s\nwant %s", doc.Error(), want)
	}
	// The same through Bundle, in either half; of the sensitive half no value either.
	if _, err := Bundle(text, ""); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Bundle(public): %v", err)
	}
	hidden := secret + "---\n" + strings.Replace(secret, "stringData: {password: hunter2-very-secret}", "stringData:\n  password: hunter2-very-secret\n  password: hunter3-very-secret", 1)
	_, err := Bundle(namespace, hidden)
	if err == nil || !strings.Contains(err.Error(), `sensitive manifests: document 2 (v1 Secret db): duplicate key "password" at stringData`) ||
		strings.Contains(err.Error(), "hunter") {
		t.Errorf("Bundle(sensitive): %v", err)
	}
}

func TestParseDuplicateKeysThroughMergeKeys(t *testing.T) {
	// Kubernetes' strict decoding counts a key a merge key already set as set twice.
	text := `apiVersion: v1
kind: ConfigMap
metadata: {name: a}
x-defaults: &defaults {k: one, j: two}
data:
  <<: *defaults
  k: three
`
	doc, dup := parseDuplicate(t, text, 1)
	if dup.Key != "k" || dup.Path != "data" || !dup.Merged || doc.Object != "v1 ConfigMap a" {
		t.Errorf("got %+v in %q", dup, doc.Object)
	}
	// A merge without overrides is no duplicate.
	set, err := Parse(strings.Replace(text, "  k: three\n", "  l: three\n", 1))
	if err != nil || len(set.Objects) != 1 {
		t.Fatalf("merge refused: %v", err)
	}
}

func TestParseDuplicateKeysOnlyTheStrictDecoderSees(t *testing.T) {
	// `yes` and `true` are one key to YAML 1.1 (go-yaml v2, as Kubernetes reads YAML), two to
	// go-yaml v3: the strict decoder's words name it.
	_, err := Parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nx:\n  yes: 1\n  true: 2\n")
	var dup *DuplicateKeyError
	if !errors.As(err, &dup) || !strings.Contains(err.Error(), "duplicate key: line 6: key true already set in map") {
		t.Fatalf("got %v", err)
	}
	// Keys equal in text but not in value are distinct, as they are to the strict decoder.
	if _, err := Parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nx:\n  1: a\n  \"2\": b\n  a: 1\n  b: 1\n"); err != nil {
		t.Fatalf("distinct keys refused: %v", err)
	}
}

func TestParseWithoutDuplicatesKeepsItsRevision(t *testing.T) {
	// Revisions name what was applied and recorded: strict decoding must not rename any.
	// These were computed before duplicate keys were refused.
	rev, err := Revision(namespace + "---\n" + deployment)
	if err != nil || rev != "1adcf50948de" {
		t.Errorf("revision %s (%v), want 1adcf50948de", rev, err)
	}
	set, err := Bundle(namespace+"---\n"+deployment, secret)
	if err != nil {
		t.Fatal(err)
	}
	if rev, _ := set.Revision(); rev != "d024139c5966" {
		t.Errorf("bundle revision %s, want d024139c5966", rev)
	}
	list := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a, namespace: x}\n  data: {k: v, 1: one, yes: y}\n"
	if rev, err := Revision(list); err != nil || rev != "8b9406a1b58a" {
		t.Errorf("list revision %s (%v), want 8b9406a1b58a", rev, err)
	}
	// Syntax errors are still syntax errors, withheld in the sensitive half.
	_, err = Bundle(namespace, "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: \"hunter2\n")
	if err == nil || !strings.Contains(err.Error(), "withheld") || strings.Contains(err.Error(), "duplicate") {
		t.Errorf("syntax error: %v", err)
	}
}
