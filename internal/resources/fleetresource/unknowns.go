package fleetresource

import (
	"reflect"

	"github.com/hashicorp/terraform-plugin-framework/attr"
)

// FillUnknown sets every attribute of dst that is still unknown to the value observed holds for
// it, after an apply: a value the plan showed is a promise Terraform holds apply to, so it
// stays; what the plan left to apply is filled from what apply read. M is a resource model:
// a struct whose exported fields are attribute values (types.String, types.Map, ...);
// other fields (private state) are left alone.
func FillUnknown[M any](dst, observed *M) {
	d, o := reflect.ValueOf(dst).Elem(), reflect.ValueOf(observed).Elem()
	for i := range d.NumField() {
		field := d.Field(i)
		if !field.CanSet() {
			continue
		}
		if v, ok := field.Interface().(attr.Value); ok && v.IsUnknown() {
			field.Set(o.Field(i))
		}
	}
}
