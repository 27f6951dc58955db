package rollout

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

const okCheckJob = `apiVersion: batch/v1
kind: Job
metadata: {name: smoke, namespace: demo}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: smoke, image: registry.example/smoke:1}]
`

func checkJobValue(manifest, timeout string) types.Object {
	return types.ObjectValueMust(checkJobAttrTypes, map[string]attr.Value{"manifest": types.StringValue(manifest), "timeout": types.StringValue(timeout)})
}

func TestCheckJobOf(t *testing.T) {
	ctx := context.Background()
	job, diags := checkJobOf(ctx, checkJobValue(okCheckJob, "90s"), false)
	if diags.HasError() || job == nil || job.Job.GetName() != "smoke" || job.Timeout != 90*time.Second {
		t.Fatalf("job %+v, diags %v", job, diags)
	}
	if job, diags := checkJobOf(ctx, types.ObjectNull(checkJobAttrTypes), false); job != nil || diags.HasError() {
		t.Fatalf("left out: job %+v, diags %v", job, diags)
	}

	// Through Flux the provider does not reach the clusters the Job would run in.
	_, diags = checkJobOf(ctx, checkJobValue(okCheckJob, "90s"), true)
	if !diags.HasError() || diags[0].Summary() != "Check Job Not Delivered Through Flux Yet" {
		t.Fatalf("with delivery.flux: diags %v, want it refused", diags)
	}

	_, diags = checkJobOf(ctx, checkJobValue(strings.Replace(okCheckJob, "namespace: demo", "", 1), "90s"), false)
	if !diags.HasError() || !strings.Contains(diags[0].Detail(), "no metadata.namespace") {
		t.Fatalf("no namespace: diags %v", diags)
	}
}

// The stored configuration (import) keeps verify.check_job.
func TestCheckJobStored(t *testing.T) {
	stored := &storedCheckJob{Manifest: okCheckJob, Timeout: "90s"}
	if !stored.value().Equal(checkJobValue(okCheckJob, "90s")) {
		t.Errorf("value() = %v", stored.value())
	}
	if !(*storedCheckJob)(nil).value().IsNull() {
		t.Error("a rollout without a check Job imports with one")
	}
}
