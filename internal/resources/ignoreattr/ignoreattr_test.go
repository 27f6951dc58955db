package ignoreattr

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
)

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	rules := []Rule{{Kind: "Deployment", Paths: []string{".spec.replicas"}}, {Namespace: "a", Name: "b", Paths: []string{`.metadata.annotations["x/y"]`}}}
	v, diags := Value(ctx, rules)
	if diags.HasError() {
		t.Fatal(diags)
	}
	back, diags := Rules(ctx, v)
	if diags.HasError() {
		t.Fatal(diags)
	}
	if string(Canonical(back)) != string(Canonical(rules)) {
		t.Errorf("round trip: %s, want %s", Canonical(back), Canonical(rules))
	}
	ig, err := Ignore(back)
	if err != nil || len(ig) != 2 || ig[1].Paths[0].String() != `.metadata.annotations["x/y"]` {
		t.Errorf("Ignore = %v, %v", ig, err)
	}
	if _, err := Ignore([]Rule{{Paths: []string{"spec"}}}); err == nil || !strings.Contains(err.Error(), "expected '.'") {
		t.Errorf("Ignore of a bad path: %v", err)
	}
	if Canonical(nil) != nil {
		t.Error("no rules must add nothing to the revision")
	}
	if !Known(v) || !Known(types.ListNull(types.ObjectType{AttrTypes: AttrTypes})) {
		t.Error("known values reported unknown")
	}
	unknownPath := types.ListValueMust(types.ObjectType{AttrTypes: AttrTypes}, []attr.Value{types.ObjectValueMust(AttrTypes, map[string]attr.Value{
		"kind": types.StringNull(), "namespace": types.StringNull(), "name": types.StringNull(),
		"paths": types.ListValueMust(types.StringType, []attr.Value{types.StringUnknown()}),
	})})
	if Known(unknownPath) || Known(types.ListUnknown(types.ObjectType{AttrTypes: AttrTypes})) {
		t.Error("unknown values reported known")
	}
}

func TestExposedNamesObjectAndPathNeverTheValue(t *testing.T) {
	set, err := manifest.Parse(`apiVersion: v1
kind: ConfigMap
metadata: {name: db, namespace: app}
data: {password: hunter2, user: admin}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other, namespace: app}
data: {password: visible-on-purpose}
`)
	if err != nil {
		t.Fatal(err)
	}
	rules := []Rule{{Kind: "ConfigMap", Name: "db", Paths: []string{".data.password", ".data.token"}}}
	found, err := Exposed(set.Objects, rules)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0] != "ConfigMap app/db .data.password" {
		t.Fatalf("Exposed = %q", found)
	}
	detail := ExposedDetail(found, "sensitive_manifests")
	if strings.Contains(detail, "hunter2") || !strings.Contains(detail, "ConfigMap app/db .data.password") || !strings.Contains(detail, "`sensitive_manifests`") {
		t.Errorf("detail = %s", detail)
	}
	// A rule without kind or name matches every object.
	if found, _ := Exposed(set.Objects, []Rule{{Paths: []string{".data.password"}}}); len(found) != 2 {
		t.Errorf("catch-all rule: %q", found)
	}
	if found, _ := Exposed(set.Objects, []Rule{{Namespace: "elsewhere", Paths: []string{".data.password"}}}); len(found) != 0 {
		t.Errorf("rule of another namespace: %q", found)
	}
	if _, err := Exposed(set.Objects, []Rule{{Paths: []string{"data"}}}); err == nil {
		t.Error("a path that does not parse is an error")
	}
}

func TestSettingsKeepRevisionsWithoutSensitiveRules(t *testing.T) {
	ignore := []Rule{{Kind: "Deployment", Paths: []string{".spec.replicas"}}}
	if string(Settings(ignore, nil)) != string(Canonical(ignore)) || Settings(nil, nil) != nil {
		t.Error("without sensitive rules, Settings must be Canonical(ignore)")
	}
	a := Settings(ignore, []Rule{{Kind: "ConfigMap", Paths: []string{".data.password"}}})
	b := Settings(ignore, []Rule{{Kind: "ConfigMap", Paths: []string{".data.token"}}})
	if string(a) == string(b) || string(a) == string(Canonical(ignore)) {
		t.Errorf("sensitive rules must change the settings: %s / %s", a, b)
	}
	// The same rules as ignore_fields or as sensitive_paths are different settings.
	if string(Settings(nil, ignore)) == string(Settings(ignore, nil)) {
		t.Error("ignore and sensitive rules must not be confused")
	}
}

func TestSensitiveValuesCollectsLeavesOfMatchedObjectsOnly(t *testing.T) {
	set, err := manifest.Parse(`apiVersion: v1
kind: ConfigMap
metadata: {name: db, namespace: app}
data: {password: hunter2, user: admin}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other, namespace: app}
data: {password: not-this-one}
---
apiVersion: example.com/v1
kind: Thing
metadata: {name: db, namespace: app}
spec: {creds: {pin: 4321, token: tok-1, enabled: true}}
`)
	if err != nil {
		t.Fatal(err)
	}
	rules := []Rule{{Name: "db", Paths: []string{".data.password", ".spec.creds"}}}
	got := SensitiveValues(set.Objects, rules)
	// Each as written and base64-encoded; sorted.
	if want := []string{"4321", "NDMyMQ==", "aHVudGVyMg==", "dG9rLTE=", "hunter2", "tok-1"}; !slices.Equal(got, want) {
		t.Errorf("SensitiveValues = %q, want %q", got, want)
	}
	if got := SensitiveValues(set.Objects, []Rule{{Paths: []string{"bad"}}}); got != nil {
		t.Errorf("unparsable rules: %q", got)
	}
}

func TestSensitiveValuesCoverSecretsOfTheSensitiveHalf(t *testing.T) {
	set, err := manifest.Parse(`apiVersion: v1
kind: Secret
metadata: {name: db, namespace: app}
stringData:
  password: hunter2-long
  pem: "-----BEGIN KEY-----\nMIIBOgIBAAJBAK\n-----END KEY-----\n"
  port: 5432
  pin: "123"
  html: "<pw>&more"
data:
  token: c2VjcmV0LXRva2Vu
  user: YWRt
  broken: not*base64
---
apiVersion: example.com/v1
kind: Secret
metadata: {name: not-core, namespace: app}
data: {token: bm90LWEtc2VjcmV0}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: app}
data: {password: not-listed-without-a-rule}
`)
	if err != nil {
		t.Fatal(err)
	}
	got := SensitiveValues(set.Objects, nil)
	has := func(v string) bool { return slices.Contains(got, v) }
	for _, want := range []string{
		"hunter2-long", "aHVudGVyMi1sb25n", // stringData: raw and base64
		"5432", "NTQzMg==", // a number, as the API server would quote it refusing it
		"c2VjcmV0LXRva2Vu", "secret-token", // data: as written and decoded
		"YWRt",       // as written; decoded "adm" is too short
		"not*base64", // not base64: as written only
		"MTIz",       // base64 of the short pin
		// A multi-line value as written, trimmed, and as it reads quoted, trimmed or not.
		"-----BEGIN KEY-----\nMIIBOgIBAAJBAK\n-----END KEY-----\n",
		"-----BEGIN KEY-----\nMIIBOgIBAAJBAK\n-----END KEY-----",
		`-----BEGIN KEY-----\nMIIBOgIBAAJBAK\n-----END KEY-----\n`,
		`-----BEGIN KEY-----\nMIIBOgIBAAJBAK\n-----END KEY-----`,
		// As JSON quotes it (a field error quoting a whole object).
		`\u003cpw\u003e\u0026more`,
	} {
		if !has(want) {
			t.Errorf("%q not listed in %q", want, got)
		}
	}
	for _, unwanted := range []string{"123", "adm", "not-a-secret", "bm90LWEtc2VjcmV0", "not-listed-without-a-rule", "db", "app"} {
		if has(unwanted) {
			t.Errorf("%q listed: %q", unwanted, got)
		}
	}
	for _, v := range got {
		if len(strings.TrimSpace(v)) < MinSensitiveLength {
			t.Errorf("%q is shorter than %d bytes", v, MinSensitiveLength)
		}
	}
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("not sorted without repeats: %q", got)
	}
	// Unparsable rules still leave the Secrets' values listed.
	if again := SensitiveValues(set.Objects, []Rule{{Paths: []string{"bad"}}}); !slices.Equal(again, got) {
		t.Errorf("with unparsable rules: %q", again)
	}
	// Rules add to them.
	withRule := SensitiveValues(set.Objects, []Rule{{Kind: "ConfigMap", Paths: []string{".data.password"}}})
	if !slices.Contains(withRule, "not-listed-without-a-rule") || !slices.Contains(withRule, "secret-token") {
		t.Errorf("with a rule: %q", withRule)
	}
}
