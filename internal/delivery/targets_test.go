package delivery

import (
	"reflect"
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
