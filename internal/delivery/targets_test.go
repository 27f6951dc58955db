package delivery

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
)

func TestRecordedTargets(t *testing.T) {
	got := RecordedTargets(map[string]ClusterState{
		"c": {State: StateProvisioning, Revision: "r1", Backup: "r0"},
		"a": {State: StateCurrent, Revision: "r2", Backup: "r1"},
		"b": {State: StateDrifted, Revision: "r2"},
	}, map[string]string{"d": "not ready", "a": "stale reason"})
	want := []engine.Target{
		{Name: "a", Record: engine.TargetRecord{Current: "r2", Backup: "r1"}},
		{Name: "b", Record: engine.TargetRecord{Current: "r2"}, Drifted: true},
		{Name: "c", Record: engine.TargetRecord{Current: "r1", Backup: "r0", Provisioning: "(interrupted)"}},
		{Name: "d", SkipReason: "not ready"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("targets\n got  %+v\n want %+v", got, want)
	}
	if got := RecordedTargets(nil, nil); len(got) != 0 {
		t.Errorf("no clusters: %+v", got)
	}
}

func TestInvalidRefusalOneWording(t *testing.T) {
	entry := InvalidRevision{Revision: "abc", Reason: "Deployment app/web not ready", Clusters: []string{"c1", "c2"}}
	withRetry := InvalidRefusal("rollout fleet/web", "abc", "gradual-system", entry, true)
	without := InvalidRefusal("module dns (version 1) of assignment fleet/base", "abc", "gradual-system", entry, false)
	for _, e := range []struct {
		got  string
		want []string
	}{
		{withRetry.Summary, []string{"Revision Recorded Invalid"}},
		{without.Summary, []string{"Revision Recorded Invalid"}},
		{withRetry.Detail, []string{"Revision abc of rollout fleet/web was recorded invalid after it failed on c1, c2:", "not ready", `namespace "gradual-system"`, "retry_invalid = true"}},
		{without.Detail, []string{"of module dns (version 1) of assignment fleet/base", "Change the manifests to apply a new revision."}},
	} {
		for _, w := range e.want {
			if !strings.Contains(e.got, w) {
				t.Errorf("%q lacks %q", e.got, w)
			}
		}
	}
	if strings.Contains(without.Detail, "retry_invalid") {
		t.Error("a resource without retry_invalid is told to set it")
	}
}
