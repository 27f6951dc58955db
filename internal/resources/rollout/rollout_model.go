package rollout

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
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
	ID                types.String       `tfsdk:"id"`
	Name              types.String       `tfsdk:"name"`
	Namespace         types.String       `tfsdk:"namespace"`
	Selector          types.Object       `tfsdk:"selector"`
	Names             types.List         `tfsdk:"names"`
	Clusters          types.List         `tfsdk:"clusters"` // deprecated alias of Names
	Manifests         manifesttype.Value `tfsdk:"manifests"`
	Sensitive         types.String       `tfsdk:"sensitive_manifests"` // write-only: only from the configuration
	Objects           types.Map          `tfsdk:"objects"`
	SensitiveObjects  types.List         `tfsdk:"sensitive_objects"`
	Canary            types.List         `tfsdk:"canary"`
	CanaryOptional    types.Bool         `tfsdk:"canary_optional"`
	UpdateLimit       types.String       `tfsdk:"update_limit"`
	MaxFailures       types.String       `tfsdk:"max_failures"`
	MaxUnsettled      types.String       `tfsdk:"max_unsettled"`
	OnFailure         types.String       `tfsdk:"on_failure"`
	Stages            types.List         `tfsdk:"stages"`
	PromoteUntil      types.String       `tfsdk:"promote_until"`
	Verify            types.Object       `tfsdk:"verify"`
	RecordNamespace   types.String       `tfsdk:"record_namespace"`
	DeletionPolicy    types.String       `tfsdk:"deletion_policy"`
	ForceConflicts    types.Bool         `tfsdk:"force_conflicts"`
	Preview           types.String       `tfsdk:"preview"`
	IgnoreFields      types.List         `tfsdk:"ignore_fields"`
	SensitivePaths    types.List         `tfsdk:"sensitive_paths"`
	DefaultNamespace  types.String       `tfsdk:"default_namespace"`
	Values            types.Object       `tfsdk:"values"`
	Adopt             types.Bool         `tfsdk:"adopt"`
	RetryInvalid      types.Bool         `tfsdk:"retry_invalid"`
	Paused            types.Bool         `tfsdk:"paused"`
	MaintenanceWindow types.Object       `tfsdk:"maintenance_window"`
	Timeouts          timeouts.Value     `tfsdk:"timeouts"`
	Revision          types.String       `tfsdk:"revision"`
	BackupRevision    types.String       `tfsdk:"backup_revision"`
	InvalidRevisions  types.List         `tfsdk:"invalid_revisions"`
	Summary           types.Map          `tfsdk:"summary"`
	Attention         types.Map          `tfsdk:"attention"`
	Waves             types.String       `tfsdk:"waves"`
	Leaving           types.List         `tfsdk:"leaving"`
	Skipped           types.Map          `tfsdk:"skipped"`
	Delivery          types.Object       `tfsdk:"delivery"`
	// FollowJoins and Bridge are the bridge for joiners (rollout_bridge.go).
	FollowJoins types.Object `tfsdk:"follow_joins"`
	Bridge      types.Map    `tfsdk:"bridge"`
	// registry is the write-only `delivery.flux.password`, `token` and `client_key`, read from
	// the configuration (ReadWriteOnly); the framework skips unexported fields.
	registry fleetresource.FluxWriteOnly
	// adoptWritten says the configuration writes `adopt = true` (not adopt's default): the
	// opt-in that takes over a records-missing cluster's objects (delivery.Spec.AdoptUnrecorded).
	adoptWritten bool

	// private is kept in the resource's private state (see rollout_private.go), out of plans.
	private privateState
}

// VerifyModel is the `verify` attribute.
type VerifyModel struct {
	Timeout      types.String `tfsdk:"timeout"`
	BakeTime     types.String `tfsdk:"bake_time"`
	HTTPChecks   types.List   `tfsdk:"http_checks"`
	HealthChecks types.List   `tfsdk:"health_checks"`
	ClusterGates types.Bool   `tfsdk:"cluster_gates"`
	NodeGate     types.Object `tfsdk:"node_gate"`
	CheckJob     types.Object `tfsdk:"check_job"`
}

// HTTPCheckModel is one `verify.http_checks` entry.
type HTTPCheckModel struct {
	URL            types.String `tfsdk:"url"`
	ExpectedStatus types.Int64  `tfsdk:"expected_status"`
	Timeout        types.String `tfsdk:"timeout"`
}

// ReadWriteOnly takes `sensitive_manifests` and the registry's `delivery.flux.password`,
// `token` and `client_key` from the configuration: Terraform keeps write-only values out of the plan, so Create
// and Update find them only there (fleetresource.WriteOnly).
func (m *Model) ReadWriteOnly(ctx context.Context, config tfsdk.Config) diag.Diagnostics {
	diags := config.GetAttribute(ctx, pathSensitive, &m.Sensitive)
	// Not write-only, but only the configuration tells `adopt = true` written from adopt's
	// default, and the written one is the opt-in for records-missing clusters.
	m.adoptWritten = fleetresource.WritesTrue(ctx, config, path.Root("adopt"))
	var d diag.Diagnostics
	m.registry, d = fleetresource.FluxCredentials(ctx, config)
	return append(diags, d...)
}

// ClearWriteOnly drops the write-only values before the state is saved (fleetresource.WriteOnly).
func (m *Model) ClearWriteOnly() {
	m.Sensitive = types.StringNull()
	m.registry = fleetresource.NoFluxWriteOnly()
}

// setSensitiveObjects names the objects of `sensitive_manifests` (identities, never content).
func (m *Model) setSensitiveObjects(ctx context.Context) diag.Diagnostics {
	if m.Sensitive.IsUnknown() || m.DefaultNamespace.IsUnknown() {
		m.SensitiveObjects = types.ListUnknown(types.StringType)
		return nil
	}
	keys := []string{}
	if !m.Sensitive.IsNull() {
		// The sensitive half alone first, so that its own errors are reported as its own.
		set, err := manifest.Bundle("", m.Sensitive.ValueString())
		if err == nil {
			err = set.DefaultNamespace(m.DefaultNamespace.ValueString())
		}
		if err != nil {
			var diags diag.Diagnostics
			diags.AddAttributeError(pathSensitive, "Invalid Sensitive Manifests", err.Error())
			return diags
		}
		keys = set.Keys()
		// Then whole, as it is applied: a CRD of `manifests` can make a kind of the sensitive half
		// cluster-scoped, so that the default namespace does not apply to it. Errors of the whole
		// (the public half, a clash) are spec's to report, against manifests.
		if whole, err := m.bundle(); err == nil {
			_, hidden := whole.Halves(m.Manifests.ValueString())
			keys = make([]string, len(hidden))
			for i, obj := range hidden {
				keys[i] = manifest.Key(obj)
			}
		}
	}
	var diags diag.Diagnostics
	m.SensitiveObjects, diags = types.ListValueFrom(ctx, types.StringType, keys)
	return diags
}

// setObjects shows the objects of `manifests` one by one; set is the whole bundle (spec.Objects).
func (m *Model) setObjects(ctx context.Context, set *manifest.Set) diag.Diagnostics {
	shown, _ := set.Halves(m.Manifests.ValueString())
	var diags diag.Diagnostics
	m.Objects, diags = manifesttype.Objects(ctx, pathManifests, shown)
	return diags
}

// bundle is both halves as one set, the default namespace applied: what is applied.
func (m *Model) bundle() (*manifest.Set, error) {
	set, err := manifest.Bundle(m.Manifests.ValueString(), m.Sensitive.ValueString())
	if err == nil {
		err = set.DefaultNamespace(m.DefaultNamespace.ValueString())
	}
	return set, err
}

// TimeoutsValue is the `timeouts` attribute, for fleetresource.Create and fleetresource.Update.
func (m *Model) TimeoutsValue() timeouts.Value { return m.Timeouts }

// Identity is what names the rollout's records (fleetresource.EngineModel).
func (m *Model) Identity() fleetresource.Identity {
	return fleetresource.Identity{Name: m.Name, Namespace: m.Namespace, RecordNamespace: m.RecordNamespace}
}

// SetID sets `id` (fleetresource.EngineModel).
func (m *Model) SetID(id types.String) { m.ID = id }

// ignore converts `ignore_fields` for drift checks outside plan and apply (Read, the status
// data source); the paths were validated when they were planned, and one that no longer parses
// is left out rather than failing a refresh.
func (m *Model) ignore(ctx context.Context) apply.Ignore {
	rules, _ := ignoreattr.Rules(ctx, m.IgnoreFields)
	var out apply.Ignore
	for _, r := range rules {
		if ig, err := ignoreattr.Ignore([]ignoreattr.Rule{r}); err == nil {
			out = append(out, ig...)
		}
	}
	return out
}

// query converts the cluster-picking attributes.
func (m *Model) query(ctx context.Context, fallback *window.Window) (fleet.Query, diag.Diagnostics) {
	names := m.Names
	if names.IsNull() {
		names = m.Clusters
	}
	q, diags := fleetresource.Query(ctx, m.Namespace, m.Selector, names)
	verify := VerifyModel{Timeout: types.StringValue(fleetresource.DefaultVerifyTimeout), BakeTime: types.StringValue(fleetresource.DefaultBakeTime)}
	diags.Append(fleetresource.VerifyAs(ctx, m.Verify, &verify)...)
	verifyTimeout, bake := fleetresource.VerifyDurations(verify.Timeout, verify.BakeTime)
	var d diag.Diagnostics
	q.Hold, d = fleetresource.HoldFrom(ctx, m.MaintenanceWindow, verifyTimeout, bake, fallback)
	diags.Append(d...)
	return q, diags
}

// spec converts the configuration into what delivery needs. The manifests and limits have been
// validated already; errors here are reported against their attributes anyway.
func (m *Model) spec(ctx context.Context) (delivery.Spec, diag.Diagnostics) {
	spec := delivery.Spec{
		AdoptUnrecorded:  m.adoptWritten,
		Key:              records.Key{Kind: "rollout", Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()},
		RecordNamespace:  m.RecordNamespace.ValueString(),
		ForceConflicts:   m.ForceConflicts.ValueBool(),
		ClusterNamespace: m.Namespace.ValueString(),
		Retry:            m.RetryInvalid.ValueBool(),
		Preview:          delivery.PreviewSpec{Mode: m.Preview.ValueString()},
	}
	diags, ok := m.specContent(ctx, &spec)
	if !ok {
		return spec, diags
	}
	diags.Append(fleetresource.SetLimits(m.UpdateLimit, m.MaxFailures, m.MaxUnsettled, &spec.Policy)...)
	diags.Append(fleetresource.SetOnFailure(m.OnFailure, engine.Rollback, &spec.Policy)...)
	diags.Append(fleetresource.SetCanary(ctx, m.Canary, m.CanaryOptional, &spec.Policy)...)
	verify := VerifyModel{Timeout: types.StringValue(fleetresource.DefaultVerifyTimeout), BakeTime: types.StringValue(fleetresource.DefaultBakeTime)}
	diags.Append(fleetresource.VerifyAs(ctx, m.Verify, &verify)...)
	spec.Policy.VerifyTimeout, spec.Policy.BakeTime = fleetresource.VerifyDurations(verify.Timeout, verify.BakeTime)
	// After the limits and the bake time: a stage that sets none of its own takes the rollout's.
	diags.Append(m.stages(ctx, &spec)...)
	diags.Append(m.specVerify(ctx, verify, &spec)...)
	if m.throughFlux() {
		// Through Flux the check Job is part of the artifact, so of the revision.
		var err error
		if spec.Revision, err = spec.CheckJob.FluxRevision(spec.Revision); err != nil {
			diags.AddAttributeError(fleetresource.PathCheckJob, "Invalid Check Job", err.Error())
		}
	}
	return spec, diags
}

// throughFlux reports whether the rollout delivers through Flux (`delivery` set).
func (m *Model) throughFlux() bool { return !m.Delivery.IsNull() && !m.Delivery.IsUnknown() }

// specContent sets what is applied and what names it: the objects, the fields left alone
// (ignore_fields), the values redacted (sensitive_paths), the values and the revision. ok is
// false when the content is invalid, which ends the conversion (the rest would be checked
// against content that is not there).
func (m *Model) specContent(ctx context.Context, spec *delivery.Spec) (diags diag.Diagnostics, ok bool) {
	// Sensitive is null outside plan and apply (Read, Delete): the records keep what the clusters
	// need, and nothing here needs its content then.
	set, err := m.bundle()
	if err != nil {
		diags.AddAttributeError(pathManifests, "Invalid Manifests", err.Error())
		return diags, false
	}
	spec.Objects = set
	rules, d := ignoreattr.Rules(ctx, m.IgnoreFields)
	diags.Append(d...)
	if spec.Ignore, err = ignoreattr.Ignore(rules); err != nil {
		diags.AddAttributeError(pathIgnoreFields, "Invalid Field Path", err.Error())
		return diags, false
	}
	sensitive, d := ignoreattr.Rules(ctx, m.SensitivePaths)
	diags.Append(d...)
	// Only manifests is checked: it is what Terraform shows and stores. The sensitive half is
	// where such fields belong; errors that could echo its values there are redacted. The set
	// (default namespace applied) is what rules match against.
	public, hidden := set.Halves(m.Manifests.ValueString())
	found, err := ignoreattr.Exposed(public, sensitive)
	switch {
	case err != nil:
		diags.AddAttributeError(pathSensPaths, "Invalid Field Path", err.Error())
		return diags, false
	case len(found) > 0:
		// Not an attribute error: the CLI would print the attribute's source under it, value and all.
		diags.AddError("Sensitive Fields In Manifests", "In `manifests` of "+spec.Key.Describe()+": "+
			ignoreattr.ExposedDetail(found, "sensitive_manifests"))
		return diags, false
	}
	spec.Redact = ignoreattr.SensitiveValues(hidden, sensitive)
	for _, obj := range hidden {
		spec.Sensitive = append(spec.Sensitive, manifest.Key(obj))
	}
	spec.Values, d = m.values(ctx)
	diags.Append(d...)
	if d.HasError() {
		return diags, false
	}
	flux, d := m.fluxSettings(ctx)
	diags.Append(d...)
	pull := delivery.RevisionSettings(flux)
	// The same objects under other rules, values or pull settings are another revision.
	if spec.Revision, err = set.RevisionWith(slices.Concat(ignoreattr.Settings(rules, sensitive), spec.Values.Settings(), pull)); err != nil {
		diags.AddAttributeError(pathManifests, "Invalid Manifests", err.Error())
		return diags, false
	}
	return diags, true
}

// specVerify sets what judges a cluster after its change, from `verify`: the cluster and node
// gates, the health checks, the check Job and the HTTP checks.
func (m *Model) specVerify(ctx context.Context, verify VerifyModel, spec *delivery.Spec) diag.Diagnostics {
	var diags diag.Diagnostics
	spec.ClusterGates = verify.ClusterGates.IsNull() || verify.ClusterGates.IsUnknown() || verify.ClusterGates.ValueBool()
	nodeGate, d := fleetresource.StoreNodeGate(ctx, verify.NodeGate)
	diags.Append(d...)
	spec.GatePolicy = nodeGate.Policy()
	spec.Health, d = fleetresource.HealthChecker(ctx, verify.HealthChecks)
	diags.Append(d...) // through Flux, the Kustomizations' healthCheckExprs (internal/delivery/flux.go)
	// Through Flux too: the Job goes into the artifact (delivery.CheckJob.ForFlux).
	spec.CheckJob, d = fleetresource.CheckJobOf(ctx, verify.CheckJob, false)
	diags.Append(d...)
	if !verify.HTTPChecks.IsNull() && !verify.HTTPChecks.IsUnknown() {
		var checks []HTTPCheckModel
		diags.Append(verify.HTTPChecks.ElementsAs(ctx, &checks, false)...)
		for _, c := range checks {
			spec.HTTPChecks = append(spec.HTTPChecks, delivery.HTTPCheck{
				URL: c.URL.ValueString(), ExpectedStatus: int(c.ExpectedStatus.ValueInt64()),
				Timeout: fleetresource.ParseDuration(c.Timeout, defaultHTTPCheckTimeout),
			})
		}
		if len(checks) > 0 && !m.Delivery.IsNull() && !m.Delivery.IsUnknown() {
			fleetresource.NotThroughFlux(&diags, path.Root("verify").AtName("http_checks"), fleetresource.FluxGapHTTPChecks, "`verify.http_checks`", "the rollout")
		}
	}
	return diags
}

// setObserved fills the computed attributes from what the clusters and records say, and the
// per-cluster records the next plan works from.
func (m *Model) setObserved(ctx context.Context, obs *delivery.Observation) diag.Diagnostics {
	var diags diag.Diagnostics
	m.private.Clusters = map[string]clusterRecord{}
	for name, st := range obs.Clusters {
		rec := clusterRecord{Revision: st.Revision, State: st.State, Backup: st.Backup}
		if st.State == delivery.StateRecordsMissing {
			rec.Found = st.Drift
		}
		m.private.Clusters[name] = rec
	}
	summary, attention := summarize(m.Revision.ValueString(), obs, m.waiting(ctx, obs))
	var d diag.Diagnostics
	m.Summary, d = types.MapValueFrom(ctx, types.Int64Type, summary)
	diags.Append(d...)
	m.Attention, d = types.MapValueFrom(ctx, types.StringType, attention)
	diags.Append(d...)
	m.BackupRevision = types.StringValue(obs.Backup)
	diags.Append(m.setLedger(ctx, obs.Ledger)...)
	m.Skipped, d = types.MapValueFrom(ctx, types.StringType, nonNilMap(obs.Skipped))
	diags.Append(d...)
	m.private.Leaving = obs.Leaving
	return diags
}

// setLeaving shows the clusters apply lets go of (sorted; an empty list for none).
func (m *Model) setLeaving(names []string) { m.Leaving = fleetresource.SortedNames(names) }

func (m *Model) setLedger(ctx context.Context, ledger []delivery.InvalidRevision) diag.Diagnostics {
	type entry struct {
		Revision   types.String `tfsdk:"revision"`
		Reason     types.String `tfsdk:"reason"`
		Clusters   []string     `tfsdk:"clusters"`
		RecordedAt types.String `tfsdk:"recorded_at"`
	}
	entries := make([]entry, 0, len(ledger))
	for _, l := range ledger {
		clusters := append([]string{}, l.Clusters...)
		sort.Strings(clusters)
		entries = append(entries, entry{
			Revision: types.StringValue(l.Revision), Reason: types.StringValue(l.Reason),
			Clusters: clusters, RecordedAt: types.StringValue(l.RecordedAt.UTC().Format(time.RFC3339)),
		})
	}
	var diags diag.Diagnostics
	m.InvalidRevisions, diags = types.ListValueFrom(ctx, types.ObjectType{AttrTypes: invalidRevisionAttrTypes}, entries)
	return diags
}

// setWaves shows waves as one line of counts (fleetresource.WavesText); the clusters of each are
// kept in private state.
func (m *Model) setWaves(p engine.Plan) {
	text := fleetresource.WavesText(fleetresource.WaveSizes(p.Waves), p.CanaryWaves)
	if stages := p.StagesText(); stages != "" {
		// Who waits for a later promotion, or is in no stage: one line whatever the fleet's size.
		text += "; " + stages
	}
	m.Waves = types.StringValue(text)
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
