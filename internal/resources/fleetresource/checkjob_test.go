package fleetresource

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
	return types.ObjectValueMust(CheckJobAttrTypes, map[string]attr.Value{"manifest": types.StringValue(manifest), "timeout": types.StringValue(timeout)})
}

func TestCheckJobOf(t *testing.T) {
	ctx := context.Background()
	job, diags := CheckJobOf(ctx, checkJobValue(okCheckJob, "90s"), false)
	if diags.HasError() || job == nil || job.Job.GetName() != "smoke" || job.Timeout != 90*time.Second {
		t.Fatalf("job %+v, diags %v", job, diags)
	}
	if job, diags := CheckJobOf(ctx, types.ObjectNull(CheckJobAttrTypes), false); job != nil || diags.HasError() {
		t.Fatalf("left out: job %+v, diags %v", job, diags)
	}

	// Through Flux the provider does not reach the clusters the Job would run in.
	_, diags = CheckJobOf(ctx, checkJobValue(okCheckJob, "90s"), true)
	if !diags.HasError() || diags[0].Summary() != "Check Job Not Delivered Through Flux Yet" {
		t.Fatalf("with delivery.flux: diags %v, want it refused", diags)
	}

	_, diags = CheckJobOf(ctx, checkJobValue(strings.Replace(okCheckJob, "namespace: demo", "", 1), "90s"), false)
	if !diags.HasError() || !strings.Contains(diags[0].Detail(), "no metadata.namespace") {
		t.Fatalf("no namespace: diags %v", diags)
	}
}

// The stored configuration (import) keeps verify.check_job.
func TestCheckJobStored(t *testing.T) {
	stored := &StoredCheckJob{Manifest: okCheckJob, Timeout: "90s"}
	if !stored.Value().Equal(checkJobValue(okCheckJob, "90s")) {
		t.Errorf("value() = %v", stored.Value())
	}
	if !(*StoredCheckJob)(nil).Value().IsNull() {
		t.Error("a resource without a check Job imports with one")
	}
}
