//go:build unix

package rollout_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
)

// A plan whose waves can outlast the apply's timeout says so up front (3 waves of up to 90 s
// of verification against a 2-minute create timeout), and one that fits does not.
func TestAccRollout_planWarnsWhenWavesOutlastTheTimeout(t *testing.T) {
	acctest.OnOneLane(t, 1)
	f := acctest.Fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("timeout")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	config := strings.Replace(interruptConfig(f, name, app(name, "v1", false, "")), `verify = { timeout = "90s" }`,
		`verify = { timeout = "90s" }`+"\n  timeouts = { create = \"2m\" }", 1)
	tf.writeConfig(config)
	out := tf.mustRun(ctx, 0, "plan")
	if !strings.Contains(out, "Waves May Outlast The Timeout") || !strings.Contains(out, "3 waves") {
		t.Errorf("no warning that 3 waves of up to 90 s outlast a 2-minute timeout:\n%s", out)
	}
	tf.writeConfig(strings.Replace(config, `create = "2m"`, `create = "10m"`, 1))
	if out := tf.mustRun(ctx, 0, "plan"); strings.Contains(out, "Waves May Outlast The Timeout") {
		t.Errorf("warned although 3 waves of up to 90 s fit in 10 minutes:\n%s", out)
	}
}
