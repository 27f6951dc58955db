package functions_test

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
)

const manifests = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: demo\ndata:\n  a: \"1\"\n"

// The reordered, reformatted document set must give the same revision as the original.
const reordered = "# settings first\n---\n{\"kind\": \"ConfigMap\", \"apiVersion\": \"v1\", \"data\": {\"a\": \"1\"}, \"metadata\": {\"namespace\": \"demo\", \"name\": \"settings\"}}\n---\nkind: Namespace\napiVersion: v1\nmetadata: {name: demo}\n"

func TestAccRevisionFunction(t *testing.T) {
	acctest.PreCheck(t)
	want, err := manifest.Revision(manifests)
	if err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_8_0)},
		Steps: []resource.TestStep{
			{
				Config: `
locals {
  original  = <<-EOT
` + indent(manifests) + `  EOT
  reordered = <<-EOT
` + indent(reordered) + `  EOT
}
output "original"  { value = provider::gradual::revision(local.original) }
output "reordered" { value = provider::gradual::revision(local.reordered) }
`,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownOutputValue("original", knownvalue.StringExact(want)),
					statecheck.ExpectKnownOutputValue("reordered", knownvalue.StringExact(want)),
				},
			},
			{
				Config:      `output "bad" { value = provider::gradual::revision("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\nkind: [oops\n") }`,
				ExpectError: regexp.MustCompile(`document 2:\s+invalid YAML`),
			},
		},
	})
}

func indent(s string) string {
	out := ""
	for _, line := range regexp.MustCompile("\n").Split(s, -1) {
		if line != "" {
			out += "    " + line + "\n"
		}
	}
	return out
}
