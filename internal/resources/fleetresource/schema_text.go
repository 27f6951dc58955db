package fleetresource

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
)

// The data source and resource schema packages have attribute types of their own, so each file
// builds its own attributes; what those attributes say and check is kept here once, so that a
// data source and a resource cannot come to describe or validate the same selector differently.

const (
	namespaceDescription         = "Namespace of the Cluster API `Cluster` objects in the management cluster."
	selectorDescription          = "Label selector over the `Cluster` objects, as in Kubernetes: `match_labels` and `match_expressions` are ANDed. Conflicts with `names`. With neither, every Cluster in the namespace is picked."
	exclusiveSelectorDescription = "Label selector over the `Cluster` objects, as in Kubernetes: `match_labels` and `match_expressions` are ANDed; clusters that match later are picked by a later apply. An empty selector (`{}`) picks every Cluster in the namespace."
	namesDescription             = "Names of the `Cluster` objects to pick. Conflicts with `selector`. Names that do not exist give a warning. " + emptyNamesDescription
	emptyNamesDescription        = "An empty list is an error, not \"no filter\": leave the attribute out instead."
	matchLabelsDescription       = "Labels the Cluster must carry, key to value."
	matchExpressionsDescription  = "Label requirements, all of which must hold."
	keyDescription               = "Label key."
	operatorDescription          = "One of `In`, `NotIn`, `Exists`, `DoesNotExist`."
	valuesDescription            = "Values for `In` and `NotIn`; must be empty for `Exists` and `DoesNotExist`."
)

func namespaceValidators() []validator.String {
	return []validator.String{stringvalidator.LengthBetween(1, 63)}
}

// selectorValidators: namesAttrs are the attributes the selector conflicts with.
func selectorValidators(namesAttrs ...string) []validator.Object {
	if len(namesAttrs) == 0 {
		return nil
	}
	paths := make([]path.Expression, len(namesAttrs))
	for i, a := range namesAttrs {
		paths[i] = path.MatchRoot(a)
	}
	return []validator.Object{objectvalidator.ConflictsWith(paths...)}
}

func matchLabelsValidators() []validator.Map {
	return []validator.Map{mapvalidator.KeysAre(stringvalidator.LengthAtLeast(1))}
}

func keyValidators() []validator.String {
	return []validator.String{stringvalidator.LengthAtLeast(1)}
}

func operatorValidators() []validator.String {
	return []validator.String{stringvalidator.OneOf(Operators...)}
}

func namesValidators() []validator.List {
	return []validator.List{
		notEmpty{},
		listvalidator.UniqueValues(),
		listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1)),
	}
}

// notEmpty refuses an empty list of names. Left out (null), names do not filter; but an empty
// list is what a `for` expression that filtered every name out gives, and reading it as "no
// filter" would roll out to every Cluster in the namespace — the opposite of what was meant.
type notEmpty struct{}

func (notEmpty) Description(context.Context) string {
	return "must name at least one Cluster; leave it out (null) to pick by selector or every Cluster"
}
func (v notEmpty) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (notEmpty) ValidateList(_ context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() || len(req.ConfigValue.Elements()) > 0 {
		return
	}
	resp.Diagnostics.AddAttributeError(req.Path, "No Clusters Listed",
		"The list of cluster names is empty. An empty list would mean no filter at all, i.e. every Cluster in the "+
			"namespace, so it is refused (a `for` expression that filtered every name out gives an empty list). "+
			"To pick nothing, leave the resource out (count = 0); to pick by labels or every Cluster, leave the attribute out (null).")
}
