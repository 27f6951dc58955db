// Package ignoreattr is the `ignore_fields` and `sensitive_paths` attributes that rollouts and
// module assignments share. Both are lists of the same rules (kind, namespace, name, paths),
// with one schema, one parser and one canonical form, which is part of the revision (changing
// what is ignored changes what an apply does; changing what is sensitive changes what
// `manifests` may hold).
package ignoreattr

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fieldpath"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// Name is the attribute's name.
const Name = "ignore_fields"

// SensitiveName is the name of the attribute of fields to keep out of what Terraform shows.
const SensitiveName = "sensitive_paths"

// AttrTypes are the attribute types of one rule.
var AttrTypes = map[string]attr.Type{
	"kind":      types.StringType,
	"namespace": types.StringType,
	"name":      types.StringType,
	"paths":     types.ListType{ElemType: types.StringType},
}

// Type is the attribute's type.
var Type = types.ListType{ElemType: types.ObjectType{AttrTypes: AttrTypes}}

// Rule is one rule as configured, and as the records keep it (for import): its JSON field
// names are part of the record format.
type Rule struct {
	Kind      string   `json:"kind,omitempty"`
	Namespace string   `json:"namespace,omitempty"`
	Name      string   `json:"name,omitempty"`
	Paths     []string `json:"paths"`
}

// model is one rule as the framework reads it.
type model struct {
	Kind      types.String `tfsdk:"kind"`
	Namespace types.String `tfsdk:"namespace"`
	Name      types.String `tfsdk:"name"`
	Paths     []string     `tfsdk:"paths"`
}

// Attribute is the schema of `ignore_fields`; what is the resource's word for the objects
// ("manifests", "the modules' manifests").
func Attribute(what string) schema.ListNestedAttribute {
	return rulesAttribute("Fields of the objects of "+what+" that other controllers own, such as an HPA's `.spec.replicas` or "+
		"cert-manager's `.webhooks[*].clientConfig.caBundle`, like Argo CD's `ignoreDifferences`. For an object that already "+
		"exists, apply leaves them to their owner: a field another field manager owns is not sent (it keeps it, and no "+
		"conflict arises), one nobody else owns is sent with its live value (so the API server does not drop it). An object "+
		"being created gets the manifest's value. Drift detection, the plan's `summary` and `attention`, and drift repair "+
		"ignore them; readiness verification reads status only. Part of the `revision`: changing these rules is a change. "+
		"A rule with no `kind`, `namespace` or `name` matches every object.",
		"Fields to ignore")
}

// SensitiveAttribute is the schema of `sensitive_paths`; public names the attribute Terraform
// shows, hidden the write-only one.
func SensitiveAttribute(public, hidden string) schema.ListNestedAttribute {
	return rulesAttribute("Fields to treat like a Secret's data, such as a ConfigMap's `.data.password`: a value at one of "+
		"these paths in "+public+" (which Terraform prints in plans and stores in state) is refused at plan time, naming the "+
		"object and the path, never the value; put such objects in "+hidden+", which is write-only. Errors of the apply that would quote a value at these "+
		"paths (an API server refusing the object) show `(sensitive value)` instead. Part of the `revision`: "+
		"changing these rules is a change. A rule with no `kind`, `namespace` or `name` matches every object.",
		"Sensitive fields")
}

// rulesAttribute is the schema both attributes share; pathsWhat starts the paths' description.
func rulesAttribute(description, pathsWhat string) schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		Optional:            true,
		MarkdownDescription: description,
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"kind": schema.StringAttribute{
				Optional: true, MarkdownDescription: "Kind of the objects the rule applies to (`Deployment`); any when left out.",
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"namespace": schema.StringAttribute{
				Optional: true, MarkdownDescription: "Namespace of the objects the rule applies to; any when left out.",
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"name": schema.StringAttribute{
				Optional: true, MarkdownDescription: "Name of the object the rule applies to; any when left out.",
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"paths": schema.ListAttribute{
				Required: true, ElementType: types.StringType,
				MarkdownDescription: pathsWhat + ", as the plan names drifted fields: `.spec.replicas`, `.webhooks[*].clientConfig.caBundle` " +
					"(`[*]` is every element of a list, `[0]` one), `.metadata.annotations[\"example.com/key\"]` (keys with dots or slashes " +
					"quoted). A path must end with a field; `apiVersion`, `kind` and metadata other than labels and annotations cannot be named.",
				Validators: []validator.List{listvalidator.SizeAtLeast(1), listvalidator.ValueStringsAre(fleetresource.FieldPath())},
			},
		}},
	}
}

// Rules reads the attribute (null: none).
func Rules(ctx context.Context, v types.List) ([]Rule, diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() {
		return nil, nil
	}
	var ms []model
	diags := v.ElementsAs(ctx, &ms, false)
	rules := make([]Rule, len(ms))
	for i, m := range ms {
		rules[i] = Rule{Kind: m.Kind.ValueString(), Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString(), Paths: m.Paths}
	}
	return rules, diags
}

// Ignore converts rules for apply. The paths have been validated at plan time; one that does
// not parse here is an error all the same.
func Ignore(rules []Rule) (apply.Ignore, error) {
	var out apply.Ignore
	for _, r := range rules {
		ir := apply.IgnoreRule{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
		for _, s := range r.Paths {
			p, err := fieldpath.Parse(s)
			if err != nil {
				return nil, err
			}
			ir.Paths = append(ir.Paths, p)
		}
		out = append(out, ir)
	}
	return out, nil
}

// Canonical is the rules' canonical form for the revision: nil for none, so that a bundle
// without rules keeps the revision it always had.
func Canonical(rules []Rule) []byte {
	if len(rules) == 0 {
		return nil
	}
	out, _ := json.Marshal(rules) // strings only: cannot fail
	return out
}

// Settings is the canonical form of both attributes for the revision. Without sensitive rules
// it is Canonical(ignore), so that bundles without them keep the revision they always had.
func Settings(ignore, sensitive []Rule) []byte {
	if len(sensitive) == 0 {
		return Canonical(ignore)
	}
	out, _ := json.Marshal(struct { // strings only: cannot fail
		Ignore    []Rule `json:"ignore,omitempty"`
		Sensitive []Rule `json:"sensitive"`
	}{ignore, sensitive})
	return out
}

// Exposed lists the fields of objs (manifests Terraform shows) that sensitive rules name, as
// "ConfigMap app/db .data.password". Values are never part of it.
func Exposed(objs []*unstructured.Unstructured, sensitive []Rule) ([]string, error) {
	rules, err := Ignore(sensitive)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, obj := range objs {
		for _, r := range rules {
			if !r.Matches(obj) {
				continue
			}
			for _, p := range r.Paths {
				if p.Sets(obj.Object) {
					out = append(out, manifest.IdentityOf(obj).String()+" "+p.String())
				}
			}
		}
	}
	return out, nil
}

// MinSensitiveLength is the length (in bytes, after trimming white space) under which
// SensitiveValues leaves a text out. Errors are redacted by replacing every occurrence of a
// listed text, and texts this short ("1", "yes", "app", "80") occur all over messages — in field
// names, numbers, object names — so replacing them would garble the message past reading, while
// a value that short is guessed easily anyway and hides little.
const MinSensitiveLength = 4

// SensitiveValues lists, as texts that error messages must not repeat (delivery.Spec.Redact),
// what objs (the sensitive half of a bundle) hold that is secret:
//
//   - of every core/v1 Secret, each value of `data`, both as written (base64) and decoded, and
//     each value of `stringData`, both as written and base64-encoded (an admission policy sees
//     a Secret's data base64-encoded, and its message may quote it so or decoded);
//   - every string and number at or under a path sensitive rules name (a path may name a whole
//     map), as written and base64-encoded.
//
// Each text is also listed with surrounding white space trimmed and as it reads inside a Go or
// JSON quoted string (a multi-line key or certificate appears with `\n` escapes in messages),
// where those differ. Texts shorter than MinSensitiveLength are left out. The list is sorted and
// without repeats. Paths that do not parse name nothing here; Exposed reports them.
func SensitiveValues(objs []*unstructured.Unstructured, sensitive []Rule) []string {
	list := sensitiveList{}
	for _, obj := range objs {
		if !manifest.IsSecret(obj) {
			continue
		}
		if data, ok := obj.Object["data"].(map[string]any); ok {
			for _, v := range data {
				written, ok := v.(string)
				if !ok {
					leaves(v, list.add) // not base64 at all (the API server refuses it, quoting it)
					continue
				}
				list.add(written)
				// As the API server decodes []byte fields: standard base64, line breaks ignored.
				if decoded, err := base64.StdEncoding.DecodeString(strings.NewReplacer("\n", "", "\r", "").Replace(written)); err == nil {
					list.add(string(decoded))
				}
			}
		}
		if stringData, ok := obj.Object["stringData"].(map[string]any); ok {
			for _, v := range stringData {
				leaves(v, list.addWithBase64)
			}
		}
	}
	rules, err := Ignore(sensitive)
	if err != nil {
		return list.sorted()
	}
	for _, obj := range objs {
		for _, r := range rules {
			if r.Matches(obj) {
				for _, p := range r.Paths {
					for _, v := range p.Values(obj.Object) {
						leaves(v, list.addWithBase64)
					}
				}
			}
		}
	}
	return list.sorted()
}

// leaves calls add with every string and number at or under v, as text: true, false and null
// say nothing worth hiding, and replacing them would garble messages.
func leaves(v any, add func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			leaves(e, add)
		}
	case []any:
		for _, e := range v {
			leaves(e, add)
		}
	case string:
		add(v)
	case nil, bool:
	default:
		add(fmt.Sprint(v))
	}
}

// sensitiveList collects the texts SensitiveValues returns.
type sensitiveList map[string]bool

// add lists text, trimmed and in its quoted forms too (see SensitiveValues).
func (l sensitiveList) add(text string) {
	for _, t := range []string{text, strings.TrimSpace(text)} {
		forms := []string{t, quotedForm(t)}
		if j, err := json.Marshal(t); err == nil {
			forms = append(forms, string(j[1:len(j)-1]))
		}
		for _, f := range forms {
			if len(strings.TrimSpace(f)) >= MinSensitiveLength {
				l[f] = true
			}
		}
	}
}

// addWithBase64 lists text and its standard base64 encoding.
func (l sensitiveList) addWithBase64(text string) {
	l.add(text)
	l.add(base64.StdEncoding.EncodeToString([]byte(text)))
}

func (l sensitiveList) sorted() []string {
	if len(l) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(l))
}

// quotedForm is text as it reads between the quotes of Go's %q (how field errors of the API
// server quote a refused value).
func quotedForm(text string) string {
	q := strconv.Quote(text)
	return q[1 : len(q)-1]
}

// ExposedDetail is the diagnostic detail for Exposed's findings; instead names the attribute
// (or advice, starting with a space) where such objects belong.
func ExposedDetail(found []string, instead string) string {
	msg := "these fields are declared sensitive in `" + SensitiveName + "` but are set in manifests that Terraform prints in " +
		"plan output and stores in state: " + strings.Join(found, ", ") + "."
	if strings.HasPrefix(instead, " ") {
		return msg + instead
	}
	return msg + " Move these objects to `" + instead + "`, which is write-only (never stored in plan or state) and still " +
		"part of the revision, so a changed value still plans an update."
}

// Value turns rules (from the records) back into the attribute's value; null for none.
func Value(ctx context.Context, rules []Rule) (types.List, diag.Diagnostics) {
	if len(rules) == 0 {
		return types.ListNull(types.ObjectType{AttrTypes: AttrTypes}), nil
	}
	opt := func(s string) types.String {
		if s == "" {
			return types.StringNull()
		}
		return types.StringValue(s)
	}
	ms := make([]model, len(rules))
	for i, r := range rules {
		ms[i] = model{Kind: opt(r.Kind), Namespace: opt(r.Namespace), Name: opt(r.Name), Paths: r.Paths}
	}
	return types.ListValueFrom(ctx, types.ObjectType{AttrTypes: AttrTypes}, ms)
}

// Known reports whether v is known all through (a rule or path computed from another
// resource's attribute is unknown until apply, and so is then the revision).
func Known(v types.List) bool {
	if v.IsUnknown() {
		return false
	}
	for _, e := range v.Elements() {
		if e.IsUnknown() {
			return false
		}
		o, ok := e.(types.Object)
		if !ok {
			continue
		}
		for _, a := range o.Attributes() {
			if a.IsUnknown() {
				return false
			}
			if l, ok := a.(types.List); ok {
				for _, p := range l.Elements() {
					if p.IsUnknown() {
						return false
					}
				}
			}
		}
	}
	return true
}

// Stored is both attributes as the records keep them (for import); a resource embeds it in its
// record, so its JSON field names are part of the record format.
type Stored struct {
	IgnoreFields   []Rule `json:"ignoreFields,omitempty"`
	SensitivePaths []Rule `json:"sensitivePaths,omitempty"`
}

// Store reads `ignore_fields` and `sensitive_paths` for the records.
func Store(ctx context.Context, ignore, sensitive types.List) (Stored, diag.Diagnostics) {
	var s Stored
	var diags, d diag.Diagnostics
	s.IgnoreFields, diags = Rules(ctx, ignore)
	s.SensitivePaths, d = Rules(ctx, sensitive)
	diags.Append(d...)
	return s, diags
}

// RuleValues turns what the records kept back into `ignore_fields` and `sensitive_paths`.
func (s Stored) RuleValues(ctx context.Context) (ignore, sensitive types.List, diags diag.Diagnostics) {
	ignore, diags = Value(ctx, s.IgnoreFields)
	sensitive, d := Value(ctx, s.SensitivePaths)
	diags.Append(d...)
	return ignore, sensitive, diags
}
