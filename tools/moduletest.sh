#!/usr/bin/env bash
# Module tests: runs `tofu test` (and `terraform test` when GRADUAL_TERRAFORM is set) in every
# modules/* directory, failing when any run fails. Two kinds of test files:
#
#   tools/moduletest.sh --mock                              # tests/*_mock.tftest.hcl: no fleet, seconds
#   GRADUAL_TESTBED_DIR=/tmp/fleet tools/moduletest.sh      # the others, after: gradual-testbed up --dir /tmp/fleet
#
# The *_mock files mock the provider (`mock_provider "gradual" {}`): they check each module's
# wiring and validations at plan time without a cluster (`make test` runs them right after the
# unit tests). The CLI still starts the real provider for its schema and validators, so both kinds
# install it the same way. OpenTofu also reads tests/*.tofutest.hcl (Terraform does not): for what
# only OpenTofu's test command can do.
#
# It builds the provider and installs it from a local filesystem mirror (a CLI config of its own):
# `init` with dev_overrides still asks the registry for gradual-dev/gradual and fails offline, and
# a mirror is also what a user's `init` does. For modules/inplace-kubernetes-upgrade it writes a
# MachineDeployment with two Machines on workload staging-eu-1 (as the test bed's Go API does) and
# starts the reference update extension (cmd/gradual-update-extension); both are removed on exit.
# Each module is copied to a scratch directory, so nothing is written into modules/.
# MODULETEST_MODULES="inplace-kubernetes-upgrade ..." runs those modules only.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mock=
if [ "${1:-}" = --mock ]; then mock=1; fi
[ -n "$mock" ] || : "${GRADUAL_TESTBED_DIR:?set GRADUAL_TESTBED_DIR to the directory of a running fleet (gradual-testbed up --dir DIR), or pass --mock}"
if [ -z "${GRADUAL_TOFU:-}" ] || [ -z "${GRADUAL_KUBECTL:-}" ]; then
  env_file=$(tools/toolchain.sh | tail -n 1)
  # shellcheck disable=SC1090
  source "$env_file"
fi
kubeconfig=${GRADUAL_TESTBED_DIR:-}/management.kubeconfig
[ -n "$mock" ] || [ -f "$kubeconfig" ] || { echo "[moduletest] no $kubeconfig: is the fleet up?" >&2; exit 1; }
namespace=fleet
inplace_cluster=staging-eu-1
log() { echo "[moduletest] $*" >&2; }
kc() { "$GRADUAL_KUBECTL" --kubeconfig "$kubeconfig" "$@"; }

work=$(mktemp -d "${TMPDIR:-/tmp}/gradual-moduletest.XXXXXX")
run_id=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
ext_pid=
machine_deployments=()
cleanup() {
  if [ -n "$ext_pid" ]; then kill "$ext_pid" 2>/dev/null || true; wait "$ext_pid" 2>/dev/null || true; fi
  for md in "${machine_deployments[@]}"; do
    kc -n "$namespace" delete machines.cluster.x-k8s.io,gradualmachines.infrastructure.gradual.dev,kubeadmconfigs.bootstrap.cluster.x-k8s.io \
      -l "cluster.x-k8s.io/deployment-name=$md" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    kc -n "$namespace" delete "machinedeployments.cluster.x-k8s.io/$md" "gradualmachinetemplates.infrastructure.gradual.dev/$md" \
      "kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io/$md" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

log "building the provider into a filesystem mirror"
# The mirror holds this build only, under the version the modules require: the lower bound of
# the constraint in modules/*/versions.tf (">= 0.3.0, < 0.4.0" gives 0.3.0). Modules that require
# different versions fail here; tools/validate-examples.sh checks that the README, the modules'
# install instructions and the CHANGELOG's latest release name the same one.
constraints=$(sed -n 's/^ *version *= *"\(.*\)".*/\1/p' "$root"/modules/*/versions.tf | sort -u)
[ "$(printf '%s\n' "$constraints" | grep -c .)" -eq 1 ] || { log "the modules require different provider versions: $(echo $constraints)"; exit 1; }
version=$(printf '%s\n' "$constraints" | sed -n 's/.*>= *\([0-9][0-9.]*\).*/\1/p')
[ -n "$version" ] || { log "no '>= X.Y.Z' in the modules' provider constraint '$constraints'"; exit 1; }
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

# test_files DIR CLI_NAME: the test files this run takes from DIR/tests, as -filter flags: the
# *_mock files with --mock, the others without; .tofutest.hcl files for OpenTofu only.
test_files() {
  local dir=$1 cli_name=$2 f base
  for f in "$dir"/tests/*.tftest.hcl "$dir"/tests/*.tofutest.hcl; do
    [ -f "$f" ] || continue
    base=$(basename "$f")
    case "$base" in *.tofutest.hcl) [ "$cli_name" = OpenTofu ] || continue ;; esac
    case "$base" in
      *_mock.tftest.hcl | *_mock.tofutest.hcl) [ -n "$mock" ] || continue ;;
      *) [ -z "$mock" ] || continue ;;
    esac
    printf -- '-filter=tests/%s\n' "$base"
  done
}

clis=("OpenTofu:$GRADUAL_TOFU")
[ -n "${GRADUAL_TERRAFORM:-}" ] && clis+=("Terraform:$GRADUAL_TERRAFORM")
[ -n "${GRADUAL_TERRAFORM:-}" ] || log "GRADUAL_TERRAFORM not set: terraform test skipped"

if [ -n "$mock" ]; then
  failed=()
  for entry in "${clis[@]}"; do
    cli_name=${entry%%:*} cli=${entry#*:}
    short=$(echo "$cli_name" | tr 'A-Z' 'a-z' | head -c 4)
    for module_dir in "$root"/modules/*/; do
      module=$(basename "$module_dir")
      [ -z "${MODULETEST_MODULES:-}" ] || [[ " $MODULETEST_MODULES " == *" $module "* ]] || continue
      dir="$work/$short/$module"
      mkdir -p "$(dirname "$dir")"
      cp -r "$module_dir" "$dir"
      rm -rf "$dir/.terraform" "$dir/.terraform.lock.hcl"
      mapfile -t filters < <(test_files "$dir" "$cli_name")
      [ ${#filters[@]} -gt 0 ] || continue
      log "$cli_name: $module, mocked provider (${filters[*]#-filter=})"
      if "$cli" -chdir="$dir" init -no-color -input=false >"$dir/init.log" 2>&1 &&
        "$cli" -chdir="$dir" test -no-color "${filters[@]}" 2>&1 | sed "s/^/    /" >&2; then
        :
      else
        [ -s "$dir/init.log" ] && grep -q Error "$dir/init.log" && sed 's/^/    /' "$dir/init.log" >&2
        failed+=("$cli_name $module")
      fi
    done
  done
  if [ ${#failed[@]} -gt 0 ]; then
    log "FAILED (mocked provider): ${failed[*]}"
    exit 1
  fi
  log "all mocked-provider module tests passed on: ${clis[*]%%:*}"
  exit 0
fi

export KUBE_CONFIG_PATH="$kubeconfig"
log "starting the reference update extension"
go build -o "$work/gradual-update-extension" ./cmd/gradual-update-extension
"$work/gradual-update-extension" --kubeconfig "$kubeconfig" --ca-file "$work/ext-ca.pem" --delay 1s \
  >"$work/ext.url" 2>"$work/ext.log" &
ext_pid=$!
for _ in $(seq 100); do [ -s "$work/ext.url" ] && break; sleep 0.1; done
ext_url=$(head -n 1 "$work/ext.url")
[ -n "$ext_url" ] || { cat "$work/ext.log" >&2; log "the update extension did not start"; exit 1; }

# machine_deployment NAME: a MachineDeployment of 2 Machines on kwok-node-0/1 of $inplace_cluster,
# spec.version v1.36.3, with status as CAPI's controllers would write it (none run in the test
# bed) — made by the test bed itself, as the Go acceptance tests and make demo do.
testbed=$work/gradual-testbed
go build -o "$testbed" ./cmd/gradual-testbed
machine_deployment() {
  local md=$1
  machine_deployments+=("$md")
  "$testbed" machines --dir "$GRADUAL_TESTBED_DIR" "$inplace_cluster" "$md" 2 v1.36.3 >/dev/null
}

failed=()
n=0
for entry in "${clis[@]}"; do
  cli_name=${entry%%:*} cli=${entry#*:}
  short=$(echo "$cli_name" | tr 'A-Z' 'a-z' | head -c 4)
  id="$run_id-$short"
  n=$((n + 1))
  for module_dir in "$root"/modules/*/; do
    module=$(basename "$module_dir")
    [ -d "$module_dir/tests" ] || continue
    [ -z "${MODULETEST_MODULES:-}" ] || [[ " $MODULETEST_MODULES " == *" $module "* ]] || continue
    dir="$work/$short/$module"
    mkdir -p "$(dirname "$dir")"
    cp -r "$module_dir" "$dir"
    rm -rf "$dir/.terraform" "$dir/.terraform.lock.hcl"
    vars="$dir/tests/run.tfvars"
    printf 'run_id = "%s"\n' "$id" >"$vars"
    if [ "$module" = inplace-kubernetes-upgrade ]; then
      md="mt-$id-md"
      machine_deployment "$md"
      cat >>"$vars" <<VARS
cluster            = "$inplace_cluster"
machine_deployment = "$md"
target_version     = "v1.37.$n"
extension_url      = "$ext_url"
extension_ca       = <<EOT
$(cat "$work/ext-ca.pem")
EOT
VARS
    fi
    mapfile -t filters < <(test_files "$dir" "$cli_name")
    [ ${#filters[@]} -gt 0 ] || continue
    log "$cli_name: $module ($("$cli" version | head -n 1))"
    if "$cli" -chdir="$dir" init -no-color -input=false >"$dir/init.log" 2>&1 &&
      "$cli" -chdir="$dir" test -no-color -var-file="$vars" "${filters[@]}" 2>&1 | sed "s/^/    /" >&2; then
      :
    else
      [ -s "$dir/init.log" ] && grep -q Error "$dir/init.log" && sed 's/^/    /' "$dir/init.log" >&2
      failed+=("$cli_name $module")
    fi
  done
done

if [ ${#failed[@]} -gt 0 ]; then
  log "FAILED: ${failed[*]}"
  exit 1
fi
log "all module tests passed on: ${clis[*]%%:*}"
