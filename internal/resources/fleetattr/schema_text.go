package fleetattr

import (
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
	namespaceDescription        = "Namespace of the Cluster API `Cluster` objects in the management cluster."
	selectorDescription         = "Label selector over the `Cluster` objects, as in Kubernetes: `match_labels` and `match_expressions` are ANDed. Conflicts with `names`. With neither, every Cluster in the namespace is picked."
	namesDescription            = "Names of the `Cluster` objects to pick. Conflicts with `selector`. Names that do not exist give a warning."
	matchLabelsDescription      = "Labels the Cluster must carry, key to value."
	matchExpressionsDescription = "Label requirements, all of which must hold."
	keyDescription              = "Label key."
	operatorDescription         = "One of `In`, `NotIn`, `Exists`, `DoesNotExist`."
	valuesDescription           = "Values for `In` and `NotIn`; must be empty for `Exists` and `DoesNotExist`."
)

func namespaceValidators() []validator.String {
	return []validator.String{stringvalidator.LengthBetween(1, 63)}
}

// selectorValidators: namesAttr is the attribute the selector conflicts with.
func selectorValidators(namesAttr string) []validator.Object {
	return []validator.Object{objectvalidator.ConflictsWith(path.MatchRoot(namesAttr))}
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
		listvalidator.UniqueValues(),
		listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1)),
	}
}
