package rollout_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

const (
	pausedAnnotation = "gradual.dev/paused"
	windowAnnotation = "gradual.dev/maintenance-window"
)

// settingBundle is a namespace and one ConfigMap holding setting: quick to apply and to check.
func settingBundle(ns, setting string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %[1]s\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: %[1]s\ndata:\n  setting: %[2]q\n", ns, setting)
}

// closedWindow is a window of one hour that opens 12 hours from now (by the UTC hour), so it is
// closed whenever the test runs; opensAt matches the start the plan names (either hour, in case
// the hour turns while the test runs).
func closedWindow(now time.Time) (schedule string, opensAt *regexp.Regexp) {
	next := now.UTC().Truncate(time.Hour).Add(12 * time.Hour)
	alt := next.Add(time.Hour)
	return fmt.Sprintf("0 %d * * *", next.Hour()), regexp.MustCompile(regexp.QuoteMeta("opens next at "+next.Format("2006-01-02 15:04 MST")) +
		"|" + regexp.QuoteMeta("opens next at "+alt.Format("2006-01-02 15:04 MST")))
}

// openWindow is a window that opened half an hour ago and stays open for two hours.
func openWindow(now time.Time) string {
	start := now.UTC().Add(-30 * time.Minute)
	return fmt.Sprintf("%d %d * * *;2h;UTC", start.Minute(), start.Hour())
}

func annotate(t *testing.T, f *testbed.Fleet, cluster, key, value string) {
	t.Helper()
	acctest.AnnotateCluster(t, f, cluster, key, &value)
}

func unannotate(t *testing.T, f *testbed.Fleet, cluster, key string) {
	t.Helper()
	acctest.AnnotateCluster(t, f, cluster, key, nil)
}

func expectSettings(f *testbed.Fleet, ns string, want map[string]string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		for cluster, setting := range want {
			c, err := f.WorkloadClient(cluster)
			if err != nil {
				return err
			}
			if err := expectConfigMap(f, cluster, ns, "settings", setting != ""); err != nil {
				return err
			}
			if setting == "" {
				continue
			}
			got, err := configMapSetting(c, ns)
			if err != nil {
				return fmt.Errorf("%s: %w", cluster, err)
			}
			if got != setting {
				return fmt.Errorf("%s: setting %q, want %q", cluster, got, setting)
			}
		}
		return nil
	}
}

// A cluster annotated gradual.dev/paused is skipped with its reason, and one outside its
// maintenance window (gradual.dev/maintenance-window) with the time the window opens next; a
// window annotation that cannot be read and a bad maintenance_window fail the plan naming what
// is wrong; once unpaused and inside its window, each is picked up. The rollout's own
// maintenance_window, closed, holds every cluster, and so does the provider's for a rollout
// without one; paused = true plans and applies nothing.
func TestAccRollout_pausesAndWindows(t *testing.T) {
	acctest.OnOneLane(t, 0) // which clusters the provider holds, not how a CLI drives it
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("holds")
	t.Cleanup(func() {
		unannotate(t, f, "prod-us-1", pausedAnnotation)
		unannotate(t, f, "staging-eu-1", windowAnnotation)
	})
	closed, opensAt := closedWindow(time.Now())
	v1, v2, v3 := settingBundle(name, "v1"), settingBundle(name, "v2"), settingBundle(name, "v3")
	config := func(manifests, extra string) string {
		return rolloutConfig(f, name, allThree, manifests, `update_limit = "100%"`+"\n  "+extra)
	}
	const res = "gradual_rollout.test"
	skipped := func(cluster string, re *regexp.Regexp) statecheck.StateCheck {
		return statecheck.ExpectKnownValue(res, tfjsonpath.New("skipped").AtMapKey(cluster), knownvalue.StringRegexp(re))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy:             expectSettings(f, name, map[string]string{"prod-eu-1": "", "prod-us-1": "", "staging-eu-1": ""}),
		Steps: []resource.TestStep{
			{
				PreConfig: func() {
					annotate(t, f, "prod-us-1", pausedAnnotation, "incident 4711")
					annotate(t, f, "staging-eu-1", windowAnnotation, closed+";1h;UTC")
				},
				Config: config(v1, ""),
				Check:  expectSettings(f, name, map[string]string{"prod-eu-1": "v1", "prod-us-1": "", "staging-eu-1": ""}),
				ConfigStateChecks: []statecheck.StateCheck{
					skipped("prod-us-1", regexp.MustCompile(`^paused by the gradual.dev/paused annotation: incident 4711$`)),
					skipped("staging-eu-1", regexp.MustCompile(`^outside its maintenance window \(gradual.dev/maintenance-window\) `+regexp.QuoteMeta(closed)+` for 1h \(UTC\): `)),
					skipped("staging-eu-1", opensAt),
				},
			},
			{
				// An annotation that cannot be read fails the plan, naming the cluster.
				PreConfig:   func() { annotate(t, f, "staging-eu-1", windowAnnotation, "0 2 * *;4h") },
				Config:      config(v1, ""),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Invalid Maintenance Window Annotation.*staging-eu-1.*schedule`),
			},
			{
				// A bad maintenance_window: each field is named (both errors in one plan).
				Config:      config(v1, `maintenance_window = { schedule = "0 25 * * *", duration = "4h", time_zone = "Mars/Olympus" }`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)(Invalid Cron Expression.*Invalid Time Zone|Invalid Time Zone.*Invalid Cron Expression)`),
			},
			{
				// Unpaused, and inside its window: both are picked up.
				PreConfig: func() {
					unannotate(t, f, "prod-us-1", pausedAnnotation)
					annotate(t, f, "staging-eu-1", windowAnnotation, openWindow(time.Now()))
				},
				Config: config(v1, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("waves"), knownvalue.StringExact("1 wave of 2 clusters")),
				}},
				Check: expectSettings(f, name, map[string]string{"prod-eu-1": "v1", "prod-us-1": "v1", "staging-eu-1": "v1"}),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("skipped"), knownvalue.MapSizeExact(0)),
				},
			},
			{
				// The rollout's own window, closed: every cluster waits, with the next start.
				Config: config(v2, fmt.Sprintf(`maintenance_window = { schedule = %q, duration = "1h", time_zone = "UTC" }`, closed)),
				Check:  expectSettings(f, name, map[string]string{"prod-eu-1": "v1", "prod-us-1": "v1", "staging-eu-1": "v1"}),
				ConfigStateChecks: []statecheck.StateCheck{
					skipped("prod-eu-1", regexp.MustCompile(`^outside the rollout's maintenance_window `)),
					skipped("prod-us-1", opensAt),
					skipped("staging-eu-1", opensAt),
				},
			},
			{
				// The provider's window, closed, holds a rollout that sets none of its own.
				Config: strings.Replace(config(v2, ""), "provider \"gradual\" {\n",
					fmt.Sprintf("provider \"gradual\" {\n  maintenance_window = { schedule = %q, duration = \"1h\" }\n", closed), 1),
				Check: expectSettings(f, name, map[string]string{"prod-eu-1": "v1", "prod-us-1": "v1", "staging-eu-1": "v1"}),
				ConfigStateChecks: []statecheck.StateCheck{
					skipped("prod-eu-1", regexp.MustCompile(`^outside the provider's maintenance_window `)),
					skipped("staging-eu-1", opensAt),
				},
			},
			{
				// paused = true: no wave planned, nothing applied.
				Config: config(v3, "paused = true"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("paused"), knownvalue.Bool(true)),
				}},
				Check: expectSettings(f, name, map[string]string{"prod-eu-1": "v1", "prod-us-1": "v1", "staging-eu-1": "v1"}),
			},
		},
	})
}

func configMapSetting(c client.Client, ns string) (string, error) {
	var cm corev1.ConfigMap
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "settings"}, &cm); err != nil {
		return "", err
	}
	return cm.Data["setting"], nil
}
