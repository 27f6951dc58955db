package rollout_test

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// Two applies of one rollout where the first loses its Lease mid-wave (another apply takes it
// over): the first stops as on Ctrl-C and says why; the next apply converges.
func TestAccRollout_leaseLostMidWave(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	name := acctest.UniqueLabel("lost")
	key := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}
	config := acctest.ProviderConfig(f) + fmt.Sprintf(`
resource "gradual_rollout" "test" {
  name         = %q
  namespace    = %q
  clusters     = ["prod-eu-1", "staging-eu-1"]
  update_limit = "1"
  manifests = <<-EOT
%s  EOT
  verify = { timeout = "90s", bake_time = "20s" }
}
`, name, f.Namespace, indent(app(name, "v1", false, "")))

	ctx, cancel := context.WithCancel(context.Background())
	var takeover sync.WaitGroup
	t.Cleanup(func() { cancel(); takeover.Wait() })
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				// Once the first wave runs, a second apply takes the Lease over.
				PreConfig: func() {
					takeover.Go(func() {
						mc, err := f.ManagementClient()
						if err != nil {
							t.Errorf("management client: %v", err)
							return
						}
						store := records.NewManagementStore(mc, "")
						for ctx.Err() == nil {
							if r, err := store.LoadSummary(ctx, key); err == nil && r.Progress != nil && r.Progress.Wave >= 1 {
								if err := writeLease(f, key, "second-apply/pid-9", time.Now(), 60); err != nil {
									t.Errorf("take the Lease over: %v", err)
								}
								return
							}
							time.Sleep(200 * time.Millisecond)
						}
					})
				},
				Config:      config,
				ExpectError: regexp.MustCompile(`(?s)Lease Lost.*taken over by.*second-apply/pid-9`),
			},
			{
				// The second apply is gone (its Lease deleted): the next apply converges.
				PreConfig: func() {
					takeover.Wait()
					mc, err := f.ManagementClient()
					if err != nil {
						t.Fatal(err)
					}
					lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: records.DefaultNamespace, Name: key.ObjectName()}}
					if err := mc.Delete(context.Background(), lease); err != nil {
						t.Logf("delete the planted Lease: %v", err)
					}
				},
				Config: config,
			},
		},
	})
}
