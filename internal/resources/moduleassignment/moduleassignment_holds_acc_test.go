package moduleassignment_test

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
)

// A module assignment skips a cluster annotated gradual.dev/paused (with its reason) and one
// outside its gradual.dev/maintenance-window (with the next start), refuses a bad
// maintenance_window at plan, and gives both the modules once unpaused and inside the window.
func TestAccModuleAssignment_pausesAndWindows(t *testing.T) {
	acctest.OnOneLane(t, 0) // which clusters the provider holds, not how a CLI drives it
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("mholds")
	all := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	newLabeler(t, f, name, all...)
	set := func(cluster, key string, value *string) { acctest.AnnotateCluster(t, f, cluster, key, value) }
	t.Cleanup(func() {
		set("prod-us-1", "gradual.dev/paused", nil)
		set("staging-eu-1", "gradual.dev/maintenance-window", nil)
	})
	now := time.Now().UTC()
	next := now.Truncate(time.Hour).Add(12 * time.Hour) // a one-hour window 12 hours away: closed now
	closed := fmt.Sprintf("0 %d * * *;1h", next.Hour())
	opensAt := regexp.MustCompile(regexp.QuoteMeta("opens next at "+next.Format("2006-01-02 15:04 MST")) + "|" +
		regexp.QuoteMeta("opens next at "+next.Add(time.Hour).Format("2006-01-02 15:04 MST")))
	start := now.Add(-30 * time.Minute) // a two-hour window that opened half an hour ago
	open := fmt.Sprintf("%d %d * * *;2h", start.Minute(), start.Hour())
	v1 := module{name: "cfg", version: "1.0.0", manifests: configMaps(name, "v1", "settings")}
	config := func(extra string) string {
		return acctest.ProviderConfig(f) + assignmentConfig(f, "test", name, name, `update_limit = "100%"`+"\n  "+extra, v1)
	}
	settings := func(want map[string]string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			for cluster, setting := range want {
				if err := expectSetting(f, cluster, name, "settings", setting); err != nil {
					return err
				}
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy:             settings(map[string]string{"prod-eu-1": "<none>", "prod-us-1": "<none>", "staging-eu-1": "<none>"}),
		Steps: []resource.TestStep{
			{
				PreConfig: func() {
					reason := "eu migration"
					set("prod-us-1", "gradual.dev/paused", &reason)
					set("staging-eu-1", "gradual.dev/maintenance-window", &closed)
				},
				Config: config(""),
				Check:  settings(map[string]string{"prod-eu-1": "v1", "prod-us-1": "<none>", "staging-eu-1": "<none>"}),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("skipped").AtMapKey("prod-us-1"),
						knownvalue.StringExact("paused by the gradual.dev/paused annotation: eu migration")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("skipped").AtMapKey("staging-eu-1"), knownvalue.StringRegexp(opensAt)),
				},
			},
			{
				Config:      config(`maintenance_window = { schedule = "0 2 * * *", duration = "four hours" }`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`Invalid Duration`),
			},
			{
				PreConfig: func() {
					set("prod-us-1", "gradual.dev/paused", nil)
					set("staging-eu-1", "gradual.dev/maintenance-window", &open)
				},
				Config: config(""),
				Check:  settings(map[string]string{"prod-eu-1": "v1", "prod-us-1": "v1", "staging-eu-1": "v1"}),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("skipped"), knownvalue.MapSizeExact(0)),
				},
			},
		},
	})
}
