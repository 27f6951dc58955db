package fleetresource

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
)

// PathDelivery is `delivery`.
var PathDelivery = path.Root("delivery")

var pathFlux = PathDelivery.AtName("flux")

var (
	decryptionAttrTypes = map[string]attr.Type{"age_recipient": types.StringType, "secret_name": types.StringType}
	fluxAttrTypes       = map[string]attr.Type{
		"repository": types.StringType, "insecure": types.BoolType, "ca_bundle": types.StringType,
		"secret_ref": types.StringType, "cert_secret_ref": types.StringType,
		"username": types.StringType, "password": types.StringType, "token": types.StringType,
		"client_certificate": types.StringType, "client_key": types.StringType,
		"decryption": types.ObjectType{AttrTypes: decryptionAttrTypes},
	}
	deliveryAttrTypes = map[string]attr.Type{"flux": types.ObjectType{AttrTypes: fluxAttrTypes}}
)

// stringOrNull is s, or null when empty (an optional attribute left out).
func stringOrNull(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

// DeliveryValue is `delivery` for settings (null for direct delivery), as the records keep it.
func DeliveryValue(settings *delivery.FluxSettings) types.Object {
	if settings == nil {
		return types.ObjectNull(deliveryAttrTypes)
	}
	insecure := types.BoolNull()
	if settings.Insecure {
		insecure = types.BoolValue(true)
	}
	// The write-only password, token and client key are never kept: null, as Terraform keeps them.
	flux := types.ObjectValueMust(fluxAttrTypes, map[string]attr.Value{
		"repository": types.StringValue(settings.Repository), "insecure": insecure,
		"ca_bundle": stringOrNull(settings.CABundle), "secret_ref": stringOrNull(settings.SecretRef),
		"cert_secret_ref": stringOrNull(settings.CertSecretRef), "username": stringOrNull(settings.Credentials.Username),
		"password": types.StringNull(), "token": types.StringNull(),
		"client_certificate": stringOrNull(settings.ClientCertificate), "client_key": types.StringNull(),
		"decryption": decryptionValue(settings.Decryption),
	})
	return types.ObjectValueMust(deliveryAttrTypes, map[string]attr.Value{"flux": flux})
}

// decryptionValue is `delivery.flux.decryption` for d (null when not set).
func decryptionValue(d *delivery.FluxDecryption) types.Object {
	if d == nil {
		return types.ObjectNull(decryptionAttrTypes)
	}
	return types.ObjectValueMust(decryptionAttrTypes, map[string]attr.Value{
		"age_recipient": types.StringValue(d.AgeRecipient), "secret_name": types.StringValue(d.SecretName)})
}

// DeliveryAttribute is `delivery`: which engine carries revisions to the clusters, shared by the
// rollout and the module assignment so that both take the same settings. Both move between the
// engines in place (delivery.Service.MovingFrom, move.go): no change of `delivery` replaces them.
func DeliveryAttribute() schema.SingleNestedAttribute {
	engine := "Moving between the engines (leaving `delivery` out, or adding it back) is an update carried out in waves, never a " +
		"replacement: on each cluster the new engine delivers the same content and verifies it, and only once it verified " +
		"there, at the end of the apply, does the old engine let go of the cluster without pruning or deleting any object " +
		"(direct delivery drops its records and field manager's marks; Flux stops pruning, then its Kustomization goes, and " +
		"the OCIRepository once no Kustomization names it, and the direct engine takes over the fields kustomize-controller " +
		"applied). A cluster that does " +
		"not verify on the new engine stays on the old one, is counted against `max_failures`, and is not recorded as a " +
		"failure of the revision; the next apply moves it again."
	return schema.SingleNestedAttribute{
		Optional: true,
		MarkdownDescription: "Which engine carries each revision to the clusters. Left out, the provider applies it itself " +
			"(server-side apply from where Terraform runs, with each cluster's kubeconfig Secret). With `flux`, the waves, canary, " +
			"failure budget, bake, invalid ledger and Lease stay in the provider, and Flux delivers: each revision is published " +
			"as an OCI artifact (tag = revision), and in the Clusters' namespace of the management cluster an `OCIRepository` " +
			"per revision, pinned by digest and shared by the clusters there that run it, and a `Kustomization` per cluster " +
			"(through the Cluster's `<name>-kubeconfig` Secret, `prune` and `wait` on, `timeout` = `verify.timeout`) apply it; " +
			"an `OCIRepository` no Kustomization names any more is deleted. With `values` the artifact is the template, and each " +
			"cluster's Kustomization substitutes that cluster's variables (`postBuild.substitute`). The provider then reads and writes only the management cluster " +
			"and the registry, and reads no Secret in the Clusters' namespace (a Cluster's eligibility comes from its status); " +
			"the per-cluster records live in the management cluster. Flux never prunes a Namespace, a CustomResourceDefinition or an object " +
			"marked `gradual.dev/prune: disabled` (each carries Flux's own `kustomize.toolkit.fluxcd.io/prune: disabled` in the artifact). " +
			"`repository`, `insecure`, `secret_ref` and `cert_secret_ref` are part of the revision: a change of any of them is rolled out " +
			"in waves like any other, each cluster re-pinned to the same content at its new source, and nothing is pruned on the way; " +
			"the credentials and CA this provider pushes with change nothing in the clusters. " + engine,
		Attributes: map[string]schema.Attribute{
			"flux": schema.SingleNestedAttribute{
				Required:            true,
				MarkdownDescription: "Deliver through Flux's source-controller and kustomize-controller running in the management cluster (their CRDs must be installed there: the plan checks).",
				Attributes: map[string]schema.Attribute{
					"repository": schema.StringAttribute{
						Required: true,
						MarkdownDescription: "OCI repository the revisions are published to, `oci://host[:port]/path`, without a tag: " +
							"each revision is a tag of it, and Flux pulls it by digest.",
						Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^oci://[^/]+/.+`), "must be oci://host/path")},
					},
					"insecure": schema.BoolAttribute{
						Optional:            true,
						MarkdownDescription: "Reach the registry over plain HTTP (this provider and source-controller). Default false.",
					},
					"ca_bundle": schema.StringAttribute{
						Optional: true,
						MarkdownDescription: "PEM certificates of the authorities this provider trusts for the registry, beside the system's " +
							"(a registry with a private CA). source-controller needs the same CA through `cert_secret_ref`.",
						Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
					},
					"cert_secret_ref": schema.StringAttribute{
						Optional: true,
						MarkdownDescription: "Name of a Secret in each Cluster's namespace holding the registry's CA as `ca.crt` and, for a " +
							"registry that requires client certificates, source-controller's certificate and key as `tls.crt` and `tls.key` " +
							"(the OCIRepository's `spec.certSecretRef`). The provider never reads it.",
						Validators: []validator.String{secretName},
					},
					"client_certificate": schema.StringAttribute{
						Optional: true,
						MarkdownDescription: "PEM client certificate this provider presents to a registry that requires client certificates " +
							"(mutual TLS), with `client_key`. A certificate is public: it is kept in the state. source-controller presents " +
							"its own through `cert_secret_ref`. Checked at plan: PEM, not expired, and `client_key` its key.",
						Validators: []validator.String{stringvalidator.LengthAtLeast(1),
							stringvalidator.AlsoRequires(path.MatchRelative().AtParent().AtName("client_key"))},
					},
					"client_key": schema.StringAttribute{
						Optional: true, Sensitive: true, WriteOnly: true,
						MarkdownDescription: "PEM private key of `client_certificate`. Write-only, like `password`: kept out of the plan, the " +
							"state, the records and the logs, given again on every run (Terraform 1.11, OpenTofu 1.11 or later).",
						Validators: []validator.String{stringvalidator.AlsoRequires(path.MatchRelative().AtParent().AtName("client_certificate"))},
					},
					"secret_ref": schema.StringAttribute{
						Optional: true,
						MarkdownDescription: "Name of a `kubernetes.io/dockerconfigjson` Secret in each Cluster's namespace that " +
							"source-controller pulls with (the OCIRepository's `spec.secretRef`). The provider never reads or writes it: " +
							"the runner needs no rights on Secrets there.",
						Validators: []validator.String{secretName},
					},
					"username": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "Username this provider pushes with, with `password`. Without `username` or `token`, Docker's configuration is used (`DOCKER_CONFIG` or `~/.docker/config.json`, credential helpers included), as `flux push artifact` does.",
						Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
					},
					"password": schema.StringAttribute{
						Optional: true, Sensitive: true, WriteOnly: true,
						MarkdownDescription: "Password (or access token used as one) for `username`. Write-only: kept out of the plan and the state, " +
							"given again on every run (Terraform 1.11, OpenTofu 1.11 or later).",
						Validators: []validator.String{stringvalidator.AlsoRequires(path.MatchRelative().AtParent().AtName("username"))},
					},
					"decryption": decryptionAttribute(),
					"token": schema.StringAttribute{
						Optional: true, Sensitive: true, WriteOnly: true,
						MarkdownDescription: "Registry token this provider pushes with, sent as a bearer token (the Docker configuration's `registrytoken`). " +
							"Write-only, like `password`; not with `username`.",
						Validators: []validator.String{stringvalidator.ConflictsWith(
							path.MatchRelative().AtParent().AtName("username"), path.MatchRelative().AtParent().AtName("password"))},
					},
				},
			},
		},
	}
}

// decryptionAttribute is `delivery.flux.decryption`: how the objects of `sensitive_manifests`
// reach the clusters through Flux (encrypted, decrypted by kustomize-controller).
func decryptionAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true,
		MarkdownDescription: "Publish the objects of `sensitive_manifests` encrypted, the way Flux decrypts: SOPS with an age recipient. " +
			"Their `data`, `stringData` and `binaryData` are encrypted to `age_recipient` (only v1 Secrets and ConfigMaps may be " +
			"delivered so), their identity stays readable, and each Kustomization decrypts them (`spec.decryption`, provider `sops`) " +
			"with the age private key in the Secret `secret_name`, which you keep in each Cluster's namespace of the management " +
			"cluster (a key ending in `.agekey`). The plaintext never reaches the registry, the plan, the state, the logs or the " +
			"records. Both settings are part of the revision: changing them re-pins every cluster in waves.",
		Attributes: map[string]schema.Attribute{
			"age_recipient": schema.StringAttribute{
				Required:            true,
				MarkdownDescription: "age X25519 recipient (`age1…`, the public key of the identity in `secret_name`) the objects are encrypted to.",
				Validators:          []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^age1[02-9ac-hj-np-z]+$`), "must be an age X25519 recipient (age1…)")},
			},
			"secret_name": schema.StringAttribute{
				Required: true,
				MarkdownDescription: "Name of the Secret in each Cluster's namespace that holds the age private key (`AGE-SECRET-KEY-1…`) " +
					"under a key ending in `.agekey` (the Kustomization's `spec.decryption.secretRef`). The provider never reads or writes it.",
				Validators: []validator.String{secretName},
			},
		},
	}
}

// FluxDecrypts reports whether `delivery` (value) sets `flux.decryption` (or may: unknown), so
// that sensitive objects can be published encrypted.
func FluxDecrypts(value types.Object) bool {
	if value.IsNull() || value.IsUnknown() {
		return false
	}
	flux, ok := value.Attributes()["flux"].(types.Object)
	if !ok || flux.IsNull() {
		return false
	}
	if flux.IsUnknown() {
		return true
	}
	dec, ok := flux.Attributes()["decryption"].(types.Object)
	return ok && !dec.IsNull()
}

// EngineOf names the engine `delivery` (v) chooses: "direct" (null) or "flux".
func EngineOf(ctx context.Context, v types.Object) (string, diag.Diagnostics) {
	if v.IsNull() {
		return "direct", nil
	}
	var dm struct {
		Flux types.Object `tfsdk:"flux"`
	}
	diags := v.As(ctx, &dm, basetypes.ObjectAsOptions{UnhandledUnknownAsEmpty: true})
	if diags.HasError() || dm.Flux.IsNull() {
		return "direct", diags
	}
	return "flux", diags
}

// secretName is what a Secret's name must be (a DNS subdomain).
var secretName = stringvalidator.RegexMatches(regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`), "must be a Secret name")

// FluxWriteOnly is what of `delivery.flux` is write-only: the password, the token and the
// client key, read from the configuration (FluxCredentials) and never kept.
type FluxWriteOnly struct {
	Password, Token, ClientKey types.String
}

// NoFluxWriteOnly is FluxWriteOnly with nothing given, as the state holds it.
func NoFluxWriteOnly() FluxWriteOnly {
	return FluxWriteOnly{Password: types.StringNull(), Token: types.StringNull(), ClientKey: types.StringNull()}
}

func (w FluxWriteOnly) unknown() bool {
	return w.Password.IsUnknown() || w.Token.IsUnknown() || w.ClientKey.IsUnknown()
}

// FluxCredentials reads the write-only `delivery.flux.password`, `token` and `client_key` from
// the configuration: Terraform keeps them out of the plan and the state, so they are only there.
func FluxCredentials(ctx context.Context, config tfsdk.Config) (w FluxWriteOnly, diags diag.Diagnostics) {
	diags.Append(config.GetAttribute(ctx, pathFlux.AtName("password"), &w.Password)...)
	diags.Append(config.GetAttribute(ctx, pathFlux.AtName("token"), &w.Token)...)
	diags.Append(config.GetAttribute(ctx, pathFlux.AtName("client_key"), &w.ClientKey)...)
	return w, diags
}

// decryptionSettings is `delivery.flux.decryption` (value), nil when not set; known is false
// while any of it is unknown.
func decryptionSettings(ctx context.Context, value types.Object, diags diag.Diagnostics) (_ *delivery.FluxDecryption, known bool, _ diag.Diagnostics) {
	if value.IsNull() {
		return nil, true, diags
	}
	if value.IsUnknown() {
		return nil, false, diags
	}
	var dm struct {
		AgeRecipient types.String `tfsdk:"age_recipient"`
		SecretName   types.String `tfsdk:"secret_name"`
	}
	diags.Append(value.As(ctx, &dm, basetypes.ObjectAsOptions{})...)
	if diags.HasError() || dm.AgeRecipient.IsUnknown() || dm.SecretName.IsUnknown() {
		return nil, false, diags
	}
	return &delivery.FluxDecryption{AgeRecipient: dm.AgeRecipient.ValueString(), SecretName: dm.SecretName.ValueString()}, true, diags
}

// FluxSettings is `delivery.flux` (value) as the Flux engine takes it, with the write-only
// password, token and client key from the configuration (FluxCredentials); nil for direct
// delivery (or while unknown).
func FluxSettings(ctx context.Context, value types.Object, w FluxWriteOnly) (*delivery.FluxSettings, diag.Diagnostics) {
	if value.IsNull() || value.IsUnknown() {
		return nil, nil
	}
	var dm struct {
		Flux types.Object `tfsdk:"flux"`
	}
	diags := value.As(ctx, &dm, basetypes.ObjectAsOptions{})
	if diags.HasError() || dm.Flux.IsNull() || dm.Flux.IsUnknown() {
		return nil, diags
	}
	var fm struct {
		Repository        types.String `tfsdk:"repository"`
		Insecure          types.Bool   `tfsdk:"insecure"`
		CABundle          types.String `tfsdk:"ca_bundle"`
		SecretRef         types.String `tfsdk:"secret_ref"`
		CertSecretRef     types.String `tfsdk:"cert_secret_ref"`
		Username          types.String `tfsdk:"username"`
		Password          types.String `tfsdk:"password"`
		Token             types.String `tfsdk:"token"`
		ClientCertificate types.String `tfsdk:"client_certificate"`
		ClientKey         types.String `tfsdk:"client_key"`
		Decryption        types.Object `tfsdk:"decryption"`
	}
	diags.Append(dm.Flux.As(ctx, &fm, basetypes.ObjectAsOptions{})...)
	if diags.HasError() || fm.Repository.IsUnknown() || fm.CABundle.IsUnknown() || fm.Username.IsUnknown() ||
		fm.ClientCertificate.IsUnknown() || w.unknown() {
		return nil, diags
	}
	s := &delivery.FluxSettings{
		Repository: fm.Repository.ValueString(), Insecure: fm.Insecure.ValueBool(), CABundle: fm.CABundle.ValueString(),
		SecretRef: fm.SecretRef.ValueString(), CertSecretRef: fm.CertSecretRef.ValueString(),
		ClientCertificate: fm.ClientCertificate.ValueString(),
		Credentials: delivery.FluxCredentials{Username: fm.Username.ValueString(), Password: w.Password.ValueString(),
			Token: w.Token.ValueString(), ClientKey: w.ClientKey.ValueString()},
	}
	var known bool
	if s.Decryption, known, diags = decryptionSettings(ctx, fm.Decryption, diags); !known || diags.HasError() {
		return nil, diags
	}
	// The key comes from the configuration at plan and apply only: refresh, import and destroy
	// have the certificate (from the state) without it, and push nothing. The schema refuses a
	// configuration giving one without the other.
	if attribute, err := s.ValidateClient(); err != nil && !w.ClientKey.IsNull() {
		diags.AddAttributeError(pathFlux.AtName(attribute), "Invalid Registry Client Certificate", err.Error())
		return s, diags
	}
	if err := s.Validate(); err != nil {
		diags.AddAttributeError(pathFlux, "Invalid Flux Settings", err.Error())
	}
	return s, diags
}

// FluxGap is what the Flux engine cannot deliver yet, refused at plan with one wording for every
// resource (NotThroughFlux).
type FluxGap int

// What the Flux engine cannot deliver yet.
const (
	// FluxGapRefuseAdoption: adopt = false needs each workload cluster read for objects that
	// exist already, and through Flux the runner reads none.
	FluxGapRefuseAdoption FluxGap = iota
	// FluxGapSensitive: an artifact is readable by whoever can pull from the registry, unless
	// delivery.flux.decryption encrypts the sensitive objects.
	FluxGapSensitive
	// FluxGapSensitiveModules: a module assignment's sensitive_manifests are not encrypted yet
	// (its modules render per cluster with values, whose comparison with the records would
	// read the encrypted objects as changed).
	FluxGapSensitiveModules
	// FluxGapHTTPChecks: the provider calls them as it verifies a cluster; through Flux the
	// Kustomization verifies it, and the runner may not reach the workload's services.
	FluxGapHTTPChecks
)

// NotThroughFlux refuses gap at attribute (named as the person writes it, e.g.
// "`sensitive_manifests`") of subject ("the rollout", "the assignment").
func NotThroughFlux(diags *diag.Diagnostics, at path.Path, gap FluxGap, attribute, subject string) {
	switch gap {
	case FluxGapRefuseAdoption:
		diags.AddAttributeError(at, "Adoption Cannot Be Refused Through Flux",
			attribute+" refuses "+subject+" where an object of it exists already, which takes a read of every workload cluster; "+
				"with `delivery.flux` the runner reads none, and Flux's kustomize-controller takes over any object it finds. "+
				"Leave `adopt` out (Flux never prunes Namespaces, CRDs or objects marked `gradual.dev/prune: disabled`), "+
				"or deliver directly (leave `delivery` out).")
	case FluxGapHTTPChecks:
		diags.AddAttributeError(at, "HTTP Checks Not Delivered Through Flux Yet",
			attribute+" are called by the provider as it verifies each cluster, and with `delivery.flux` Flux's Kustomization "+
				"verifies it (the runner may not reach the workload's services): they would never run. Use `verify.health_checks` "+
				"(evaluated by kustomize-controller), a `verify.check_job` that calls the URL from inside the cluster (delivered in "+
				"the artifact, waited for by Flux), or deliver directly (leave `delivery` out).")
	case FluxGapSensitiveModules:
		diags.AddAttributeError(at, "Sensitive Manifests Not Delivered Through Flux Yet",
			attribute+" are kept out of the plan, the state and the records, and `delivery.flux` publishes every object as an "+
				"OCI artifact that anyone who can pull from the registry can read; a rollout encrypts them with "+
				"`delivery.flux.decryption`, "+subject+" cannot yet. Deliver directly (leave `delivery` out), or deliver the Secrets with a rollout.")
	case FluxGapSensitive:
		diags.AddAttributeError(at, "Sensitive Manifests Through Flux Need Decryption",
			attribute+" are kept out of the plan, the state and the records, and `delivery.flux` publishes every object as an "+
				"OCI artifact that anyone who can pull from the registry can read. Set `delivery.flux.decryption = { age_recipient = "+
				"\"age1…\", secret_name = \"…\" }` to publish them SOPS-encrypted to that age recipient, decrypted by each "+
				"Kustomization with the age key you keep in that Secret in each Cluster's namespace; or deliver directly (leave `delivery` out).")
	}
}

// FluxArtifactLine is one line of WarnFluxArtifacts: label (a module's name, or "" for a
// rollout's one revision) and what apply publishes and pins for it.
func FluxArtifactLine(label string, a delivery.FluxArtifact) string {
	line := a.Ref + " @ " + a.Digest
	if a.Template {
		line += " (a template: each cluster's Kustomization substitutes that cluster's values)"
	}
	if label != "" {
		line = label + ": " + line
	}
	return line
}

// WarnFluxArtifacts shows at plan, in one warning, the artifacts an apply through Flux publishes
// and pins by digest (FluxArtifactLine): their digests are computed from the planned manifests,
// with nothing pushed, so the plan names what the clusters will run. One line per revision,
// whatever the size of the fleet.
func WarnFluxArtifacts(diags *diag.Diagnostics, lines []string) {
	if len(lines) == 0 {
		return
	}
	diags.AddWarning("Flux Artifact",
		"Apply publishes these artifacts (tag = revision) and pins the clusters it changes to them by digest, computed here from the planned manifests:\n  "+
			strings.Join(lines, "\n  ")+
			"\n\nA tag that already holds other content (someone published another artifact under it) is refused at apply, naming the "+
			"repository, the tag and both digests, and nothing is pinned to it.")
}

// EncodeRecord is a resource's configuration record c as JSON (its diagnostics after diags);
// an error is "Cannot Record Configuration".
func EncodeRecord(c any, diags diag.Diagnostics) ([]byte, diag.Diagnostics) {
	raw, err := json.Marshal(c)
	if err != nil {
		diags.AddError("Cannot Record Configuration", err.Error())
	}
	return raw, diags
}

// DecodeRecord decodes the configuration record raw of a resource (noun: "rollout") into c.
func DecodeRecord(raw []byte, c any, noun string) diag.Diagnostics {
	var diags diag.Diagnostics
	if err := json.Unmarshal(raw, c); err != nil {
		diags.AddError("Unreadable "+strings.ToUpper(noun[:1])+noun[1:]+" Record", "The management cluster's record of this "+noun+" cannot be decoded: "+err.Error())
	}
	return diags
}

// Service is the delivery service for a resource's `delivery` (value; w its write-only
// credentials): direct, or through Flux with `delivery.flux`.
func Service(ctx context.Context, direct *delivery.Service, value types.Object, w FluxWriteOnly) (*delivery.Service, diag.Diagnostics) {
	settings, diags := FluxSettings(ctx, value, w)
	return direct.WithFlux(settings), diags
}
