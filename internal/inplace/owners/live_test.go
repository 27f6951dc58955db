package owners

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gradual-dev/terraform-provider-gradual/internal/extension"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

func TestRevisionIgnoresJSONFormatting(t *testing.T) {
	a := Revision(inplace.Change{Version: "v1.37.0", BootstrapConfigSpec: []byte(`{"ntp": {"servers": ["a"]}, "files": []}`)})
	b := Revision(inplace.Change{Version: "v1.37.0", BootstrapConfigSpec: []byte(`{"files":[],"ntp":{"servers":["a"]}}`)})
	if a != b {
		t.Errorf("same change, revisions %s and %s", a, b)
	}
	if c := Revision(inplace.Change{Version: "v1.37.1", BootstrapConfigSpec: []byte(`{"files":[],"ntp":{"servers":["a"]}}`)}); c == a {
		t.Errorf("another version, same revision %s", c)
	}
	// The same patch given to another object is another change.
	if d := Revision(inplace.Change{Version: "v1.37.0", MachineSpec: []byte(`{"ntp":{"servers":["a"]},"files":[]}`)}); d == a {
		t.Errorf("patch of another object, same revision %s", d)
	}
}

func TestSpecPatchOnlySpec(t *testing.T) {
	from := map[string]any{"metadata": map[string]any{"name": "m"}, "spec": map[string]any{"version": "v1", "keep": "x", "drop": "y"}, "status": map[string]any{"a": 1}}
	to := map[string]any{"metadata": map[string]any{"name": "other"}, "spec": map[string]any{"version": "v2", "keep": "x"}, "status": map[string]any{"a": 2}}
	p, err := SpecPatch(from, to)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(p), `{"spec":{"drop":null,"version":"v2"}}`; got != want {
		t.Errorf("patch %s, want %s", got, want)
	}
	if p, err := SpecPatch(from, from); err != nil || p != nil {
		t.Errorf("equal specs: patch %s, %v", p, err)
	}
}

func TestNodeProblem(t *testing.T) {
	node := func(ready corev1.ConditionStatus, kubelet string) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n"},
			Status: corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}},
				NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: kubelet},
			},
		}
	}
	for _, tc := range []struct {
		node    *corev1.Node
		version string
		want    string
	}{
		{node(corev1.ConditionTrue, "v2"), "v2", ""},
		{node(corev1.ConditionTrue, "v1"), "", ""},
		{node(corev1.ConditionFalse, "v2"), "v2", "not Ready"},
		{node(corev1.ConditionTrue, "v1"), "v2", "reports kubelet v1, want v2"},
	} {
		err := nodeProblem(tc.node, tc.version)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want %q", tc, err, tc.want)
		}
	}
}

func TestExtensionErrorHints(t *testing.T) {
	for kind, want := range map[extension.Kind]string{
		extension.KindInsecureURL: "https://",
		extension.KindTimeout:     "did not answer in time",
		extension.KindRedirect:    "Redirects are never followed",
	} {
		err := extensionError(&extension.Error{Extension: "x", Kind: kind, Detail: "d"})
		e, ok := usererr.As(err)
		if !ok || e.Summary != "Update Extension Failed" || !strings.Contains(e.Detail, want) {
			t.Errorf("%s: %v", kind, err)
		}
		var xe *extension.Error
		if !errors.As(err, &xe) {
			t.Errorf("%s: the extension error is not wrapped", kind)
		}
	}
}

func TestObservedStatus(t *testing.T) {
	changed := []inplace.Field{{Object: inplace.KindMachine, Path: "/spec/version"}}
	for _, c := range []struct {
		name  string
		o     Observed
		prior string
		want  string
	}{
		{"updated and still as desired", Observed{}, StatusUpdated, StatusUpdated},
		{"created by CAPI during the update", Observed{}, StatusCreated, StatusCreated},
		{"already as desired", Observed{}, "", StatusUnchanged},
		{"edited back", Observed{Changed: changed}, StatusUpdated, StatusDrifted},
		{"never updated", Observed{Changed: changed}, "", StatusNotStarted},
		{"CAPI not done", Observed{Pending: "Updating: in progress"}, StatusFailed, StatusUpdating},
		{"node behind", Observed{NodeProblem: "Node n reports kubelet v1"}, StatusUpdated, StatusUnverified},
	} {
		if got := c.o.Status(c.prior); got != c.want {
			t.Errorf("%s: status %q, want %q", c.name, got, c.want)
		}
	}
}
