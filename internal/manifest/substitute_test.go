package manifest

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// As in Flux, the object is written as YAML before substitution, so a value that reads as a
// number (replicas) becomes one; the quotes of the source do not survive.
func TestSubstitute(t *testing.T) {
	const cm = `apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg-${cluster_name}
  namespace: default
data:
  region: "${region}"
  replicas: "${replicas:=2}"
  literal: "$${region}"
  tier: ${tier:-gold}
`
	tests := []struct {
		name    string
		text    string
		vars    map[string]string
		want    map[string]any // data of the rendered ConfigMap
		wantKey string
		missing []string
		errHas  string
	}{
		{
			name:    "values, defaults and escapes",
			text:    cm,
			vars:    map[string]string{"cluster_name": "a", "region": "eu-west"},
			want:    map[string]any{"region": "eu-west", "replicas": int64(2), "literal": "${region}", "tier": "gold"},
			wantKey: "/ConfigMap default/cfg-a",
		},
		{
			name:    "a given value wins over the default",
			text:    cm,
			vars:    map[string]string{"cluster_name": "b", "region": "us", "replicas": "5", "tier": "silver"},
			want:    map[string]any{"region": "us", "replicas": int64(5), "literal": "${region}", "tier": "silver"},
			wantKey: "/ConfigMap default/cfg-b",
		},
		{
			name:    "newlines are dropped from values",
			text:    cm,
			vars:    map[string]string{"cluster_name": "c", "region": "eu\nwest"},
			want:    map[string]any{"region": "euwest", "replicas": int64(2), "literal": "${region}", "tier": "gold"},
			wantKey: "/ConfigMap default/cfg-c",
		},
		{
			name:    "every missing variable is named",
			text:    cm,
			vars:    map[string]string{},
			missing: []string{"cluster_name", "region"},
		},
		{
			name: "substitution disabled by annotation, as in Flux",
			text: `apiVersion: v1
kind: ConfigMap
metadata:
  name: raw
  namespace: default
  annotations:
    kustomize.toolkit.fluxcd.io/substitute: disabled
data:
  script: "echo ${HOME}"
`,
			vars:    map[string]string{"cluster_name": "a"},
			want:    map[string]any{"script": "echo ${HOME}"},
			wantKey: "/ConfigMap default/raw",
		},
		{
			name:   "an invalid variable name",
			text:   cm,
			vars:   map[string]string{"bad-name": "x"},
			errHas: `variable name "bad-name" is invalid`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Parse(tt.text)
			if err != nil {
				t.Fatal(err)
			}
			before, _ := set.Canonical()
			out, err := Substitute(set, tt.vars)
			after, _ := set.Canonical()
			if string(before) != string(after) {
				t.Fatal("Substitute changed its input")
			}
			switch {
			case tt.missing != nil:
				var m *MissingVariablesError
				if !errors.As(err, &m) {
					t.Fatalf("err = %v, want missing variables", err)
				}
				if got := m.Variables(); !reflect.DeepEqual(got, tt.missing) {
					t.Fatalf("missing = %v, want %v", got, tt.missing)
				}
				return
			case tt.errHas != "":
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("err = %v, want %q", err, tt.errHas)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if len(out.Objects) != 1 || Key(out.Objects[0]) != tt.wantKey {
				t.Fatalf("objects = %v, want %s", out.Keys(), tt.wantKey)
			}
			if got := out.Objects[0].Object["data"]; !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("data = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestSubstituteKeepsIntegers(t *testing.T) {
	set, err := Parse("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec:\n  replicas: ${replicas:=3}\n")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Substitute(set, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Objects[0].Object["spec"].(map[string]any)["replicas"]; got != int64(3) {
		t.Fatalf("replicas = %#v, want int64 3", got)
	}
	a, _ := out.Canonical()
	b, _ := out.Canonical()
	if Digest(a) != Digest(b) || len(Digest(a)) != RevisionLength {
		t.Fatal("digest is not stable")
	}
}
