package delivery

import (
	"strings"
	"testing"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/window"
)

// Right before each wave, a cluster's window is judged again on the service's clock: open with
// room for the wave, it goes; closing within verify timeout + bake time, or closed, it is held
// back, never started outside its window.
func TestWorldHoldsClustersWhoseWindowClosed(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC))
	w, err := window.New("0 2 * * *", "1h", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	inWindow := fleet.Cluster{Name: "eu-1", Namespace: "fleet"}
	inWindow.Window = &w
	world := &world{svc: &Service{engine: directEngine{}, clock: fake}, hold: fleet.Hold{Margin: 10 * time.Minute},
		clusters: clustersByName(&fleet.Discovery{Clusters: []fleet.Cluster{inWindow, {Name: "us-1", Namespace: "fleet"}}})}
	world.engine = world.svc.engine.run(world)
	if why := world.Held("eu-1"); why != "" {
		t.Fatalf("at 02:00 with the window open until 03:00: held (%s)", why)
	}
	fake.Advance(55 * time.Minute) // 02:55: closes in 5 minutes, less than the wave may take
	if why := world.Held("eu-1"); !strings.Contains(why, "closes at 2026-11-26 03:00 UTC") {
		t.Errorf("at 02:55: %q, want held: the window closes within the margin", why)
	}
	fake.Advance(10 * time.Minute) // 03:05: closed
	if why := world.Held("eu-1"); !strings.Contains(why, "opens next at 2026-11-27 02:00 UTC") {
		t.Errorf("at 03:05: %q, want held until tomorrow 02:00", why)
	}
	if why := world.Held("us-1"); why != "" {
		t.Errorf("a cluster without a window is held: %q", why)
	}
}
