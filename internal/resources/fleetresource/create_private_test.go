package fleetresource

import (
	"reflect"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// A create plans its waves again at apply from the fleet as it reads then, because nothing the
// plan keeps privately reaches it (see Create). The framework's CreateRequest has no private
// state; should an upgrade add one, this fails, and a create's waves could travel with the plan
// to Create (not to the plan Terraform makes again at apply, which would still read the fleet).
func TestCreateGetsNoPrivateState(t *testing.T) {
	if f, ok := reflect.TypeFor[resource.CreateRequest]().FieldByName("Private"); ok {
		t.Errorf("resource.CreateRequest has a %s field now: a create's planned waves can reach Create (see shared.Create)", f.Type)
	}
	if _, ok := reflect.TypeFor[resource.UpdateRequest]().FieldByName("Private"); !ok {
		t.Error("resource.UpdateRequest has no Private field: an update's planned waves cannot reach Update")
	}
}
