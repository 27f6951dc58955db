package fleetresource

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func check(v validator.String, value string) string {
	resp := &validator.StringResponse{}
	v.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("x"), ConfigValue: types.StringValue(value)}, resp)
	if !resp.Diagnostics.HasError() {
		return ""
	}
	return resp.Diagnostics[0].Summary() + ": " + resp.Diagnostics[0].Detail()
}

func TestValidators(t *testing.T) {
	cases := []struct {
		name  string
		v     validator.String
		value string
		want  string // "" = valid; else a substring of the error
	}{
		{"limit int", UpdateLimit(), "2", ""},
		{"limit percent", UpdateLimit(), "25%", ""},
		{"limit zero", UpdateLimit(), "0", "Invalid Update Limit"},
		{"limit 150%", UpdateLimit(), "150%", "1% to 100%"},
		{"limit abc", UpdateLimit(), "abc", "Invalid Update Limit"},
		{"budget zero", MaxFailures(), "0", ""},
		{"budget negative", MaxFailures(), "-1", "Invalid Failure Budget"},
		{"duration ok", Duration(time.Second, 0), "5m", ""},
		{"duration bad", Duration(time.Second, 0), "5 minutes", "not a duration"},
		{"duration short", Duration(time.Second, 0), "10ms", "shorter than 1s"},
		{"duration long", Duration(0, time.Hour), "2h", "longer than 1h0m0s"},
		{"manifests ok", Manifests(), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", ""},
		{"manifests bad yaml", Manifests(), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: [\n", "document 2"},
		{"manifests empty", Manifests(), "# nothing\n", "no objects"},
		{"no secrets ok", NoSecrets("sensitive_manifests"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", ""},
		{"no secrets refuses", NoSecrets("sensitive_manifests"), "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\ndata: {k: c2VjcmV0}\n", "Secret In Manifests: x: these manifests hold /Secret /a"},
		{"field path ok", FieldPath(), ".webhooks[*].clientConfig.caBundle", ""},
		{"field path no dot", FieldPath(), "spec.replicas", "Invalid Field Path: \"spec.replicas\": expected '.' or '['"},
		{"field path name", FieldPath(), ".metadata.name", "only labels and annotations"},
		{"sensitive ok", SensitiveManifests(), "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\n", ""},
		{"sensitive bad yaml withheld", SensitiveManifests(), "kind: Secret\nstringData: {k: \"s3cr3t\n", "withheld"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := check(tc.v, tc.value)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("%q: got %q, want %q", tc.value, got, tc.want)
			}
		})
	}
	if got := check(SensitiveManifests(), "kind: Secret\nstringData: {k: \"s3cr3t\n"); strings.Contains(got, "s3cr3t") {
		t.Fatalf("the error quotes the sensitive text: %s", got)
	}
	if got := check(NoSecrets("x"), "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\ndata: {k: c2VjcmV0}\n"); strings.Contains(got, "c2VjcmV0") {
		t.Fatalf("the error quotes the Secret data: %s", got)
	}
	// Refusals about Secrets are not placed on the attribute: Terraform would print its lines.
	for _, c := range []struct {
		v   validator.String
		bad string
	}{
		{NoSecrets("x"), "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\n"},
		{SensitiveManifests(), "apiVersion: v1\nkind: Secret\nmetadata: {}\n"},
	} {
		resp := &validator.StringResponse{}
		c.v.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("x"), ConfigValue: types.StringValue(c.bad)}, resp)
		if !resp.Diagnostics.HasError() {
			t.Fatal("the bad value was accepted")
		}
		if _, placed := resp.Diagnostics[0].(diag.DiagnosticWithPath); placed {
			t.Fatalf("%s is reported on the attribute", resp.Diagnostics[0].Summary())
		}
	}
	// Unknown and null values are left to later phases.
	resp := &validator.StringResponse{}
	UpdateLimit().ValidateString(context.Background(), validator.StringRequest{ConfigValue: types.StringUnknown()}, resp)
	if resp.Diagnostics.HasError() {
		t.Fatal("unknown value rejected")
	}
}
