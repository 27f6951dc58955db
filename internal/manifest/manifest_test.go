package manifest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: demo
spec:
  replicas: 2
`

const namespace = `apiVersion: v1
kind: Namespace
metadata: {name: demo}
`

func TestRevisionIgnoresOrderFormattingAndComments(t *testing.T) {
	a, err := Revision(namespace + "---\n" + deployment)
	if err != nil {
		t.Fatal(err)
	}
	reformatted := "# the app\n---\n" + `{"kind":"Deployment","apiVersion":"apps/v1","spec":{"replicas":2},"metadata":{"namespace":"demo","name":"web"}}` +
		"\n---\n---\nkind: Namespace\napiVersion: v1\nmetadata:\n    name: demo\n"
	b, err := Revision(reformatted)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("same objects gave revisions %s and %s", a, b)
	}
	if len(a) != RevisionLength {
		t.Fatalf("revision %q has length %d, want %d", a, len(a), RevisionLength)
	}
	c, err := Revision(namespace + "---\n" + strings.Replace(deployment, "replicas: 2", "replicas: 3", 1))
	if err != nil {
		t.Fatal(err)
	}
	if c == a {
		t.Fatalf("different content gave the same revision %s", a)
	}
}

func TestParseSortsObjectsAndKeepsIntegers(t *testing.T) {
	set, err := Parse(deployment + "---\n" + namespace)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Objects) != 2 || set.Objects[0].GetKind() != "Namespace" {
		t.Fatalf("objects not in canonical order: %v", keys(set))
	}
	replicas, found, err := unstructuredInt(set, 1, "spec", "replicas")
	if err != nil || !found || replicas != 2 {
		t.Fatalf("replicas = %v (found %v, err %v), want int64 2", replicas, found, err)
	}
}

func TestParseFlattensLists(t *testing.T) {
	list := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a, namespace: x}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: b, namespace: x}\n"
	set, err := Parse(list)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(set); len(got) != 2 || got[0] != "/ConfigMap x/a" {
		t.Fatalf("got %v", got)
	}
}

func TestParseErrorsNameTheDocument(t *testing.T) {
	cases := map[string]struct {
		text  string
		index int
		want  string
	}{
		"invalid yaml":   {namespace + "---\nkind: [unclosed\n", 2, "invalid YAML"},
		"no kind":        {"apiVersion: v1\nmetadata: {name: a}\n", 1, "kind is missing"},
		"no apiVersion":  {namespace + "---\n# c\n---\nkind: ConfigMap\nmetadata: {name: a}\n", 3, "apiVersion is missing"},
		"no name":        {"apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n", 1, "no metadata.name"},
		"generateName":   {"apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: a-}\n", 1, "generateName"},
		"duplicate":      {namespace + "---\n" + namespace, 2, "already defined in document 1"},
		"scalar":         {"just a string\n", 1, "expected a Kubernetes object"},
		"list of others": {"- a\n- b\n", 1, "expected a Kubernetes object"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(tc.text)
			var docErr *DocumentError
			if !errors.As(err, &docErr) {
				t.Fatalf("error %v is not a DocumentError", err)
			}
			if docErr.Index != tc.index || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %q (document %d), want document %d containing %q", err, docErr.Index, tc.index, tc.want)
			}
		})
	}
}

func TestEmptyInputIsAnEmptySet(t *testing.T) {
	set, err := Parse("\n---\n# nothing\n")
	if err != nil || len(set.Objects) != 0 {
		t.Fatalf("got %v, %v", set, err)
	}
}

func keys(s *Set) []string {
	out := make([]string, len(s.Objects))
	for i, obj := range s.Objects {
		out[i] = Key(obj)
	}
	return out
}

func unstructuredInt(s *Set, i int, fields ...string) (int64, bool, error) {
	return unstructured.NestedInt64(s.Objects[i].Object, fields...)
}

func TestCanonicalRoundTrip(t *testing.T) {
	set, err := Parse(namespace + "---\n" + deployment)
	if err != nil {
		t.Fatal(err)
	}
	canonical, err := set.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromCanonical(canonical)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := set.Revision()
	b, _ := back.Revision()
	if a != b || len(back.Objects) != 2 {
		t.Fatalf("round trip changed the set: %s vs %s", a, b)
	}
	if _, err := FromCanonical([]byte("{not json")); err == nil {
		t.Fatal("garbage accepted")
	}
}

func TestRevisionWith(t *testing.T) {
	set, err := Parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n")
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := set.Revision()
	none, _ := set.RevisionWith(nil)
	a, _ := set.RevisionWith([]byte(`[{"paths":[".spec.replicas"]}]`))
	b, _ := set.RevisionWith([]byte(`[{"paths":[".spec.paused"]}]`))
	if none != plain {
		t.Errorf("RevisionWith(nil) = %s, want the plain revision %s", none, plain)
	}
	if a == plain || a == b || len(a) != RevisionLength {
		t.Errorf("revisions with settings: %s, %s (plain %s): want distinct names of %d digits", a, b, plain, RevisionLength)
	}
}

// DocumentFromYAML upgrades an entry an earlier version wrote as YAML to exactly what Documents
// writes now, numbers as written; JSON stays as it is.
func TestDocumentFromYAML(t *testing.T) {
	set, err := Parse(deployment + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: demo}\ndata: {\"10\": a, \"9\": b, big: \"9007199254740993\"}\nbinaryData: {}\n")
	if err != nil {
		t.Fatal(err)
	}
	now, err := Documents(set.Objects)
	if err != nil {
		t.Fatal(err)
	}
	for key, obj := range set.Objects {
		old, err := yaml.Marshal(obj.Object) // what earlier versions kept in state
		if err != nil {
			t.Fatal(err)
		}
		got, err := DocumentFromYAML(string(old))
		if err != nil || got != now[Key(set.Objects[key])] {
			t.Errorf("%s: upgraded to %q (%v), want %q", Key(obj), got, err, now[Key(obj)])
		}
		if again, _ := DocumentFromYAML(got); again != got {
			t.Errorf("%s: JSON changed on a second upgrade: %q", Key(obj), again)
		}
	}
	if _, err := DocumentFromYAML("kind: ["); err == nil {
		t.Error("unreadable YAML upgraded")
	}
}

// Documents gives one entry per object, the same for any formatting of the same objects, so a
// plan's per-object map changes only where an object does.
func TestDocumentsOnePerObjectFormattingFree(t *testing.T) {
	docs := func(text string) map[string]string {
		t.Helper()
		set, err := Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Documents(set.Objects)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a := docs(namespace + "---\n" + deployment)
	b := docs(`{"kind":"Deployment","apiVersion":"apps/v1","spec":{"replicas":2},"metadata":{"namespace":"demo","name":"web"}}` + "\n---\n# ns\n" + namespace)
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("want 2 documents each, got %d and %d", len(a), len(b))
	}
	for k, v := range a {
		if b[k] != v {
			t.Errorf("%s: %q vs %q", k, v, b[k])
		}
	}
	want := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"demo"},"spec":{"replicas":2}}`
	if got := a["apps/Deployment demo/web"]; got != want {
		t.Errorf("Deployment rendered as %q, want %q (keys: %v)", got, want, a)
	}
	c := docs(namespace + "---\n" + strings.Replace(deployment, "replicas: 2", "replicas: 3", 1))
	if c["/Namespace /demo"] != a["/Namespace /demo"] || c["apps/Deployment demo/web"] == a["apps/Deployment demo/web"] {
		t.Errorf("a change to the Deployment should change its entry only: %v vs %v", a, c)
	}
}

// Lists of objects are shown keyed by position and name, so that the CLI hides the unchanged
// elements; lists of scalars stay lists; positions sort in order past ten.
func TestDocumentsShowListsKeyed(t *testing.T) {
	var rules strings.Builder
	for i := range 11 {
		fmt.Fprintf(&rules, "  - {port: %d}\n", i)
	}
	set, err := Parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: demo}\ncontainers:\n  - {name: web, args: [a, b]}\n  - {name: side}\ndup:\n  - {name: x}\n  - {name: x}\nrules:\n" + rules.String())
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Documents(set.Objects)
	if err != nil {
		t.Fatal(err)
	}
	got := docs["/ConfigMap demo/c"]
	for _, want := range []string{
		`"containers":{"[0] web":{"args":["a","b"],"name":"web"},"[1] side":{"name":"side"}}`,
		`"dup":{"[0]":{"name":"x"},"[1]":{"name":"x"}}`,
		`"rules":{"[00]":{"port":0},"[01]":{"port":1},`,
		`"[10]":{"port":10}}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("shown as %s, want it to contain %s", got, want)
		}
	}
}
