package delivery

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestRunWritesEvents: a run writes an Event on its management record when each wave starts and
// is done, and one at the end with the run's summary: Normal when the waves succeeded, Warning
// for a wave with a failure and for a failed run.
func TestRunWritesEvents(t *testing.T) {
	events := func(t *testing.T, e *env) []corev1.Event {
		t.Helper()
		var list corev1.EventList
		if err := e.mgmt.List(context.Background(), &list, client.InNamespace(e.spec.RecordNamespace)); err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(list.Items, func(a, b corev1.Event) int { return a.FirstTimestamp.Compare(b.FirstTimestamp.Time) })
		for _, ev := range list.Items {
			if ev.InvolvedObject.Kind != "Secret" || ev.InvolvedObject.Name != e.spec.Key.ObjectName() || ev.InvolvedObject.Namespace != e.spec.RecordNamespace {
				t.Errorf("event %s is about %+v, want the management record %s", ev.Name, ev.InvolvedObject, e.spec.Key.ObjectName())
			}
		}
		return list.Items
	}
	reasons := func(evs []corev1.Event) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, ev.Type+"/"+ev.Reason)
		}
		slices.Sort(out)
		return out
	}
	t.Run("three waves that succeed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startOld, faults{}}, {"c2", startOld, faults{}}, {"c3", startOld, faults{}}})
			run, err := e.svc.Run(context.Background(), RunRequest{Spec: e.spec, Query: fleet.Query{Namespace: "fleet"}})
			if err != nil {
				t.Fatal(err)
			}
			evs := events(t, e)
			want := []string{"Normal/RolloutSucceeded", "Normal/WaveDone", "Normal/WaveDone", "Normal/WaveDone", "Normal/WaveStarted", "Normal/WaveStarted", "Normal/WaveStarted"}
			if got := reasons(evs); !slices.Equal(got, want) {
				t.Fatalf("events %v, want %v", got, want)
			}
			var last string
			for _, ev := range evs {
				if ev.Reason == records.EventReasonSucceeded {
					last = ev.Message
				}
				if ev.Reason == records.EventReasonWaveStarted && !strings.Contains(ev.Message, "of revision "+e.spec.Revision+" started: c") {
					t.Errorf("wave start %q does not name the revision and its cluster", ev.Message)
				}
			}
			if last != run.Summary() || !strings.Contains(last, "3 clusters, 3 of 3 waves done") || !strings.Contains(last, "3 succeeded") {
				t.Errorf("last event %q, want the run's summary %q: 3 clusters, 3 waves, 3 succeeded", last, run.Summary())
			}
		})
	})
	t.Run("a failed wave stops the run", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startOld, faults{neverReady: true}}, {"c2", startOld, faults{}}})
			run, err := e.svc.Run(context.Background(), RunRequest{Spec: e.spec, Query: fleet.Query{Namespace: "fleet"}})
			if err == nil {
				t.Fatal("the run succeeded, want it failed on c1")
			}
			want := []string{"Normal/WaveStarted", "Warning/RolloutFailed", "Warning/WaveDone"}
			if got := reasons(events(t, e)); !slices.Equal(got, want) {
				t.Fatalf("events %v, want %v", got, want)
			}
			if s := run.Summary(); !strings.Contains(s, "2 clusters, 0 of 2 waves done") || !strings.Contains(s, "1 failed") || !strings.Contains(s, "1 not-started") {
				t.Errorf("summary %q, want 2 clusters, 0 of 2 waves done, 1 failed, 1 not-started", s)
			}
		})
	})
}
