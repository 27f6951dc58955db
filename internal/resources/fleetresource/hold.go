// hold.go: the `maintenance_window` attribute that rollouts and module assignments share, and
// how it becomes fleet's Hold (with the gradual.dev/paused and gradual.dev/maintenance-window
// Cluster annotations, which fleet reads itself).

package fleetresource

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	providerschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/window"
)

// PathMaintenanceWindow is the `maintenance_window` attribute.
var PathMaintenanceWindow = path.Root("maintenance_window")

// MaintenanceWindowAttrTypes are the attribute types of `maintenance_window`.
var MaintenanceWindowAttrTypes = map[string]attr.Type{
	"schedule": types.StringType, "duration": types.StringType, "time_zone": types.StringType,
}

// MaintenanceWindowModel is `maintenance_window`.
type MaintenanceWindowModel struct {
	Schedule types.String `tfsdk:"schedule"`
	Duration types.String `tfsdk:"duration"`
	TimeZone types.String `tfsdk:"time_zone"`
}

// HoldsDescription is the part of a resource description on what holds clusters back.
const HoldsDescription = "A Cluster annotated `" + fleet.PausedAnnotation + ": \"<reason>\"` is skipped with that reason by every " +
	"rollout and module assignment until the annotation is removed. A Cluster annotated `" + window.Annotation +
	": \"<cron>;<duration>[;<time zone>]\"` (e.g. `\"0 2 * * 6;4h;Europe/Berlin\"`, time zone UTC when left out) is changed " +
	"only inside that window; with `maintenance_window` set as well, inside both."

// windowFields are the fields of a `maintenance_window`, for the resources' attribute and the
// provider's.
var windowFields = []struct {
	name, description string
	required          bool
	check             validator.String
}{
	{"schedule", "When the window opens: a cron expression of five fields (minute hour day-of-month month " +
		"day-of-week, e.g. `\"0 2 * * 6\"` for Saturdays at 02:00) or a descriptor such as `@daily`, in `time_zone`.", true,
		windowField(func(s string) error { _, err := window.ParseSchedule(s); return err }, "a cron expression of five fields", "Invalid Cron Expression")},
	{"duration", "How long the window stays open after each start, e.g. `\"4h\"` (more than 0, at most `\"168h\"`).", true,
		windowField(func(s string) error { _, err := window.ParseDuration(s); return err }, "a duration of at most 168h", "Invalid Duration")},
	{"time_zone", "The IANA time zone `schedule` is read in, e.g. `\"Europe/Berlin\"` (daylight saving time included). Default `\"UTC\"`.", false,
		windowField(func(s string) error { _, err := window.ParseTimeZone(s); return err }, "an IANA time zone name", "Invalid Time Zone")},
}

// MaintenanceWindowAttribute is the `maintenance_window` attribute of what (e.g. "rollout").
func MaintenanceWindowAttribute(what string) schema.SingleNestedAttribute {
	attrs := map[string]schema.Attribute{}
	for _, f := range windowFields {
		attrs[f.name] = schema.StringAttribute{Required: f.required, Optional: !f.required, MarkdownDescription: f.description, Validators: []validator.String{f.check}}
	}
	return schema.SingleNestedAttribute{
		Optional: true,
		MarkdownDescription: "When the " + what + " may change clusters: a cluster is started only while this window is open " +
			"and stays open for at least `verify.timeout` + `verify.bake_time` more, so that its wave ends inside it. Judged at " +
			"plan (a cluster outside it is skipped with the time the window opens next), again when apply reads the fleet, and " +
			"again right before each wave: a cluster whose window closed in between is left alone, never changed outside it, " +
			"and picked up by a later apply. A Cluster's own `" + window.Annotation + "` annotation applies as well. Without it, " +
			"the provider's `maintenance_window`, if any, applies.",
		Attributes: attrs,
	}
}

func windowField(check func(string) error, description, summary string) validator.String {
	return stringFunc{description: description, summary: summary, check: check}
}

// ProviderMaintenanceWindowAttribute is the provider's `maintenance_window`: the same fields, the
// window of every rollout and module assignment that sets none of its own.
func ProviderMaintenanceWindowAttribute() providerschema.SingleNestedAttribute {
	attrs := map[string]providerschema.Attribute{}
	for _, f := range windowFields {
		attrs[f.name] = providerschema.StringAttribute{Required: f.required, Optional: !f.required, MarkdownDescription: f.description, Validators: []validator.String{f.check}}
	}
	return providerschema.SingleNestedAttribute{
		Optional: true,
		MarkdownDescription: "The maintenance window of every `gradual_rollout` and `gradual_module_assignment` that sets no " +
			"`maintenance_window` of its own (a resource's own replaces it): clusters are started only while it is open, as " +
			"described for the resources. A Cluster's own `" + window.Annotation + "` annotation applies as well. It does not govern " +
			"`gradual_inplace_update`, which has no maintenance window: Cluster API carries its change out as soon as it is written.",
		Attributes: attrs,
	}
}

// WindowFrom converts the provider's `maintenance_window` (null: nil).
func WindowFrom(ctx context.Context, v types.Object) (*window.Window, diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() {
		return nil, nil
	}
	var m MaintenanceWindowModel
	diags := v.As(ctx, &m, basetypes.ObjectAsOptions{})
	if diags.HasError() {
		return nil, diags
	}
	w, err := window.New(m.Schedule.ValueString(), m.Duration.ValueString(), m.TimeZone.ValueString())
	if err != nil {
		diags.AddAttributeError(PathMaintenanceWindow, "Invalid Maintenance Window", fmt.Sprintf("maintenance_window: %v", err))
		return nil, diags
	}
	return &w, diags
}

// HoldFrom converts `maintenance_window` into fleet's Hold; margin is how long a window must
// stay open for a cluster to be started (verify timeout plus bake time). Without one of its
// own the resource takes the provider's (fallback, nil for none). The validators have run
// already; errors are reported against the attribute anyway.
func HoldFrom(ctx context.Context, v types.Object, verifyTimeout, bake time.Duration, fallback *window.Window) (fleet.Hold, diag.Diagnostics) {
	hold := fleet.Hold{Margin: verifyTimeout + bake}
	if v.IsNull() || v.IsUnknown() {
		if fallback != nil {
			hold.Window, hold.WindowName = fallback, "the provider's maintenance_window"
		}
		return hold, nil
	}
	var m MaintenanceWindowModel
	diags := v.As(ctx, &m, basetypes.ObjectAsOptions{})
	if diags.HasError() {
		return hold, diags
	}
	w, err := window.New(m.Schedule.ValueString(), m.Duration.ValueString(), m.TimeZone.ValueString())
	if err != nil {
		at := PathMaintenanceWindow
		var fe *window.FieldError
		if errors.As(err, &fe) {
			at = at.AtName(fe.Field)
		}
		diags.AddAttributeError(at, "Invalid Maintenance Window", fmt.Sprintf("maintenance_window: %v", err))
		return hold, diags
	}
	hold.Window = &w
	return hold, diags
}
