package rollout_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestAccRollout_fluxCheckJob delivers through Flux with verify.check_job: the Job goes into the
// revision's artifact, named for the revision, and kustomize-controller waits on it with the
// other objects. A Job that completes lets the revision out to all three clusters (the Job ran
// in each, and stays, Complete, until the next revision prunes it); a revision whose Job fails
// (its deadline passes before its pod can be scheduled) fails on the canary as the Kustomization's
// failed health check, is restored (the failed Job pruned with it) and recorded invalid.
func TestAccRollout_fluxCheckJob(t *testing.T) {
	acctest.OnOneLane(t, 1) // what kustomize-controller judges
	f := acctest.FluxFleet(t)
	name := acctest.UniqueLabel("fluxjob")
	ctx := context.Background()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	good, bad := fluxBundle(name, "one", false), fluxBundle(name, "two", false)
	goodJob, badJob := checkJob(name, false), checkJob(name, true)
	goodRev := fluxJobRevision(t, fluxRevisionOf(t, good, fluxRepository(f, name)), goodJob)
	badRev := fluxJobRevision(t, fluxRevisionOf(t, bad, fluxRepository(f, name)), badJob)
	config := func(manifests, job string) string {
		return acctest.ProviderConfig(f) + fmt.Sprintf(`
resource "gradual_rollout" "test" {
  name      = %q
  namespace = %q
  %s
  canary    = ["staging-eu-1"]
  manifests = <<-EOT
%s  EOT
  verify = {
    timeout   = "90s"
    check_job = {
      timeout  = "60s"
      manifest = <<-EOT
%s      EOT
    }
  }
  delivery = { flux = { repository = %q, insecure = true } }
}
`, name, f.Namespace, allThree, indent(manifests), indent(indent(job)), fluxRepository(f, name))
	}
	// jobs are the check Jobs on cluster c.
	jobs := func(c string) ([]batchv1.Job, error) {
		var list batchv1.JobList
		err := workloadClient(t, f, c).List(ctx, &list, client.InNamespace(name))
		return list.Items, err
	}
	ranEverywhere := func(*terraform.State) error {
		for _, c := range clusters {
			got, err := jobs(c)
			if err != nil {
				return fmt.Errorf("%s: %w", c, err)
			}
			if len(got) != 1 || got[0].Name != "smoke-"+goodRev[:8] || !jobComplete(&got[0]) {
				return fmt.Errorf("%s: Jobs %v, want smoke-%s, Complete", c, jobNames(got), goodRev[:8])
			}
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				// Refused at plan no more: the Job goes through Flux, and ran in each cluster.
				Config: config(good, goodJob),
				Check:  ranEverywhere,
			},
			{
				// The Job fails (DeadlineExceeded): kstatus says Failed, kustomize-controller
				// reports the health check failed, the revision's failure on the canary.
				Config:      config(bad, badJob),
				ExpectError: regexp.MustCompile(`(?s)Rollout Failed.*` + badRev),
			},
			{
				PreConfig: func() {
					for _, c := range clusters {
						var cm corev1.ConfigMap
						if err := workloadClient(t, f, c).Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &cm); err != nil || cm.Data["value"] != "one" {
							t.Fatalf("%s: ConfigMap %v (%v), want restored to one", c, cm.Data, err)
						}
					}
					// Flux pruned the failed revision's Job as it applied the restored one; the
					// good revision's Job, pruned as the failed one was applied, is not back:
					// restored revisions are not checked.
					if err := waitFor(20*time.Second, func() error {
						got, err := jobs("staging-eu-1")
						if err == nil && len(got) > 0 {
							err = fmt.Errorf("Jobs %v left on the canary, want none", jobNames(got))
						}
						return err
					}); err != nil {
						t.Fatal(err)
					}
					ledger, err := records.NewManagementStore(mc, records.DefaultNamespace).Ledger(ctx, key)
					if err != nil {
						t.Fatal(err)
					}
					if len(ledger) != 1 || ledger[0].Revision != badRev {
						t.Fatalf("ledger %+v, want %s invalid", ledger, badRev)
					}
					// The reason is kustomize-controller's: the Job's failed health check.
					if !strings.Contains(ledger[0].Reason, "smoke-"+badRev[:8]) {
						t.Fatalf("ledger reason %q, want the failed Job named", ledger[0].Reason)
					}
				},
				Config:   config(bad, badJob),
				PlanOnly: true, ExpectError: regexp.MustCompile(`Revision Recorded Invalid`),
			},
		},
	})
}

// fluxJobRevision is the revision through Flux of content revision with the check Job job (60s).
func fluxJobRevision(t *testing.T, revision, job string) string {
	t.Helper()
	obj, err := delivery.ParseCheckJob(job)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := (&delivery.CheckJob{Job: obj, Timeout: time.Minute}).FluxRevision(revision)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func jobNames(jobs []batchv1.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.Name
	}
	return out
}

// waitFor polls check every second until it passes or within is up, returning its last error.
func waitFor(within time.Duration, check func() error) error {
	var last error
	_ = wait.PollUntilContextTimeout(context.Background(), time.Second, within, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	})
	return last
}
