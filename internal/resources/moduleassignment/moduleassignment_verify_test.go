package moduleassignment

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/health"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

const smokeJob = `apiVersion: batch/v1
kind: Job
metadata: {name: smoke, namespace: demo}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: smoke, image: "registry.example/smoke:${tag:=1}"}]
`

// verify.check_job and preview reach the assignment's spec; with delivery.flux the check Job is
// refused (nothing connects to the workload clusters), naming it; import restores it.
func TestSpecCheckJobAndPreview(t *testing.T) {
	ctx := context.Background()
	m := moduleModel(t, dbConfigMap, "", "", nil)
	job := (&fleetresource.StoredCheckJob{Manifest: smokeJob, Timeout: "90s"}).Value()
	m.Verify = types.ObjectValueMust(verifyAttrTypes, map[string]attr.Value{
		"timeout": types.StringValue("60s"), "bake_time": types.StringValue("0s"),
		"health_checks": fleetresource.HealthValue(nil), "cluster_gates": types.BoolValue(true),
		"node_gate": types.ObjectNull(fleetresource.NodeGateAttrTypes), "check_job": job,
	})
	m.Preview = types.StringValue(delivery.PreviewAll)
	spec, diags := m.spec(ctx)
	if diags.HasError() {
		t.Fatalf("delivered directly: %s", summaries(diags))
	}
	if spec.CheckJob == nil || spec.CheckJob.Job.GetName() != "smoke" || spec.CheckJob.Timeout.String() != "1m30s" || spec.Preview.Mode != delivery.PreviewAll {
		t.Fatalf("spec check Job %+v, preview %+v", spec.CheckJob, spec.Preview)
	}
	raw, diags := m.configRecord(ctx)
	if diags.HasError() {
		t.Fatal(summaries(diags))
	}
	var imported Model
	if diags := imported.fromConfigRecord(ctx, raw); diags.HasError() {
		t.Fatal(summaries(diags))
	}
	if got := imported.Verify.Attributes()["check_job"]; !got.Equal(job) {
		t.Fatalf("imported check Job %v, want %v", got, job)
	}
	m.Delivery = fleetresource.DeliveryValue(&delivery.FluxSettings{Repository: "oci://registry.example/fleet/base"})
	if _, diags := m.spec(ctx); !strings.Contains(summaries(diags), "Check Job Not Delivered Through Flux Yet") {
		t.Fatalf("through Flux: errors %q, want the check Job refused", summaries(diags))
	}
}

// verify.health_checks go through Flux, as each module's Kustomizations' healthCheckExprs: the
// spec takes them with delivery.flux as it does delivering directly.
func TestSpecHealthChecksThroughFlux(t *testing.T) {
	ctx := context.Background()
	rules := []health.Rule{{APIVersion: "v1", Kind: "ConfigMap", Current: "true", Failed: "data.value == 'bad'"}}
	m := moduleModel(t, dbConfigMap, "", "", nil)
	m.Verify = types.ObjectValueMust(verifyAttrTypes, map[string]attr.Value{
		"timeout": types.StringValue("60s"), "bake_time": types.StringValue("0s"),
		"health_checks": fleetresource.HealthValue(rules), "cluster_gates": types.BoolValue(true),
		"node_gate": types.ObjectNull(fleetresource.NodeGateAttrTypes), "check_job": types.ObjectNull(fleetresource.CheckJobAttrTypes),
	})
	m.Delivery = fleetresource.DeliveryValue(&delivery.FluxSettings{Repository: "oci://registry.example/fleet/base"})
	m.sensitive = nil
	spec, diags := m.spec(ctx)
	if diags.HasError() {
		t.Fatalf("through Flux: %s", summaries(diags))
	}
	if got := spec.Health.Rules(); len(got) != 1 || got[0] != rules[0] {
		t.Errorf("spec health rules %+v, want %+v", got, rules)
	}
}
