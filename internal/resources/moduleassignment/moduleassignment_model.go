package moduleassignment

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/assignment"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/ignoreattr"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/manifesttype"
	"github.com/gradual-dev/terraform-provider-gradual/internal/window"
)

// Model is the resource's configuration and state.
type Model struct {
	ID              types.String   `tfsdk:"id"`
	Name            types.String   `tfsdk:"name"`
	Namespace       types.String   `tfsdk:"namespace"`
	Selector        types.Object   `tfsdk:"selector"`
	Names           types.List     `tfsdk:"names"`
	Modules         types.List     `tfsdk:"modules"`
	Mode            types.String   `tfsdk:"mode"`
	UpdateLimit     types.String   `tfsdk:"update_limit"`
	MaxFailures     types.String   `tfsdk:"max_failures"`
	MaxUnsettled    types.String   `tfsdk:"max_unsettled"`
	Verify          types.Object   `tfsdk:"verify"`
	DeletionPolicy  types.String   `tfsdk:"deletion_policy"`
	Canary          types.List     `tfsdk:"canary"`
	CanaryOptional  types.Bool     `tfsdk:"canary_optional"`
	OnFailure       types.String   `tfsdk:"on_failure"`
	ForceConflicts  types.Bool     `tfsdk:"force_conflicts"`
	RetryInvalid    types.Bool     `tfsdk:"retry_invalid"`
	Preview         types.String   `tfsdk:"preview"`
	Adopt           types.Bool     `tfsdk:"adopt"`
	IgnoreFields    types.List     `tfsdk:"ignore_fields"`
	SensitivePaths  types.List     `tfsdk:"sensitive_paths"`
	RecordNamespace types.String   `tfsdk:"record_namespace"`
	Timeouts        timeouts.Value `tfsdk:"timeouts"`
	// Values is `values` (fleetresource.ValuesAttribute).
	Values types.Object `tfsdk:"values"`
	// MaintenanceWindow is the assignment's own window (fleetresource.MaintenanceWindowAttribute).
	MaintenanceWindow types.Object `tfsdk:"maintenance_window"`
	// Delivery is `delivery` (fleetresource.DeliveryAttribute): direct when null, or through Flux.
	Delivery types.Object `tfsdk:"delivery"`
	// registry is the write-only `delivery.flux.password`, `token` and `client_key`, read from
	// the configuration (ReadWriteOnly); the framework skips unexported fields.
	registry  fleetresource.FluxWriteOnly
	Revisions types.Map `tfsdk:"revisions"`
	// SensitiveObjects: module → identities of its sensitive_manifests.
	SensitiveObjects types.Map `tfsdk:"sensitive_objects"`
	// Objects: module → its objects of manifests, key → YAML (manifesttype.Objects).
	Objects   types.Map  `tfsdk:"objects"`
	Summary   types.Map  `tfsdk:"summary"`
	Attention types.Map  `tfsdk:"attention"`
	Waves     types.Map  `tfsdk:"waves"`
	Leaving   types.List `tfsdk:"leaving"`
	Skipped   types.Map  `tfsdk:"skipped"`
	// FollowJoins and Bridge: the bridge for joiners (moduleassignment_bridge.go).
	FollowJoins types.Object `tfsdk:"follow_joins"`
	Bridge      types.Map    `tfsdk:"bridge"`

	// private is kept in the resource's private state (see moduleassignment_private.go), out of plans.
	private privateState
	// sensitive is each module's write-only sensitive_manifests, from the configuration at plan
	// and apply only (ReadWriteOnly); empty in Read and Delete, where the records suffice.
	sensitive map[string]string
	// adoptWritten says the configuration writes `adopt = true` (not adopt's default): the
	// opt-in that takes over a module's objects where its records are gone
	// (assignment.Spec.AdoptUnrecorded). Read with the write-only values, from the configuration.
	adoptWritten bool
}

// ModuleModel is one `modules` entry.
type ModuleModel struct {
	Name      types.String       `tfsdk:"name"`
	Version   types.String       `tfsdk:"version"`
	Manifests manifesttype.Value `tfsdk:"manifests"`
	Sensitive types.String       `tfsdk:"sensitive_manifests"` // write-only: only from the configuration
	DependsOn types.List         `tfsdk:"depends_on"`
	// DefaultNamespace is the namespace of the module's namespaced objects that name none.
	DefaultNamespace types.String `tfsdk:"default_namespace"`
}

// bundle is the module's objects, both halves (hidden is its sensitive_manifests, "" outside
// plan and apply), with its default namespace applied: what is applied, what the revision names
// and what sensitive_paths rules match.
func (mm ModuleModel) bundle(hidden string) (*manifest.Set, error) {
	set, err := manifest.Bundle(mm.Manifests.ValueString(), hidden)
	if err == nil {
		err = set.DefaultNamespace(mm.DefaultNamespace.ValueString())
	}
	return set, err
}

// ReadWriteOnly takes each module's `sensitive_manifests`, and the registry's
// `delivery.flux.password`, `token` and `client_key`, from the configuration: Terraform keeps
// write-only values out of the plan and the state, so plan and apply find them only there
// (fleetresource.WriteOnly).
func (m *Model) ReadWriteOnly(ctx context.Context, config tfsdk.Config) diag.Diagnostics {
	var mods []ModuleModel
	diags := config.GetAttribute(ctx, pathModules, &mods)
	m.sensitive = map[string]string{}
	for _, mm := range mods {
		if !mm.Sensitive.IsNull() && !mm.Sensitive.IsUnknown() && mm.Sensitive.ValueString() != "" {
			m.sensitive[mm.Name.ValueString()] = mm.Sensitive.ValueString()
		}
	}
	m.adoptWritten = fleetresource.WritesTrue(ctx, config, path.Root("adopt"))
	var d diag.Diagnostics
	m.registry, d = fleetresource.FluxCredentials(ctx, config)
	return append(diags, d...)
}

// ClearWriteOnly is fleetresource.WriteOnly's: the values live outside the attributes (in
// m.sensitive), so the state never holds them; they are dropped all the same once applied.
func (m *Model) ClearWriteOnly() {
	m.sensitive = nil
	m.registry = fleetresource.NoFluxWriteOnly()
}

// sensitiveUnknown reports whether a module's sensitive_manifests is not known yet.
func sensitiveUnknown(ctx context.Context, config tfsdk.Config) bool {
	var mods []ModuleModel
	if diags := config.GetAttribute(ctx, pathModules, &mods); diags.HasError() {
		return true
	}
	for _, mm := range mods {
		if mm.Sensitive.IsUnknown() {
			return true
		}
	}
	return false
}

// setSensitiveObjects names, per module, the objects of its sensitive_manifests (identities,
// never content), as they are applied: with the module's default namespace.
func (m *Model) setSensitiveObjects(ctx context.Context) diag.Diagnostics {
	mods, diags := m.modules(ctx)
	out := map[string][]string{}
	for _, mm := range mods {
		name := mm.Name.ValueString()
		text := m.sensitive[name]
		if text == "" {
			continue
		}
		// The sensitive half alone first, so that its own errors are reported as its own.
		if _, err := manifest.Bundle("", text); err != nil {
			diags.AddAttributeError(pathModules, "Invalid Sensitive Manifests", "module "+name+": "+err.Error())
			continue
		}
		// Whole, because a CRD of the public half can make a kind of the sensitive half
		// cluster-scoped. Errors of the whole (the public half, a clash once the default namespace
		// is set) are spec's to report, against manifests.
		set, err := mm.bundle(text)
		if err != nil {
			continue
		}
		_, hidden := set.Halves(mm.Manifests.ValueString())
		keys := make([]string, len(hidden))
		for i, obj := range hidden {
			keys[i] = manifest.Key(obj)
		}
		out[name] = keys
	}
	var d diag.Diagnostics
	m.SensitiveObjects, d = types.MapValueFrom(ctx, sensitiveObjectsType, out)
	diags.Append(d...)
	return diags
}

// keepSensitiveRevisions sets, outside plan and apply (no sensitive half at hand), the revision
// of each module with sensitive objects to the one the state holds: the public half alone
// names another revision.
func (m *Model) keepSensitiveRevisions(ctx context.Context, spec *assignment.Spec) {
	if m.SensitiveObjects.IsNull() || m.SensitiveObjects.IsUnknown() || m.Revisions.IsNull() || m.Revisions.IsUnknown() {
		return
	}
	revisions := map[string]string{}
	_ = m.Revisions.ElementsAs(ctx, &revisions, false)
	for i, mod := range spec.Modules {
		if _, sensitive := m.SensitiveObjects.Elements()[mod.Name]; sensitive && revisions[mod.Name] != "" && m.sensitive[mod.Name] == "" {
			spec.Modules[i].Revision = revisions[mod.Name]
		}
	}
}

// VerifyModel is the `verify` attribute.
type VerifyModel struct {
	Timeout      types.String `tfsdk:"timeout"`
	BakeTime     types.String `tfsdk:"bake_time"`
	HealthChecks types.List   `tfsdk:"health_checks"`
	ClusterGates types.Bool   `tfsdk:"cluster_gates"`
	NodeGate     types.Object `tfsdk:"node_gate"`
	CheckJob     types.Object `tfsdk:"check_job"`
}

// TimeoutsValue is the `timeouts` attribute, for fleetresource.Create and fleetresource.Update.
func (m *Model) TimeoutsValue() timeouts.Value { return m.Timeouts }

// Identity is what names the assignment's records (fleetresource.EngineModel).
func (m *Model) Identity() fleetresource.Identity {
	return fleetresource.Identity{Name: m.Name, Namespace: m.Namespace, RecordNamespace: m.RecordNamespace}
}

// SetID sets `id` (fleetresource.EngineModel).
func (m *Model) SetID(id types.String) { m.ID = id }

// fluxSettings is `delivery.flux` as the Flux engine takes it; nil for direct delivery (or while
// unknown).
func (m *Model) fluxSettings(ctx context.Context) (*delivery.FluxSettings, diag.Diagnostics) {
	return fleetresource.FluxSettings(ctx, m.Delivery, m.registry)
}

func (m *Model) key() records.Key {
	return records.Key{Kind: assignment.KeyKind, Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()}
}

func (m *Model) query(ctx context.Context, fallback *window.Window) (fleet.Query, diag.Diagnostics) {
	q, diags := fleetresource.Query(ctx, m.Namespace, m.Selector, m.Names)
	verify := VerifyModel{Timeout: types.StringValue(fleetresource.DefaultVerifyTimeout), BakeTime: types.StringValue(fleetresource.DefaultBakeTime)}
	diags.Append(fleetresource.VerifyAs(ctx, m.Verify, &verify)...)
	verifyTimeout, bake := fleetresource.VerifyDurations(verify.Timeout, verify.BakeTime)
	var d diag.Diagnostics
	q.Hold, d = fleetresource.HoldFrom(ctx, m.MaintenanceWindow, verifyTimeout, bake, fallback)
	if !m.MaintenanceWindow.IsNull() {
		q.Hold.WindowName = "the module assignment's maintenance_window"
	}
	diags.Append(d...)
	return q, diags
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
		ForceConflicts: m.ForceConflicts.ValueBool(), Retry: m.RetryInvalid.ValueBool(), AdoptUnrecorded: m.adoptWritten,
	}
	if spec.Mode == "" {
		spec.Mode = assignment.Reconcile
	}
	mods, diags := m.modules(ctx)
	if diags.HasError() {
		return spec, diags
	}
	rules, d, ok := m.specRules(ctx, &spec)
	diags.Append(d...)
	if !ok {
		return spec, diags
	}
	list, d := m.specModules(ctx, mods, rules)
	diags.Append(d...)
	if diags.HasError() {
		return spec, diags
	}
	ordered, err := assignment.Order(list)
	if err != nil {
		diags.AddAttributeError(pathModules, "Invalid Modules", err.Error()+". Module names must be unique, and depends_on may name only other modules of this assignment, without cycles.")
		return spec, diags
	}
	spec.Modules = ordered
	diags.Append(fleetresource.SetLimits(m.UpdateLimit, m.MaxFailures, m.MaxUnsettled, &spec.Policy)...)
	// A failed module is restored where it failed; by default (halt) clusters that took it keep it
	// (its dependents are blocked only where it failed).
	diags.Append(fleetresource.SetOnFailure(m.OnFailure, defaultOnFailure, &spec.Policy)...)
	diags.Append(fleetresource.SetCanary(ctx, m.Canary, m.CanaryOptional, &spec.Policy)...)
	diags.Append(m.specVerify(ctx, &spec)...)
	spec.Preview = delivery.PreviewSpec{Mode: m.Preview.ValueString()}
	m.refuseWithFlux(&diags)
	spec.FollowJoins, d = m.followJoins(ctx)
	diags.Append(d...)
	return spec, diags
}

// moduleRules are the rules every module's content is taken under: sensitive (sensitive_paths)
// finds the values to redact, and settings (the ignore and sensitive rules, the values, Flux's
// pull settings) go into each module's revision.
type moduleRules struct {
	sensitive []ignoreattr.Rule
	settings  []byte
	// movedFrom, while the assignment moves between engines, are the settings with the old
	// engine's pull settings in place of the new one's (movedFromSettings); moving says it does.
	movedFrom []byte
	moving    bool
}

// specRules sets the assignment's ignore rules and values, and returns the rules its modules
// are taken under. ok is false when they are invalid, which ends the conversion.
func (m *Model) specRules(ctx context.Context, spec *assignment.Spec) (_ moduleRules, diags diag.Diagnostics, ok bool) {
	rules, d := ignoreattr.Rules(ctx, m.IgnoreFields)
	diags.Append(d...)
	var err error
	if spec.Ignore, err = ignoreattr.Ignore(rules); err != nil {
		diags.AddAttributeError(pathModules.ParentPath().AtName(ignoreattr.Name), "Invalid Field Path", err.Error())
		return moduleRules{}, diags, false
	}
	sensitive, d := ignoreattr.Rules(ctx, m.SensitivePaths)
	diags.Append(d...)
	spec.Values, d = fleetresource.Values(ctx, m.Values)
	diags.Append(d...)
	if d.HasError() {
		return moduleRules{}, diags, false
	}
	// The template and the rules name each module's revision, as a rollout's (ignore_fields,
	// sensitive_paths, values): the same objects under other rules are another revision.
	settings := append(ignoreattr.Settings(rules, sensitive), spec.Values.Settings()...)
	// With delivery.flux, the Secrets source-controller pulls with are part of each module's
	// revision too, as of a rollout's (fluxdelivery.Settings.RevisionSettings).
	flux, d := m.fluxSettings(ctx)
	diags.Append(d...)
	movedFrom, moving := m.movedFromSettings(settings)
	settings = append(settings, delivery.RevisionSettings(flux)...)
	return moduleRules{sensitive: sensitive, settings: settings, movedFrom: movedFrom, moving: moving}, diags, true
}

// specModules converts `modules` (mods) under rules, in the order given. A module that is
// invalid is reported and left out, so that every module's errors are reported at once; an
// invalid sensitive_paths is reported once, and ends the conversion.
func (m *Model) specModules(ctx context.Context, mods []ModuleModel, rules moduleRules) ([]assignment.Module, diag.Diagnostics) {
	var diags diag.Diagnostics
	var list []assignment.Module
	for i, mm := range mods {
		mod := assignment.Module{Name: mm.Name.ValueString(), Version: mm.Version.ValueString()}
		// The default namespace is set before the revision is taken: the objects carry it, so
		// rendered output with default_namespace names the revision of the same objects written
		// with their namespace.
		set, err := mm.bundle(m.sensitive[mod.Name])
		if err == nil {
			mod.Revision, err = set.RevisionWith(rules.settings)
		}
		if err == nil && rules.moving {
			mod.MovedFromRevision, err = set.RevisionWith(rules.movedFrom)
		}
		if err != nil {
			diags.AddAttributeError(pathModules.AtListIndex(i).AtName("manifests"), "Invalid Manifests", err.Error())
			continue
		}
		// Only manifests is checked (Terraform shows and stores it); values of the sensitive half
		// are redacted from errors. Rules match the objects as applied (default namespace set),
		// so a rule naming the namespace finds an object of rendered output that names none.
		public, hidden := set.Halves(mm.Manifests.ValueString())
		found, err := ignoreattr.Exposed(public, rules.sensitive)
		switch {
		case err != nil:
			diags.AddAttributeError(pathModules.ParentPath().AtName(ignoreattr.SensitiveName), "Invalid Field Path", err.Error())
			return list, diags
		case len(found) > 0:
			// Not an attribute error: the CLI would print the attribute's source under it, value and all.
			diags.AddError("Sensitive Fields In Manifests", "In `manifests` of module "+mod.Name+": "+
				ignoreattr.ExposedDetail(found, "modules[].sensitive_manifests"))
			continue
		}
		mod.Redact = ignoreattr.SensitiveValues(hidden, rules.sensitive)
		mod.Objects = set
		diags.Append(mm.DependsOn.ElementsAs(ctx, &mod.DependsOn, true)...)
		list = append(list, mod)
	}
	return list, diags
}

// specVerify sets the verify timeout and bake time, and what judges a cluster after a module's
// change, from `verify`: the cluster and node gates, the health checks and the check Job.
func (m *Model) specVerify(ctx context.Context, spec *assignment.Spec) diag.Diagnostics {
	var diags diag.Diagnostics
	verify := VerifyModel{Timeout: types.StringValue(fleetresource.DefaultVerifyTimeout), BakeTime: types.StringValue(fleetresource.DefaultBakeTime)}
	diags.Append(fleetresource.VerifyAs(ctx, m.Verify, &verify)...)
	spec.Policy.VerifyTimeout, spec.Policy.BakeTime = fleetresource.VerifyDurations(verify.Timeout, verify.BakeTime)
	spec.ClusterGates = verify.ClusterGates.IsNull() || verify.ClusterGates.IsUnknown() || verify.ClusterGates.ValueBool()
	nodeGate, d := fleetresource.StoreNodeGate(ctx, verify.NodeGate)
	diags.Append(d...)
	spec.GatePolicy = nodeGate.Policy()
	spec.Health, d = fleetresource.HealthChecker(ctx, verify.HealthChecks)
	diags.Append(d...)
	spec.CheckJob, d = fleetresource.CheckJobOf(ctx, verify.CheckJob, !m.Delivery.IsNull() && !m.Delivery.IsUnknown())
	diags.Append(d...)
	return diags
}

func (m *Model) setRevisions(spec assignment.Spec) {
	revs := map[string]attr.Value{}
	for _, mod := range spec.Modules {
		revs[mod.Name] = types.StringValue(mod.Revision)
	}
	m.Revisions = types.MapValueMust(types.StringType, revs)
}

// setObjects shows each module's `manifests` object by object (manifesttype.Objects); spec holds
// the whole bundles.
func (m *Model) setObjects(ctx context.Context, spec assignment.Spec) diag.Diagnostics {
	mods, diags := m.modules(ctx)
	public := map[string]string{}
	for _, mm := range mods {
		public[mm.Name.ValueString()] = mm.Manifests.ValueString()
	}
	out := map[string]attr.Value{}
	for _, mod := range spec.Modules {
		shown, _ := mod.Objects.Halves(public[mod.Name])
		v, d := manifesttype.Objects(ctx, pathModules, shown)
		diags.Append(d...)
		out[mod.Name] = v
	}
	var d diag.Diagnostics
	m.Objects, d = types.MapValue(objectsType, out)
	diags.Append(d...)
	return diags
}

func (m *Model) setSkipped(skipped map[string]string) {
	vals := map[string]attr.Value{}
	for k, v := range skipped {
		vals[k] = types.StringValue(v)
	}
	m.Skipped = types.MapValueMust(types.StringType, vals)
}

// markObservedUnknown leaves what the fleet decides to apply: the revisions, which follow from
// the configuration alone, stay as they are.
func (m *Model) markObservedUnknown() {
	m.markOutcomeUnknown()
	m.Waves = types.MapUnknown(wavesType)
	// Apply lets go of no cluster this plan could not list; the next plan lists them.
	m.setLeaving(nil)
}

// setLeaving shows the clusters apply lets go of (sorted; an empty list for none).
func (m *Model) setLeaving(names []string) { m.Leaving = fleetresource.SortedNames(names) }

// markOutcomeUnknown leaves the attributes that depend on apply's outcome to apply.
func (m *Model) markOutcomeUnknown() {
	m.Summary = types.MapUnknown(types.Int64Type)
	m.Attention = types.MapUnknown(types.StringType)
	m.Skipped = types.MapUnknown(types.StringType)
}

// defaultChangeAttributes sets the change attributes a state written before they existed lacks
// (null) to their defaults, so that upgrading the provider plans no change.
func (m *Model) defaultChangeAttributes() {
	if m.CanaryOptional.IsNull() {
		m.CanaryOptional = types.BoolValue(false)
	}
	if m.OnFailure.IsNull() {
		m.OnFailure = types.StringValue(string(defaultOnFailure))
	}
	if m.ForceConflicts.IsNull() {
		m.ForceConflicts = types.BoolValue(false)
	}
	if m.RetryInvalid.IsNull() {
		m.RetryInvalid = types.BoolValue(false)
	}
}

// copyComputed keeps prior's computed attributes, for a plan that changes nothing.
func (m *Model) copyComputed(prior *Model) {
	m.Summary, m.Attention, m.Skipped, m.Waves, m.Leaving = prior.Summary, prior.Attention, prior.Skipped, prior.Waves, prior.Leaving
}

// setObserved fills summary, attention and skipped from what the clusters and records say, and
// the per-cluster status the next plan works from.
func (m *Model) setObserved(ctx context.Context, obs *assignment.Observation, spec assignment.Spec) diag.Diagnostics {
	status := assignment.Status(obs, spec)
	m.private.Clusters = status
	summary, attention := assignment.Summarize(status)
	var diags, d diag.Diagnostics
	m.Summary, d = types.MapValueFrom(ctx, types.Int64Type, summary)
	diags.Append(d...)
	m.Attention, d = types.MapValueFrom(ctx, types.StringType, attention)
	diags.Append(d...)
	m.setSkipped(obs.Skipped)
	return diags
}

// setWaves shows each module's waves in one line of counts (fleetresource.WavesText), its canary
// waves first; the clusters go to private state.
func (m *Model) setWaves(waves map[string][][]string, canary []string) {
	vals := map[string]attr.Value{}
	for module, ws := range waves {
		vals[module] = types.StringValue(fleetresource.WavesText(fleetresource.WaveSizes(ws), assignment.CanaryWaves(ws, canary)))
	}
	m.Waves = types.MapValueMust(wavesType, vals)
}

// storedConfig is what the management cluster keeps of the configuration, so `terraform
// import` can restore it. Field names are part of the record format.
type storedConfig struct {
	// FollowJoins is follow_joins (nil when off), so that import restores it.
	FollowJoins *storedFollowJoins  `json:"followJoins,omitempty"`
	Selector    fleet.LabelSelector `json:"selector"`
	// Names (in StoredSettings) picks the clusters instead of Selector when set (omitted when
	// unset, so records from before it existed read as a selector).
	fleetresource.StoredSettings
	Modules []storedModule `json:"modules"`
	Mode    string         `json:"mode"`
	ignoreattr.Stored
	// OnFailure is omitted at its default (records written before it existed read as it).
	OnFailure    string `json:"onFailure,omitempty"`
	RetryInvalid bool   `json:"retryInvalid,omitempty"`
}

type storedModule struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	fleetresource.StoredManifests
	DependsOn []string `json:"dependsOn,omitempty"`
	// DefaultNamespace is omitted when unset, so records from before it existed read as unset.
	DefaultNamespace string `json:"defaultNamespace,omitempty"`
}

func (m *Model) configRecord(ctx context.Context) ([]byte, diag.Diagnostics) {
	c := storedConfig{Mode: m.Mode.ValueString(), StoredSettings: fleetresource.StoredSettings{
		UpdateLimit: m.UpdateLimit.ValueString(), MaxFailures: m.MaxFailures.ValueString(), MaxUnsettled: m.MaxUnsettled.ValueString(),
		DeletionPolicy: m.DeletionPolicy.ValueString(), NoAdopt: !m.Adopt.IsNull() && !m.Adopt.ValueBool()}}
	var diags diag.Diagnostics
	c.Selector, diags = fleetresource.ToLabelSelector(ctx, m.Selector)
	if !m.Names.IsNull() && !m.Names.IsUnknown() {
		diags.Append(m.Names.ElementsAs(ctx, &c.Names, false)...)
	}
	if !m.Canary.IsNull() && !m.Canary.IsUnknown() {
		diags.Append(m.Canary.ElementsAs(ctx, &c.Canary, false)...)
	}
	c.CanaryOptional, c.ForceConflicts, c.RetryInvalid = m.CanaryOptional.ValueBool(), m.ForceConflicts.ValueBool(), m.RetryInvalid.ValueBool()
	if v := m.OnFailure.ValueString(); v != string(defaultOnFailure) {
		c.OnFailure = v
	}
	mods, d := m.modules(ctx)
	diags.Append(d...)
	for _, mm := range mods {
		sm := storedModule{Name: mm.Name.ValueString(), Version: mm.Version.ValueString(),
			StoredManifests: fleetresource.StoredManifests{Manifests: mm.Manifests.ValueString()}, DefaultNamespace: mm.DefaultNamespace.ValueString()}
		if objs, ok := m.SensitiveObjects.Elements()[sm.Name]; ok {
			if list, ok := objs.(types.List); ok {
				diags.Append(list.ElementsAs(ctx, &sm.SensitiveObjects, false)...)
			}
			if rev, ok := m.Revisions.Elements()[sm.Name].(types.String); ok {
				sm.Revision = rev.ValueString()
			}
		}
		diags.Append(mm.DependsOn.ElementsAs(ctx, &sm.DependsOn, true)...)
		c.Modules = append(c.Modules, sm)
	}
	c.StoredVerify, d = fleetresource.StoreVerify(ctx, m.Verify)
	diags.Append(d...)
	c.Stored, d = ignoreattr.Store(ctx, m.IgnoreFields, m.SensitivePaths)
	diags.Append(d...)
	c.Values, d = fleetresource.Values(ctx, m.Values)
	diags.Append(d...)
	c.Flux, d = m.fluxSettings(ctx)
	diags.Append(d...)
	c.FollowJoins, d = m.storeFollowJoins(ctx)
	diags.Append(d...)
	return fleetresource.EncodeRecord(c, diags)
}

func (m *Model) fromConfigRecord(ctx context.Context, raw []byte) diag.Diagnostics {
	var c storedConfig
	diags := fleetresource.DecodeRecord(raw, &c, "assignment")
	if diags.HasError() {
		return diags
	}
	m.Selector, m.Names = fleetresource.FromLabelSelector(ctx, c.Selector), types.ListNull(types.StringType)
	if len(c.Names) > 0 {
		m.Selector = types.ObjectNull(fleetresource.SelectorAttrTypes)
		m.Names, _ = types.ListValueFrom(ctx, types.StringType, c.Names)
	}
	m.Canary = types.ListNull(types.StringType)
	if len(c.Canary) > 0 {
		m.Canary, _ = types.ListValueFrom(ctx, types.StringType, c.Canary)
	}
	m.OnFailure = types.StringValue(string(defaultOnFailure))
	if c.OnFailure != "" {
		m.OnFailure = types.StringValue(c.OnFailure)
	}
	m.CanaryOptional, m.ForceConflicts, m.RetryInvalid = types.BoolValue(c.CanaryOptional), types.BoolValue(c.ForceConflicts), types.BoolValue(c.RetryInvalid)
	var mods []attr.Value
	sensitive, revisions := map[string][]string{}, map[string]attr.Value{}
	for _, sm := range c.Modules {
		if len(sm.SensitiveObjects) > 0 {
			sensitive[sm.Name] = sm.SensitiveObjects
			revisions[sm.Name] = types.StringValue(sm.Revision)
		}
		deps := types.ListNull(types.StringType)
		if sm.DependsOn != nil {
			deps, _ = types.ListValueFrom(ctx, types.StringType, sm.DependsOn)
		}
		defaultNamespace := types.StringNull()
		if sm.DefaultNamespace != "" {
			defaultNamespace = types.StringValue(sm.DefaultNamespace)
		}
		mods = append(mods, types.ObjectValueMust(moduleAttrTypes, map[string]attr.Value{
			"name": types.StringValue(sm.Name), "version": types.StringValue(sm.Version), "manifests": manifesttype.NewValue(sm.Manifests),
			"sensitive_manifests": types.StringNull(), "depends_on": deps, "default_namespace": defaultNamespace,
		}))
	}
	m.SensitiveObjects, _ = types.MapValueFrom(ctx, sensitiveObjectsType, sensitive)
	// The revisions of modules with a sensitive half, which the public half alone cannot name.
	m.Revisions = types.MapValueMust(types.StringType, revisions)
	m.Modules = types.ListValueMust(types.ObjectType{AttrTypes: moduleAttrTypes}, mods)
	m.Mode, m.UpdateLimit, m.MaxFailures = types.StringValue(c.Mode), types.StringValue(c.UpdateLimit), types.StringValue(c.MaxFailures)
	if c.MaxUnsettled != "" {
		m.MaxUnsettled = types.StringValue(c.MaxUnsettled)
	}
	m.DeletionPolicy = types.StringValue(c.DeletionPolicy)
	m.Adopt = types.BoolValue(!c.NoAdopt)
	var d diag.Diagnostics
	m.IgnoreFields, m.SensitivePaths, d = c.RuleValues(ctx)
	diags.Append(d...)
	m.Values, d = fleetresource.ValuesValue(ctx, c.Values)
	diags.Append(d...)
	m.Delivery = fleetresource.DeliveryValue(c.Flux)
	m.FollowJoins = c.FollowJoins.Value()
	m.Verify = types.ObjectValueMust(verifyAttrTypes, c.VerifyAttributes(nil))
	return diags
}
