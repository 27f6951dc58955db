package moduleassignment

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/diagnostics"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/lifecycle"
)

// Create applies the assignment. As for rollouts (see lifecycle.Create), a failed Create saves no
// state: the records and bindings keep what was applied, and the next Create continues from them.
func (r *assignmentResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	lifecycle.Create(ctx, req, resp, r.apply, "Module Assignment Not Saved In State",
		"The assignment failed before it completed, so it is not saved in the Terraform state. Every change it made is recorded in the clusters and bindings; the next apply continues from them.")
}

// Update applies the assignment; its state is saved even on failure (see lifecycle.Update).
func (r *assignmentResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	lifecycle.Update(ctx, req, resp, r.apply)
}

func (r *assignmentResource) apply(ctx context.Context, timeout time.Duration, plan *Model, diags *diag.Diagnostics) bool {
	if r.Data == nil {
		diags.AddError("Provider Not Configured", diagnostics.UnconfiguredProvider)
		return false
	}
	spec, d := plan.spec(ctx)
	diags.Append(d...)
	query, d := plan.query(ctx)
	diags.Append(d...)
	if diags.HasError() {
		return false
	}
	plan.ID = types.StringValue(spec.Key.Namespace + "/" + spec.Key.Name)
	plan.setRevisions(spec)
	planned, known := plan.plannedChanges(ctx)
	config, d := plan.configRecord(ctx)
	diags.Append(d...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := assignment.Run(ctx, r.Data.Delivery, assignment.RunRequest{
		Spec: spec, Query: query, Planned: planned, PlannedKnown: known, Config: config,
		Logf: func(msg string, fields map[string]any) { tflog.Info(ctx, msg, fields) },
	})
	// Only what the plan left unknown is filled in: a value the plan showed is a promise.
	var bindings map[string][]records.ModuleBinding
	var skipped map[string]string
	if res != nil {
		bindings, skipped = res.Bindings, res.Skipped
		for _, w := range res.Warnings {
			diags.AddWarning("Module Assignment Warning", w)
		}
	}
	if plan.Bindings.IsUnknown() {
		plan.setBindings(bindings, nil)
	}
	if plan.Skipped.IsUnknown() {
		plan.setSkipped(skipped)
	}
	if plan.Changes.IsUnknown() {
		var applied map[string][]string
		if res != nil {
			applied = res.Applied
		}
		plan.setChanges(applied)
	}
	if err != nil {
		diags.Append(diagnostics.FromError(err, "Module Assignment Failed"))
		return false
	}
	return true
}

func (r *assignmentResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state Model
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.Data == nil {
		return
	}
	if state.RecordNamespace.IsNull() {
		state.RecordNamespace = types.StringValue(defaultRecordNamespace)
	}
	if state.Modules.IsNull() {
		key := state.key()
		found, err := assignment.LoadConfig(ctx, r.Data.Delivery, key, state.RecordNamespace.ValueString())
		if err != nil {
			resp.Diagnostics.Append(diagnostics.FromError(err, "Cannot Import Module Assignment"))
			return
		}
		if found == nil {
			resp.Diagnostics.AddError("Module Assignment Not Found",
				fmt.Sprintf("No records of %s exist in the management cluster (namespace %q). Import only assignments that were applied.", key.Describe(), state.RecordNamespace.ValueString()))
			return
		}
		resp.Diagnostics.Append(state.fromConfigRecord(ctx, found)...)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	spec, diags := state.spec(ctx)
	resp.Diagnostics.Append(diags...)
	query, diags := state.query(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	obs, err := assignment.Observe(ctx, r.Data.Delivery, query, spec, true)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Cannot Read The Fleet"))
		return
	}
	drifted := map[string]map[string]bool{}
	for module, o := range obs.Modules {
		for cluster, st := range o.Clusters {
			if st.State == delivery.StateDrifted {
				if drifted[cluster] == nil {
					drifted[cluster] = map[string]bool{}
				}
				drifted[cluster][module] = true
			}
		}
	}
	state.setRevisions(spec)
	state.setBindings(obs.Bindings, drifted)
	state.setSkipped(obs.Skipped)
	if state.Changes.IsNull() || state.Changes.IsUnknown() {
		state.setChanges(nil) // imported: no apply yet
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *assignmentResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state Model
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.Data == nil {
		resp.Diagnostics.AddError("Provider Not Configured", diagnostics.UnconfiguredProvider)
		return
	}
	timeout, diags := state.Timeouts.Delete(ctx, lifecycle.DefaultDeleteTimeout)
	resp.Diagnostics.Append(diags...)
	spec, d := state.spec(ctx)
	resp.Diagnostics.Append(d...)
	query, d := state.query(ctx)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	warnings, err := assignment.Destroy(ctx, r.Data.Delivery, spec, query, func(msg string, fields map[string]any) { tflog.Info(ctx, msg, fields) })
	for _, w := range warnings {
		resp.Diagnostics.AddWarning("Cluster Not Cleaned Up", w)
	}
	if err != nil {
		resp.Diagnostics.Append(diagnostics.FromError(err, "Module Assignment Delete Failed"))
	}
}
