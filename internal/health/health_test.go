package health

import (
	"errors"
	"strings"
	"testing"
)

func deployment(gen, observed int64, annotations map[string]any, ready string) map[string]any {
	ann := map[string]any{}
	for k, v := range annotations {
		ann[k] = v
	}
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "generation": gen, "annotations": ann},
		"status": map[string]any{
			"observedGeneration": observed,
			"conditions":         []any{map[string]any{"type": "Ready", "status": ready}},
		},
	}
}

var rules = []Rule{{
	APIVersion: "apps/v1", Kind: "Deployment",
	Current:    "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')",
	Failed:     "status.conditions.exists(e, e.type == 'Ready' && e.status == 'False')",
	InProgress: "has(metadata.annotations.rolling)",
}}

func TestJudge(t *testing.T) {
	c, err := Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		obj  map[string]any
		want string
		msg  string
	}{
		{"current", deployment(2, 2, nil, "True"), Current, "current"},
		{"failed", deployment(2, 2, nil, "False"), Failed, "failed"},
		{"in progress first", deployment(2, 2, map[string]any{"rolling": "yes"}, "False"), InProgress, "in_progress"},
		{"none true", deployment(2, 2, nil, "Unknown"), InProgress, "not true yet"},
		{"generation lag", deployment(3, 2, nil, "True"), InProgress, "observedGeneration 2 is behind"},
		{"no status yet", map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{}}, InProgress, "cannot be evaluated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := c.Judge(t.Context(), tc.obj)
			if !ok || v.Status != tc.want || !strings.Contains(v.Message, tc.msg) {
				t.Errorf("Judge = %+v, %v; want %s with %q", v, ok, tc.want, tc.msg)
			}
		})
	}
	if _, ok := c.Judge(t.Context(), map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}); ok {
		t.Error("a kind without a rule was judged; kstatus should judge it")
	}
	var none *Checker
	if _, ok := none.Judge(t.Context(), deployment(1, 1, nil, "True")); ok || !none.Empty() {
		t.Error("a nil Checker judged")
	}
}

func TestCompileRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []Rule
		field string
		want  string
	}{
		{"syntax", []Rule{{APIVersion: "v1", Kind: "Pod", Current: "status.phase == "}}, "current", "Syntax error"},
		{"not bool", []Rule{{APIVersion: "v1", Kind: "Pod", Current: "'ready'"}}, "current", "not bool"},
		{"undeclared", []Rule{{APIVersion: "v1", Kind: "Pod", Current: "true", Failed: "self.x"}}, "failed", "undeclared reference"},
		{"current required", []Rule{{APIVersion: "v1", Kind: "Pod", Failed: "true"}}, "current", "required"},
		{"duplicate", []Rule{{APIVersion: "v1", Kind: "Pod", Current: "true"}, {APIVersion: "v1", Kind: "Pod", Current: "true"}}, "", "second rule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.rules)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile error = %v, want %q", err, tc.want)
			}
			var ee *ExprError
			if tc.field != "" && (!errors.As(err, &ee) || ee.Field != tc.field) {
				t.Errorf("error %v does not name field %s", err, tc.field)
			}
		})
	}
	// What Flux's environment has, and fields that are no object (lists, strings), compile.
	for _, ok := range []string{
		"status.?conditions.orValue([]).exists(c, c.type == 'Ready')",
		"base64.decode(data.token) == b'ok'",
		"webhooks.all(w, w.name != '')",
		"subjects.exists(s, s.kind == 'User')",
		"type == 'Opaque'",
		"immutable",
		"status.phase",
	} {
		if err := CompileExpr(ok); err != nil {
			t.Errorf("CompileExpr(%q) refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"status.replicas + 1", "size(webhooks)", "'ready'"} {
		if err := CompileExpr(bad); err == nil || !strings.Contains(err.Error(), "not bool") {
			t.Errorf("CompileExpr(%q) = %v, want not bool", bad, err)
		}
	}
}

func TestNonBoolAtRuntime(t *testing.T) {
	c, err := Compile([]Rule{{APIVersion: "v1", Kind: "Pod", Current: "status.phase"}})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := c.Judge(t.Context(), map[string]any{"apiVersion": "v1", "kind": "Pod", "status": map[string]any{"phase": "Running"}})
	if v.Status != InProgress || !strings.Contains(v.Message, "as boolean") {
		t.Errorf("Judge = %+v, want in progress, not a bool", v)
	}
}
