package health

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/kustomize"
	fluxcel "github.com/fluxcd/pkg/runtime/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// fluxCase is one case of testdata/flux_cases.json: a rule and a recorded object.
type fluxCase struct {
	Name   string          `json:"name"`
	Rule   Rule            `json:"rule"`
	Object json.RawMessage `json:"object"`
}

// TestSameVerdictsAsFlux judges the objects of testdata/flux_cases.json with their rules and
// compares the verdicts with those Flux's own library gives (fluxcd/pkg/runtime/cel's
// StatusEvaluator on the object read as kustomize-controller reads it, unstructured), so that
// what Judge adds (matching by group and kind, messages, numbers as the API machinery decodes
// them, errors) changes no verdict. Where Flux's evaluation fails (kstatus reports the object
// Unknown and the wait goes on), Judge says in progress, with why.
func TestSameVerdictsAsFlux(t *testing.T) {
	var cases []fluxCase
	readJSON(t, "testdata/flux_cases.json", &cases)
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			want := fluxVerdict(t, tc)
			obj := liveObject(t, tc.Object)
			tc.Rule.APIVersion, _ = obj["apiVersion"].(string)
			tc.Rule.Kind, _ = obj["kind"].(string)
			c, err := Compile([]Rule{tc.Rule})
			if err != nil {
				t.Fatalf("Compile: %v (Flux accepted it)", err)
			}
			v, judged := c.Judge(t.Context(), obj)
			if !judged {
				t.Fatal("not judged")
			}
			if want == "error" {
				if v.Status != InProgress || !strings.Contains(v.Message, "cannot be evaluated") {
					t.Errorf("Judge = %+v; Flux could not evaluate it: want in progress, saying why", v)
				}
				return
			}
			if v.Status != want {
				t.Errorf("Judge = %+v; Flux says %s", v, want)
			}
		})
	}
}

// fluxVerdict is what Flux's StatusEvaluator says of tc's object ("error" when it cannot
// evaluate), as kustomize-controller builds and runs it.
func fluxVerdict(t *testing.T, tc fluxCase) string {
	t.Helper()
	se, err := fluxcel.NewStatusEvaluator(&kustomize.HealthCheckExpressions{
		Current: tc.Rule.Current, Failed: tc.Rule.Failed, InProgress: tc.Rule.InProgress})
	if err != nil {
		t.Fatalf("Flux refuses the rule: %v", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(tc.Object); err != nil {
		t.Fatal(err)
	}
	res, err := se.Evaluate(context.Background(), u)
	if err != nil {
		return "error"
	}
	return string(res.Status)
}

// TestMatchesByGroupKind checks that a rule judges every version of its API group's kind, and
// that two rules for one group and kind are refused, as Flux matches and refuses them.
func TestMatchesByGroupKind(t *testing.T) {
	c, err := Compile([]Rule{{APIVersion: "example.dev/v1", Kind: "Widget", Current: "status.ok == true"}})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := c.Judge(t.Context(), map[string]any{"apiVersion": "example.dev/v1beta1", "kind": "Widget", "status": map[string]any{"ok": true}})
	if !ok || v.Status != Current || !c.Judges("example.dev/v2", "Widget") || c.Judges("other.dev/v1", "Widget") {
		t.Errorf("Judge = %+v, %v; want another version of the group's kind judged by the rule", v, ok)
	}
	if got := c.Rules(); len(got) != 1 || got[0].Current != "status.ok == true" {
		t.Errorf("Rules = %+v, want the rule compiled", got)
	}
	_, err = Compile([]Rule{{APIVersion: "apps/v1", Kind: "Deployment", Current: "true"}, {APIVersion: "apps/v1beta2", Kind: "Deployment", Current: "true"}})
	if err == nil || !strings.Contains(err.Error(), "second rule") {
		t.Errorf("Compile error = %v, want a second rule for apps Deployment refused", err)
	}
	var none *Checker
	if none.Rules() != nil {
		t.Error("a nil Checker has rules")
	}
}

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// liveObject decodes a recorded object as the API machinery does (unstructured): whole numbers
// int64, others float64.
func liveObject(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	obj, _ := numbers(v).(map[string]any)
	return obj
}

func numbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}
