#!/usr/bin/env bash
# Regenerates docs/ with tfplugindocs (pinned in tools/go.mod) and formats the examples.
# tfplugindocs renders from the provider's schema. With `terraform` on PATH it reads the schema
# itself; otherwise the schema comes from the toolchain's OpenTofu (`tofu providers schema -json`
# against this build, installed from a filesystem mirror), so the docs check never needs to be
# skipped on a machine without Terraform.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# A CLI configuration file that the environment names but that does not exist (TF_CLI_CONFIG_FILE
# set for a machine's own use) makes every terraform run print a warning box, the last lines
# `make test` would show; an empty configuration changes nothing.
if [ -n "${TF_CLI_CONFIG_FILE:-}" ] && [ ! -e "$TF_CLI_CONFIG_FILE" ]; then
  empty_rc=$(mktemp "${TMPDIR:-/tmp}/gradual-generate-rc.XXXXXX")
  trap 'rm -f "$empty_rc"' EXIT
  export TF_CLI_CONFIG_FILE="$empty_rc"
fi
# CONTRIBUTING.md's package list (its Layout section) follows the package comments.
tools/layout.sh
docs() { (cd tools && go tool tfplugindocs generate --provider-dir .. --provider-name gradual --rendered-provider-name gradual "$@"); }

if command -v terraform >/dev/null 2>&1; then
  docs
  cli=terraform
else
  env_file=$(tools/toolchain.sh | tail -n 1)
  # shellcheck disable=SC1090
  source "$env_file"
  cli=$GRADUAL_TOFU
  work=$(mktemp -d "${TMPDIR:-/tmp}/gradual-generate.XXXXXX")
  trap 'rm -rf "$work" "${empty_rc:-}"' EXIT
  version=0.1.0
  plugin="$work/mirror/registry.opentofu.org/hashicorp/gradual/$version/$(go env GOOS)_$(go env GOARCH)"
  mkdir -p "$plugin" "$work/config"
  go build -o "$plugin/terraform-provider-gradual_v$version" .
  cat >"$work/cli.tfrc" <<RC
provider_installation {
  filesystem_mirror {
    path    = "$work/mirror"
    include = ["registry.opentofu.org/hashicorp/gradual"]
  }
}
RC
  printf 'terraform {\n  required_providers {\n    gradual = { source = "hashicorp/gradual" }\n  }\n}\n' >"$work/config/main.tf"
  (cd "$work/config" && TF_CLI_CONFIG_FILE="$work/cli.tfrc" "$cli" init -backend=false -input=false >/dev/null &&
    TF_CLI_CONFIG_FILE="$work/cli.tfrc" "$cli" providers schema -json) |
    # tfplugindocs looks the schema up under its Terraform registry address.
    sed 's#"registry.opentofu.org/hashicorp/gradual"#"registry.terraform.io/hashicorp/gradual"#' >"$work/schema.json"
  docs --providers-schema "$work/schema.json"
fi
"$cli" fmt -recursive "$root/examples/" >/dev/null
if [ -d modules ]; then "$cli" fmt -recursive "$root/modules/" >/dev/null; fi
