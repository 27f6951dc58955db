package fleetresource

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/providerdata"
)

type testModel struct {
	ID       types.String   `tfsdk:"id"`
	Timeouts timeouts.Value `tfsdk:"timeouts"`
}

// savedPrivate is the id of every model whose private state was saved (Read builds its model
// itself, so the record cannot be a field).
var savedPrivate []string

func (m *testModel) TimeoutsValue() timeouts.Value { return m.Timeouts }

func (m *testModel) LoadPrivate(context.Context, PrivateGetter) diag.Diagnostics { return nil }

func (m *testModel) SavePrivate(context.Context, PrivateSetter) diag.Diagnostics {
	savedPrivate = append(savedPrivate, m.ID.ValueString())
	return nil
}

// testOps records what Resource calls; refreshed is what Refresh reports and sets as the id.
type testOps struct {
	refreshed bool
	calls     []string
	deleteIn  time.Duration
}

func (o *testOps) Apply(context.Context, time.Duration, *testModel, *diag.Diagnostics, bool) bool {
	o.calls = append(o.calls, "apply")
	return true
}

func (o *testOps) Refresh(_ context.Context, state *testModel, _ PrivateGetter, _ *diag.Diagnostics) bool {
	o.calls = append(o.calls, "refresh")
	state.ID = types.StringValue("refreshed")
	return o.refreshed
}

func (o *testOps) Destroy(_ context.Context, timeout time.Duration, _ *testModel, _ PrivateGetter, _ *diag.Diagnostics) {
	o.calls, o.deleteIn = append(o.calls, "destroy"), timeout
}

func testState(t *testing.T, id string) tfsdk.State {
	t.Helper()
	ctx := context.Background()
	s := schema.Schema{Attributes: map[string]schema.Attribute{
		"id": schema.StringAttribute{Computed: true}, "timeouts": timeouts.Attributes(ctx, timeouts.Opts{Delete: true}),
	}}
	st := tfsdk.State{Schema: s}
	tt, _ := s.Attributes["timeouts"].GetType().(timeouts.Type)
	tv := timeouts.Value{Object: types.ObjectNull(tt.AttributeTypes())}
	if d := st.Set(ctx, &testModel{ID: types.StringValue(id), Timeouts: tv}); d.HasError() {
		t.Fatal(d)
	}
	return st
}

// Read keeps the state as it is without provider data or when the refresh cannot read, and
// otherwise saves what the refresh read, private state first (the in-place resource relies on
// both, as the rollout and the assignment do).
func TestResourceRead(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		data      *providerdata.Data
		refreshed bool
		wantID    string
		wantCalls int
		wantSaved int
	}{
		{"unconfigured", nil, true, "prior", 0, 0},
		{"unread", &providerdata.Data{}, false, "prior", 1, 0},
		{"read", &providerdata.Data{}, true, "refreshed", 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			savedPrivate = nil
			ops := &testOps{refreshed: c.refreshed}
			r := &Resource[testModel, *testModel]{Configured: Configured{Data: c.data}, Ops: ops}
			resp := resource.ReadResponse{State: testState(t, "prior")}
			r.Read(ctx, resource.ReadRequest{State: testState(t, "prior")}, &resp)
			var got testModel
			if d := resp.State.Get(ctx, &got); d.HasError() || resp.Diagnostics.HasError() {
				t.Fatal(d, resp.Diagnostics)
			}
			if got.ID.ValueString() != c.wantID || len(ops.calls) != c.wantCalls {
				t.Errorf("state id %q after %v, want %q after %d refreshes", got.ID.ValueString(), ops.calls, c.wantID, c.wantCalls)
			}
			if len(savedPrivate) != c.wantSaved || (c.wantSaved > 0 && savedPrivate[0] != "refreshed") {
				t.Errorf("private state saved from %v, want %d save(s) of the refreshed model", savedPrivate, c.wantSaved)
			}
		})
	}
}

// Delete hands the delete timeout (its default when unset) to Destroy, even without provider
// data: a resource whose Destroy does nothing (the in-place update) is forgotten regardless.
func TestResourceDelete(t *testing.T) {
	ops := &testOps{}
	r := &Resource[testModel, *testModel]{Ops: ops}
	var resp resource.DeleteResponse
	r.Delete(context.Background(), resource.DeleteRequest{State: testState(t, "prior")}, &resp)
	if resp.Diagnostics.HasError() || len(ops.calls) != 1 || ops.deleteIn != DefaultDeleteTimeout {
		t.Errorf("Delete: %v, calls %v, timeout %s; want one destroy with %s", resp.Diagnostics, ops.calls, ops.deleteIn, DefaultDeleteTimeout)
	}
}
