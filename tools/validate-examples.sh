#!/usr/bin/env bash
# Validates what the docs show: every directory of .tf files under examples/, every module and
# every module's examples (modules/*/examples/*) runs
# `init -backend=false` and `validate` on OpenTofu (the toolchain's) and, when it is on PATH (or
# GRADUAL_TERRAFORM names it), Terraform, against this build of the provider installed from a
# filesystem mirror. Then every ```hcl / ```terraform block of the README, ARCHITECTURE,
# CONTRIBUTING, docs/, templates/ and the modules' READMEs must parse (tools/hclblocks), and
# `tfplugindocs validate` must accept docs/. No fleet, no network: about a minute on a warm build
# cache. Before all that, the versions a user reads must agree (below).
#
# A directory that needs another registry provider (the ephemeral resource's snippet configures
# hashicorp/kubernetes and hashicorp/helm) cannot be initialized without a registry: it is then
# reported NOT VALIDATED (its code still has to parse) and does not fail the run, unless
# VALIDATE_EXAMPLES_STRICT=1, which GitHub Actions sets.
#
# The mirror holds the build under the version modules/*/versions.tf require (all modules must
# name the same constraint), so an example or a module asking for another version fails `init`.
# A directory that declares no required_providers (the registry pages' snippets under
# examples/resources, data-sources, ...) gets one for gradual-dev/gradual in its scratch copy.
# The directories are copied to a scratch directory: nothing is written into examples/ or modules/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
log() { echo "[validate] $*" >&2; }

if [ -z "${GRADUAL_TOFU:-}" ]; then
  env_file=$(tools/toolchain.sh | tail -n 1)
  # shellcheck disable=SC1090
  source "$env_file"
fi
clis=("OpenTofu:$GRADUAL_TOFU")
terraform_cli=${GRADUAL_TERRAFORM:-$(command -v terraform || true)}
if [ -n "$terraform_cli" ]; then clis+=("Terraform:$terraform_cli"); else log "no terraform on PATH: Terraform skipped"; fi

# The version the modules require: the lower bound of their one constraint (">= 0.3.0, < 0.4.0").
constraints=$(sed -n 's/^ *version *= *"\(.*\)".*/\1/p' modules/*/versions.tf | sort -u)
[ "$(printf '%s\n' "$constraints" | wc -l)" -eq 1 ] || { log "the modules require different versions: $constraints"; exit 1; }
version=$(printf '%s\n' "$constraints" | sed -n 's/.*>= *\([0-9][0-9.]*\).*/\1/p')
[ -n "$version" ] || { log "no '>= X.Y.Z' in the modules' constraint '$constraints'"; exit 1; }

# One version everywhere a user reads it: the modules' lower bound is the CHANGELOG's latest
# release, has its upgrading guide, and is what the README, the modules' READMEs and docs/ pin
# (`version = "~> X.Y.Z"`) and take the modules at (`?ref=vX.Y.Z`); the guides for upgrading to
# earlier releases keep theirs.
version_failed=()
latest=$(sed -n 's/^## \[\([0-9][0-9.]*\)\].*/\1/p' CHANGELOG.md | head -n 1)
[ "$latest" = "$version" ] || version_failed+=("CHANGELOG.md's latest release is '$latest', the modules require $version")
minor=${version%.*}
[ -f "templates/guides/upgrading-to-$minor.md.tmpl" ] || version_failed+=("no templates/guides/upgrading-to-$minor.md.tmpl")
mapfile -t version_files < <(ls README.md modules/*/README.md templates/index.md.tmpl; find docs templates -name '*.md' -o -name '*.md.tmpl' | grep -v '/upgrading-to-' ; ls "templates/guides/upgrading-to-$minor.md.tmpl" 2>/dev/null)
while IFS= read -r hit; do
  [ -n "$hit" ] && version_failed+=("$hit")
done < <(grep -HnoE '"~> [0-9][0-9.]*"|\?ref=v[0-9][0-9.]*' "${version_files[@]}" | grep -vE "(\"~> $version\"|\?ref=v$version)\$" || true)
if [ ${#version_failed[@]} -gt 0 ]; then
  log "versions disagree (the modules require $version):"
  printf '    %s\n' "${version_failed[@]}" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gradual-validate.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "building the provider as $version into a filesystem mirror"
go build -o "$work/terraform-provider-gradual" .
for host in registry.terraform.io registry.opentofu.org; do
  dir="$work/mirror/$host/gradual-dev/gradual/$version/$(go env GOOS)_$(go env GOARCH)"
  mkdir -p "$dir"
  cp "$work/terraform-provider-gradual" "$dir/terraform-provider-gradual_v$version"
done
cat >"$work/cli.tfrc" <<RC
provider_installation {
  filesystem_mirror {
    path    = "$work/mirror"
    include = ["registry.terraform.io/gradual-dev/gradual", "registry.opentofu.org/gradual-dev/gradual"]
  }
  direct {
    exclude = ["registry.terraform.io/gradual-dev/gradual", "registry.opentofu.org/gradual-dev/gradual"]
  }
}
RC
export TF_CLI_CONFIG_FILE="$work/cli.tfrc" CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
# Plugins are unpacked once per CLI, not once per directory.
export TF_PLUGIN_CACHE_DIR="$work/plugin-cache"
mkdir -p "$TF_PLUGIN_CACHE_DIR"

mapfile -t dirs < <({
  find examples -name '*.tf' -printf '%h\n'
  find modules -mindepth 1 -maxdepth 1 -type d
  find modules -mindepth 3 -path 'modules/*/examples/*' -name '*.tf' -printf '%h\n'
} | sort -u)
# VALIDATE_EXAMPLES_DIRS="examples/quickstart modules/fleet-addon" validates those only.
if [ -n "${VALIDATE_EXAMPLES_DIRS:-}" ]; then read -r -a dirs <<<"$VALIDATE_EXAMPLES_DIRS"; fi
[ ${#dirs[@]} -gt 0 ] || { log "nothing to validate"; exit 1; }

# refs DIR: the resource types of examples/resources that DIR's .tf files refer to
# (`gradual_rollout.ingress`) without declaring them: a data source's snippet reads the resource
# of the resource's snippet, so it is validated together with that snippet.
refs() {
  local d=$1 t
  for t in $(grep -hoE '(^|[^.a-z0-9_])gradual_[a-z_]+\.[a-z_]' "$d"/*.tf | grep -oE 'gradual_[a-z_]+' | sort -u); do
    [ -d "examples/resources/$t" ] || continue
    grep -qs "^resource \"$t\"" "$d"/*.tf || echo "$t"
  done
}

# others DIR: the providers other than gradual that DIR's configuration uses (by the prefix of
# its provider blocks and resource, data source and ephemeral resource types).
others() {
  grep -hoE '^(provider|resource|data|ephemeral) "[a-z0-9]+' "$1"/*.tf | sed 's/.*"//' | grep -vx gradual | sort -u || true
}

# Without a registry (as on this project's machines), a directory that needs another provider
# cannot be initialized: it is reported as not validated, and fails the run only with
# VALIDATE_EXAMPLES_STRICT=1 (set where the registries are reachable, as in GitHub Actions).
failed=()
not_validated=()
for entry in "${clis[@]}"; do
  cli_name=${entry%%:*} cli=${entry#*:}
  log "$cli_name ($("$cli" version | head -n 1)): ${#dirs[@]} directories"
  for d in "${dirs[@]}"; do
    copy="$work/$cli_name/$d"
    mkdir -p "$copy"
    # A module's example takes the module by its local path (source = "../.."): copy the module.
    case "$d" in modules/*/examples/*) m=${d%%/examples/*}; mkdir -p "$work/$cli_name/$m" && cp -r "$m/." "$work/$cli_name/$m/" ;; esac
    cp -r "$d/." "$copy/"
    rm -rf "$copy/.terraform" "$copy/.terraform.lock.hcl" "$copy/tests"
    for t in $(refs "$d"); do
      for f in "examples/resources/$t"/*; do
        base=$(basename "$f")
        case "$base" in
          *.tf) cp "$f" "$copy/zz_${t}_$base" ;;
          *) [ -e "$copy/$base" ] || cp -r "$f" "$copy/$base" ;;
        esac
      done
    done
    if ! grep -qs 'required_providers' "$copy"/*.tf; then
      printf 'terraform {\n  required_providers {\n    gradual = { source = "gradual-dev/gradual" }\n  }\n}\n' >"$copy/zz_validate_providers.tf"
    fi
    if ! out=$("$cli" -chdir="$copy" init -backend=false -input=false -no-color 2>&1); then
      other=$(others "$copy" | tr '\n' ' ')
      if [ -n "$other" ] && [ -z "${VALIDATE_EXAMPLES_STRICT:-}" ] &&
        printf '%s\n' "$out" | grep -q 'Failed to query available provider packages\|Failed to install provider\|Failed to resolve provider packages'; then
        log "$cli_name: $d NOT VALIDATED: it needs the providers ${other% } too, which cannot be installed here (no registry); its code parsed (fmt -check)"
        "$cli" fmt -check -diff "$copy" >/dev/null || { log "$cli_name: $d does not parse or is not formatted"; failed+=("$cli_name:$d"); }
        not_validated+=("$cli_name:$d")
        continue
      fi
    elif out=$("$cli" -chdir="$copy" validate -no-color 2>&1); then
      continue
    fi
    log "$cli_name: $d FAILED"
    printf '%s\n' "$out" | sed 's/^/    /' >&2
    failed+=("$cli_name:$d")
  done
done

log "Terraform code blocks of the README, ARCHITECTURE, CONTRIBUTING, docs/, templates/ and the modules' READMEs"
if ! (cd tools && go test -count=1 ./hclblocks/ >/dev/null && go run ./hclblocks "$root/README.md" "$root/docs" "$root/templates" "$root/modules" "$root/ARCHITECTURE.md" "$root/CONTRIBUTING.md"); then failed+=("code blocks"); fi

log "tfplugindocs validate"
if ! out=$(cd tools && go tool tfplugindocs validate --provider-dir .. --provider-name gradual 2>&1); then
  printf '%s\n' "$out" | grep -v '\[DEBUG\]' | sed 's/^/    /' >&2
  failed+=("tfplugindocs validate")
fi

if [ ${#failed[@]} -gt 0 ]; then
  log "FAILED: ${failed[*]}"
  exit 1
fi
[ ${#not_validated[@]} -eq 0 ] || log "not validated (other providers not installable here): ${not_validated[*]}"
log "examples and modules validate on: ${clis[*]%%:*}; code blocks parse; tfplugindocs validate passed"
