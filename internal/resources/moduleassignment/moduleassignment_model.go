package moduleassignment

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetattr"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/glue"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/ignoreattr"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/verifyattr"
)

// Model is the resource's configuration and state.
type Model struct {
	ID              types.String   `tfsdk:"id"`
	Name            types.String   `tfsdk:"name"`
	Namespace       types.String   `tfsdk:"namespace"`
	Selector        types.Object   `tfsdk:"selector"`
	Modules         types.List     `tfsdk:"modules"`
	Mode            types.String   `tfsdk:"mode"`
	UpdateLimit     types.String   `tfsdk:"update_limit"`
	MaxFailures     types.String   `tfsdk:"max_failures"`
	Verify          types.Object   `tfsdk:"verify"`
	DeletionPolicy  types.String   `tfsdk:"deletion_policy"`
	Adopt           types.Bool     `tfsdk:"adopt"`
	IgnoreFields    types.List     `tfsdk:"ignore_fields"`
	RecordNamespace types.String   `tfsdk:"record_namespace"`
	Timeouts        timeouts.Value `tfsdk:"timeouts"`
	Revisions       types.Map      `tfsdk:"revisions"`
	Bindings        types.Map      `tfsdk:"bindings"`
	Skipped         types.Map      `tfsdk:"skipped"`
	Changes         types.Map      `tfsdk:"changes"`
}

// ModuleModel is one `modules` entry.
type ModuleModel struct {
	Name      types.String       `tfsdk:"name"`
	Version   types.String       `tfsdk:"version"`
	Manifests manifesttype.Value `tfsdk:"manifests"`
	DependsOn types.List         `tfsdk:"depends_on"`
}

// VerifyModel is the `verify` attribute.
type VerifyModel struct {
	Timeout  types.String `tfsdk:"timeout"`
	BakeTime types.String `tfsdk:"bake_time"`
}

// TimeoutsValue is the `timeouts` attribute, for glue.Create and glue.Update.
func (m *Model) TimeoutsValue() timeouts.Value { return m.Timeouts }

var objectOpts = basetypes.ObjectAsOptions{UnhandledNullAsEmpty: true, UnhandledUnknownAsEmpty: true}

func (m *Model) key() records.Key {
	return records.Key{Kind: assignment.KeyKind, Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()}
}

func (m *Model) query(ctx context.Context) (fleet.Query, diag.Diagnostics) {
	return fleetattr.Query(ctx, m.Namespace, m.Selector, types.ListNull(types.StringType)) // no names: only a selector
}

func (m *Model) modules(ctx context.Context) ([]ModuleModel, diag.Diagnostics) {
	var mods []ModuleModel
	diags := m.Modules.ElementsAs(ctx, &mods, false)
	return mods, diags
}

// spec converts the configuration into what internal/assignment needs; modules come out in
// depends_on order.
func (m *Model) spec(ctx context.Context) (assignment.Spec, diag.Diagnostics) {
	spec := assignment.Spec{
		Key: m.key(), ClusterNamespace: m.Namespace.ValueString(), RecordNamespace: m.RecordNamespace.ValueString(),
		Mode: assignment.Mode(m.Mode.ValueString()), Orphan: m.DeletionPolicy.ValueString() == "orphan",
	}
	if spec.Mode == "" {
		spec.Mode = assignment.Reconcile
	}
	mods, diags := m.modules(ctx)
	if diags.HasError() {
		return spec, diags
	}
	rules, d := ignoreattr.Rules(ctx, m.IgnoreFields)
	diags.Append(d...)
	var err error
	if spec.Ignore, err = ignoreattr.Ignore(rules); err != nil {
		diags.AddAttributeError(pathModules.ParentPath().AtName(ignoreattr.Name), "Invalid Field Path", err.Error())
		return spec, diags
	}
	var list []assignment.Module
	for i, mm := range mods {
		mod := assignment.Module{Name: mm.Name.ValueString(), Version: mm.Version.ValueString()}
		set, err := manifest.Parse(mm.Manifests.ValueString())
		if err == nil {
			mod.Revision, err = set.RevisionWith(ignoreattr.Canonical(rules))
		}
		if err != nil {
			diags.AddAttributeError(pathModules.AtListIndex(i).AtName("manifests"), "Invalid Manifests", err.Error())
			continue
		}
		mod.Objects = set
		diags.Append(mm.DependsOn.ElementsAs(ctx, &mod.DependsOn, true)...)
		list = append(list, mod)
	}
	if diags.HasError() {
		return spec, diags
	}
	ordered, err := assignment.Order(list)
	if err != nil {
		diags.AddAttributeError(pathModules, "Invalid Modules", err.Error()+". Module names must be unique, and depends_on may name only other modules of this assignment, without cycles.")
		return spec, diags
	}
	spec.Modules = ordered
	var err2 error
	if spec.Policy.UpdateLimit, err2 = engine.ParseLimit(m.UpdateLimit.ValueString()); err2 != nil {
		diags.AddAttributeError(glue.PathUpdateLimit, "Invalid Update Limit", err2.Error())
	}
	if spec.Policy.MaxFailures, err2 = engine.ParseMaxFailures(m.MaxFailures.ValueString()); err2 != nil {
		diags.AddAttributeError(glue.PathMaxFailures, "Invalid Failure Budget", err2.Error())
	}
	// A failed module is restored where it failed; clusters that took it keep it (its dependents
	// are blocked only where it failed).
	spec.Policy.OnFailure = engine.Halt
	verify := VerifyModel{Timeout: types.StringValue(verifyattr.DefaultTimeout), BakeTime: types.StringValue(verifyattr.DefaultBakeTime)}
	diags.Append(verifyattr.As(ctx, m.Verify, &verify)...)
	spec.Policy.VerifyTimeout, spec.Policy.BakeTime = verifyattr.Durations(verify.Timeout, verify.BakeTime)
	return spec, diags
}

func (m *Model) setRevisions(spec assignment.Spec) {
	revs := map[string]attr.Value{}
	for _, mod := range spec.Modules {
		revs[mod.Name] = types.StringValue(mod.Revision)
	}
	m.Revisions = types.MapValueMust(types.StringType, revs)
}

// setBindings fills `bindings`; drifted marks cluster → module pairs shown as drifted.
func (m *Model) setBindings(bindings map[string][]records.ModuleBinding, drifted map[string]map[string]bool) {
	out := map[string]attr.Value{}
	for cluster, bs := range bindings {
		var vals []attr.Value
		for _, b := range bs {
			result := b.Result
			if drifted[cluster][b.Module] && result == records.BindingApplied {
				result = records.BindingDrifted
			}
			vals = append(vals, bindingValue(b.Module, b.Revision, types.StringValue(appliedAt(b.AppliedAt)), result))
		}
		out[cluster] = types.ListValueMust(bindingsType.ElemType, vals)
	}
	m.Bindings = types.MapValueMust(bindingsType, out)
}

func bindingValue(module, revision string, at types.String, result string) attr.Value {
	return types.ObjectValueMust(bindingAttrTypes, map[string]attr.Value{
		"module": types.StringValue(module), "revision": types.StringValue(revision), "applied_at": at, "result": types.StringValue(result),
	})
}

func appliedAt(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func (m *Model) setSkipped(skipped map[string]string) {
	vals := map[string]attr.Value{}
	for k, v := range skipped {
		vals[k] = types.StringValue(v)
	}
	m.Skipped = types.MapValueMust(types.StringType, vals)
}

func (m *Model) markObservedUnknown() {
	m.Revisions = types.MapUnknown(types.StringType)
	m.markOutcomeUnknown()
	m.Changes = types.MapUnknown(changesType)
}

// markOutcomeUnknown leaves the attributes that depend on apply's outcome to apply.
func (m *Model) markOutcomeUnknown() {
	m.Bindings = types.MapUnknown(bindingsType)
	m.Skipped = types.MapUnknown(types.StringType)
}

var changesType = types.ListType{ElemType: types.StringType}

// setChanges sets `changes` from the clusters each module is applied to.
func (m *Model) setChanges(apply map[string][]string) {
	vals := map[string]attr.Value{}
	for module, clusters := range apply {
		if len(clusters) == 0 {
			continue
		}
		elems := make([]attr.Value, len(clusters))
		for i, c := range clusters {
			elems[i] = types.StringValue(c)
		}
		vals[module] = types.ListValueMust(types.StringType, elems)
	}
	m.Changes = types.MapValueMust(changesType, vals)
}

// plannedChanges returns `changes` as module → clusters, and whether it is known.
func (m *Model) plannedChanges(ctx context.Context) (map[string][]string, bool) {
	if m.Changes.IsUnknown() || m.Changes.IsNull() {
		return nil, false
	}
	out := map[string][]string{}
	if diags := m.Changes.ElementsAs(ctx, &out, false); diags.HasError() {
		return nil, false
	}
	return out, true
}

// storedConfig is what the management cluster keeps of the configuration, so `terraform
// import` can restore it. Field names are part of the record format.
type storedConfig struct {
	Selector       fleet.LabelSelector `json:"selector"`
	Modules        []storedModule      `json:"modules"`
	Mode           string              `json:"mode"`
	UpdateLimit    string              `json:"updateLimit"`
	MaxFailures    string              `json:"maxFailures"`
	VerifyTimeout  string              `json:"verifyTimeout"`
	BakeTime       string              `json:"bakeTime"`
	DeletionPolicy string              `json:"deletionPolicy"`
	// NoAdopt is adopt = false (stored negated: records written before adopt existed adopt).
	NoAdopt      bool              `json:"noAdopt,omitempty"`
	IgnoreFields []ignoreattr.Rule `json:"ignoreFields,omitempty"`
}

type storedModule struct {
	Name      string   `json:"name"`
	Version   string   `json:"version"`
	Manifests string   `json:"manifests"`
	DependsOn []string `json:"dependsOn,omitempty"`
}

func (m *Model) configRecord(ctx context.Context) ([]byte, diag.Diagnostics) {
	c := storedConfig{Mode: m.Mode.ValueString(), UpdateLimit: m.UpdateLimit.ValueString(), MaxFailures: m.MaxFailures.ValueString(), DeletionPolicy: m.DeletionPolicy.ValueString(),
		NoAdopt: !m.Adopt.IsNull() && !m.Adopt.ValueBool()}
	var diags diag.Diagnostics
	c.Selector, diags = fleetattr.ToLabelSelector(ctx, m.Selector)
	mods, d := m.modules(ctx)
	diags.Append(d...)
	for _, mm := range mods {
		sm := storedModule{Name: mm.Name.ValueString(), Version: mm.Version.ValueString(), Manifests: mm.Manifests.ValueString()}
		diags.Append(mm.DependsOn.ElementsAs(ctx, &sm.DependsOn, true)...)
		c.Modules = append(c.Modules, sm)
	}
	var verify VerifyModel
	diags.Append(m.Verify.As(ctx, &verify, objectOpts)...)
	c.VerifyTimeout, c.BakeTime = verify.Timeout.ValueString(), verify.BakeTime.ValueString()
	c.IgnoreFields, d = ignoreattr.Rules(ctx, m.IgnoreFields)
	diags.Append(d...)
	raw, err := json.Marshal(c)
	if err != nil {
		diags.AddError("Cannot Record Configuration", err.Error())
	}
	return raw, diags
}

func (m *Model) fromConfigRecord(ctx context.Context, raw []byte) diag.Diagnostics {
	var diags diag.Diagnostics
	var c storedConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		diags.AddError("Unreadable Assignment Record", "The management cluster's record of this assignment cannot be decoded: "+err.Error())
		return diags
	}
	m.Selector = fleetattr.FromLabelSelector(ctx, c.Selector)
	var mods []attr.Value
	for _, sm := range c.Modules {
		deps := types.ListNull(types.StringType)
		if sm.DependsOn != nil {
			deps, _ = types.ListValueFrom(ctx, types.StringType, sm.DependsOn)
		}
		mods = append(mods, types.ObjectValueMust(moduleAttrTypes, map[string]attr.Value{
			"name": types.StringValue(sm.Name), "version": types.StringValue(sm.Version), "manifests": manifesttype.NewValue(sm.Manifests), "depends_on": deps,
		}))
	}
	m.Modules = types.ListValueMust(types.ObjectType{AttrTypes: moduleAttrTypes}, mods)
	m.Mode, m.UpdateLimit, m.MaxFailures = types.StringValue(c.Mode), types.StringValue(c.UpdateLimit), types.StringValue(c.MaxFailures)
	m.DeletionPolicy = types.StringValue(c.DeletionPolicy)
	m.Adopt = types.BoolValue(!c.NoAdopt)
	var d diag.Diagnostics
	m.IgnoreFields, d = ignoreattr.Value(ctx, c.IgnoreFields)
	diags.Append(d...)
	m.Verify = types.ObjectValueMust(verifyAttrTypes, map[string]attr.Value{"timeout": types.StringValue(c.VerifyTimeout), "bake_time": types.StringValue(c.BakeTime)})
	return diags
}
