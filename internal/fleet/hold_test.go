package fleet

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
	"github.com/gradual-dev/terraform-provider-gradual/internal/window"
)

func annotated(annotations map[string]string) Cluster {
	c := fromV1Beta2(readyV1Beta2())
	c.holdFields = readHolds(annotations)
	return c
}

func TestHoldReasons(t *testing.T) {
	// Thursday 2026-11-26 10:00 UTC.
	fake := clock.NewFake(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	nightly, err := window.New("0 2 * * *", "4h", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		annotations map[string]string
		hold        Hold
		want        string // "" for none
	}{
		"none":                 {nil, Hold{}, ""},
		"paused with a reason": {map[string]string{PausedAnnotation: "incident 4711"}, Hold{}, "paused by the gradual.dev/paused annotation: incident 4711"},
		"paused without":       {map[string]string{PausedAnnotation: ""}, Hold{}, "no reason given"},
		"own window closed": {map[string]string{window.Annotation: "0 2 * * *;4h;Europe/Berlin"}, Hold{},
			"outside its maintenance window (gradual.dev/maintenance-window) 0 2 * * * for 4h (Europe/Berlin): opens next at 2026-11-27 02:00 CET"},
		"own window open":        {map[string]string{window.Annotation: "0 9 * * *;4h"}, Hold{Margin: time.Hour}, ""},
		"own window closes soon": {map[string]string{window.Annotation: "0 9 * * *;90m"}, Hold{Margin: time.Hour}, "closes at 2026-11-26 10:30 UTC, within 1h0m0s"},
		"bad annotation":         {map[string]string{window.Annotation: "every night"}, Hold{}, "the gradual.dev/maintenance-window annotation cannot be used"},
		"rollout window closed":  {nil, Hold{Window: &nightly}, "outside the rollout's maintenance_window 0 2 * * * for 4h (Europe/Berlin): opens next at 2026-11-27 02:00 CET"},
		"both must be open":      {map[string]string{window.Annotation: "0 9 * * *;4h"}, Hold{Window: &nightly}, "the rollout's maintenance_window"},
		"provider window closed": {nil, Hold{Window: &nightly, WindowName: "the provider's maintenance_window"}, "outside the provider's maintenance_window 0 2 * * * for 4h"},
		"pause wins":             {map[string]string{PausedAnnotation: "migrating", window.Annotation: "bad"}, Hold{Window: &nightly}, "migrating"},
	} {
		got := annotated(tc.annotations).HoldReason(tc.hold, fake.Now())
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}

// A window annotation that cannot be read fails the plan naming the cluster and the annotation.
func TestWindowProblemsNameTheCluster(t *testing.T) {
	ok, bad := annotated(nil), annotated(map[string]string{window.Annotation: "0 2 * *;4h"})
	bad.Name = "eu-1"
	if err := (&Discovery{Clusters: []Cluster{ok}}).WindowProblems(); err != nil {
		t.Fatalf("no bad annotation: %v", err)
	}
	err := (&Discovery{Clusters: []Cluster{ok, bad}}).WindowProblems()
	var ue *usererr.Error
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "Cluster fleet/eu-1") || !strings.Contains(err.Error(), window.Annotation) ||
		!strings.Contains(err.Error(), "schedule") {
		t.Fatalf("%v, want a user error naming fleet/eu-1, the annotation and the field", err)
	}
}
