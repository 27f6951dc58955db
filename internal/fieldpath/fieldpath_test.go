package fieldpath

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good := map[string]string{
		".spec.replicas":                          ".spec.replicas",
		".webhooks[*].clientConfig.caBundle":      ".webhooks[*].clientConfig.caBundle",
		`.metadata.annotations["a.b/c"]`:          `.metadata.annotations["a.b/c"]`,
		".spec.template.spec.containers[0].image": ".spec.template.spec.containers[0].image",
		`["data"]["x"]`:                           `["data"]["x"]`,
	}
	for in, want := range good {
		p, err := Parse(in)
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		if p.String() != want {
			t.Errorf("Parse(%q).String() = %q", in, p.String())
		}
	}
	bad := map[string]string{
		"":                "empty path",
		"spec.replicas":   "expected '.' or '['",
		".spec..replicas": "empty field name",
		".spec.":          "empty field name",
		".spec[":          "unclosed",
		".spec[x]":        "expected [N]",
		".spec[-1].a":     "expected [N]",
		`.spec["x`:        "invalid quoted key",
		`.spec[""]`:       "non-empty",
		".containers[*]":  "must end with a field",
		"[0].a":           "must start with a field",
		".kind":           "identifies the object",
		".metadata.name":  "only labels and annotations",
		".metadata":       "only labels and annotations",
		`.spec.a"b`:       "invalid field name",
	}
	for in, want := range bad {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func must(t *testing.T, s string) Path {
	t.Helper()
	p, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRemove(t *testing.T) {
	for _, tc := range []struct{ path, in, want string }{
		{".spec.replicas", `{"spec":{"replicas":3,"x":1}}`, `{"spec":{"x":1}}`},
		{".spec.replicas", `{"spec":{"x":1}}`, `{"spec":{"x":1}}`},
		{".spec.replicas", `{"spec":"atom"}`, `{"spec":"atom"}`},
		{".webhooks[*].clientConfig.caBundle",
			`{"webhooks":[{"name":"a","clientConfig":{"caBundle":"Zm9v","url":"u"}},{"name":"b","clientConfig":{"caBundle":"YmFy"}}]}`,
			`{"webhooks":[{"name":"a","clientConfig":{"url":"u"}},{"name":"b","clientConfig":{}}]}`},
		{".webhooks[1].name", `{"webhooks":[{"name":"a"},{"name":"b"}]}`, `{"webhooks":[{"name":"a"},{}]}`},
		{`.metadata.annotations["a.b/c"]`, `{"metadata":{"annotations":{"a.b/c":"1","d":"2"}}}`, `{"metadata":{"annotations":{"d":"2"}}}`},
	} {
		got := obj(t, tc.in)
		must(t, tc.path).Remove(got)
		if want := obj(t, tc.want); !reflect.DeepEqual(got, want) {
			t.Errorf("%s on %s = %v, want %v", tc.path, tc.in, got, want)
		}
	}
}

func TestKeepLive(t *testing.T) {
	for _, tc := range []struct{ path, in, live, want string }{
		// the live value replaces the manifest's
		{".spec.replicas", `{"spec":{"replicas":2,"x":1}}`, `{"spec":{"replicas":5,"x":9}}`, `{"spec":{"replicas":5,"x":1}}`},
		// live has none: not sent
		{".spec.replicas", `{"spec":{"replicas":2}}`, `{"spec":{}}`, `{"spec":{}}`},
		// the manifest does not set it: still not set (never taken over from live)
		{".spec.replicas", `{"spec":{"x":1}}`, `{"spec":{"replicas":5}}`, `{"spec":{"x":1}}`},
		// by position in lists; an element live lacks loses the field
		{".webhooks[*].clientConfig.caBundle",
			`{"webhooks":[{"clientConfig":{"caBundle":"old"}},{"clientConfig":{"caBundle":"old"}}]}`,
			`{"webhooks":[{"clientConfig":{"caBundle":"new"}}]}`,
			`{"webhooks":[{"clientConfig":{"caBundle":"new"}},{"clientConfig":{}}]}`},
		// maps are copied, not shared
		{".spec.selector", `{"spec":{"selector":{"a":"1"}}}`, `{"spec":{"selector":{"b":"2"}}}`, `{"spec":{"selector":{"b":"2"}}}`},
	} {
		got, live := obj(t, tc.in), obj(t, tc.live)
		must(t, tc.path).KeepLive(got, live)
		if want := obj(t, tc.want); !reflect.DeepEqual(got, want) {
			t.Errorf("%s on %s with live %s = %v, want %v", tc.path, tc.in, tc.live, got, want)
		}
		if live2 := obj(t, tc.live); !reflect.DeepEqual(live, live2) {
			t.Errorf("%s: live was changed: %v", tc.path, live)
		}
	}
	// KeepLive copies: editing the result leaves live alone.
	got, live := obj(t, `{"spec":{"selector":{"a":"1"}}}`), obj(t, `{"spec":{"selector":{"b":"2"}}}`)
	must(t, ".spec.selector").KeepLive(got, live)
	got["spec"].(map[string]any)["selector"].(map[string]any)["c"] = "3"
	if _, shared := live["spec"].(map[string]any)["selector"].(map[string]any)["c"]; shared {
		t.Error("KeepLive shares values with live")
	}
}

func TestOwnedIn(t *testing.T) {
	scale := `{"f:spec":{"f:replicas":{}}}`
	gradual := `{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`
	cainjector := `{"f:webhooks":{"k:{\"name\":\"a\"}":{"f:clientConfig":{"f:caBundle":{}}}}}`
	atomic := `{"f:spec":{"f:selector":{}}}`
	for _, tc := range []struct {
		path, fields string
		want         bool
	}{
		{".spec.replicas", scale, true},
		{".spec.replicas", gradual, true},
		{".spec.paused", scale, false},
		{".spec.template.spec.containers[*].image", gradual, true},
		{".spec.template.spec.containers[0].image", gradual, true},
		{".spec.template.spec.containers[*].args", gradual, false},
		{".metadata.labels.app", gradual, true},
		{".metadata.labels.other", gradual, false},
		{".webhooks[*].clientConfig.caBundle", cainjector, true},
		{".webhooks[*].clientConfig.url", cainjector, false},
		{".spec.selector.matchLabels", atomic, true},
		{".spec.replicas", `{}`, false},
	} {
		if got := must(t, tc.path).OwnedIn(obj(t, tc.fields)); got != tc.want {
			t.Errorf("%s in %s = %v, want %v", tc.path, tc.fields, got, tc.want)
		}
	}
}

func TestSets(t *testing.T) {
	obj := map[string]any{
		"data": map[string]any{"password": "s3cret", "empty": nil},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "a"}, map[string]any{"name": "b", "env": "x"}}},
	}
	for path, want := range map[string]bool{
		".data.password":          true,
		".data.empty":             true, // null is still written out
		".data.user":              false,
		".data.password.deeper":   false,
		".spec.containers[*].env": true,
		".spec.containers[0].env": false,
		".spec.containers[1].env": true,
		".spec.containers[5].env": false,
		".data[\"password\"]":     true,
		".status.x":               false,
	} {
		if got := MustParse(path).Sets(obj); got != want {
			t.Errorf("%s: Sets = %v, want %v", path, got, want)
		}
	}
}

func TestValues(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{"containers": []any{
		map[string]any{"env": "a"}, map[string]any{"name": "b"}, map[string]any{"env": map[string]any{"k": "c"}},
	}}}
	got := MustParse(".spec.containers[*].env").Values(obj)
	if len(got) != 2 || got[0] != "a" {
		t.Errorf("Values = %v", got)
	}
	if got := MustParse(".spec.missing").Values(obj); len(got) != 0 {
		t.Errorf("Values of an unset field = %v", got)
	}
}
