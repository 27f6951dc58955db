#!/usr/bin/env bash
# `make demo`: the main job on a local fleet. Builds the toolchain (cached), starts a management
# cluster and three workload clusters, builds the provider, and runs examples/quickstart with
# OpenTofu (and Terraform when on PATH), narrating each step. KEEP=1 keeps the fleet.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

say "Building the toolchain (cached after the first run)"
env_file=$(tools/toolchain.sh | tail -n 1)
# shellcheck disable=SC1090
source "$env_file"

work=$(mktemp -d "${TMPDIR:-/tmp}/gradual-demo.XXXXXX")
fleet_dir=${GRADUAL_DEMO_DIR:-$work/fleet}
go build -o "$work/gradual-testbed" ./cmd/gradual-testbed
finish() {
  if [ "${KEEP:-}" = 1 ]; then
    say "KEEP=1: the fleet stays up"
    echo "  management kubeconfig: $fleet_dir/management.kubeconfig"
    echo "  kubectl --kubeconfig $fleet_dir/management.kubeconfig get clusters -A"
    echo "  stop it with: $work/gradual-testbed down --dir $fleet_dir"
  else
    say "Tearing the fleet down"
    "$work/gradual-testbed" down --dir "$fleet_dir" >&2 || true
    rm -rf "$work"
  fi
}
trap finish EXIT

say "Starting a local fleet: a management cluster with Cluster API objects and three workload clusters"
kubeconfig=$("$work/gradual-testbed" up --dir "$fleet_dir" | tail -n 1)
"$work/gradual-testbed" status --dir "$fleet_dir"

say "Building the provider and pointing the CLIs at it (dev_overrides)"
go build -o "$work/plugins/terraform-provider-gradual" .
cat >"$work/cli.tfrc" <<RC
provider_installation {
  dev_overrides {
    "gradual-dev/gradual"                       = "$work/plugins"
    "registry.terraform.io/gradual-dev/gradual" = "$work/plugins"
    "registry.opentofu.org/gradual-dev/gradual" = "$work/plugins"
  }
  direct {}
}
RC
export TF_CLI_CONFIG_FILE="$work/cli.tfrc" CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1

clis=("$GRADUAL_TOFU")
[ -n "${GRADUAL_TERRAFORM:-}" ] && clis+=("$GRADUAL_TERRAFORM")
for cli in "${clis[@]}"; do
  name=$("$cli" version | head -n 1)
  dir="$work/quickstart-$(basename "$cli")"
  cp -r "$root/examples/quickstart" "$dir"
  say "[$name] Step 1: the fleet as the provider sees it — eligible clusters and why others would be skipped"
  "$cli" -chdir="$dir" apply -auto-approve -var "kubeconfig_path=$kubeconfig" -compact-warnings 2>&1 | sed 's/^/    /'

  say "[$name] Step 2: a cluster's control plane goes down — the next plan says it would be skipped"
  "$work/gradual-testbed" set-ready --dir "$fleet_dir" prod-us-1 false >/dev/null
  "$cli" -chdir="$dir" apply -auto-approve -var "kubeconfig_path=$kubeconfig" -compact-warnings 2>&1 | sed -n '/Outputs:/,$p' | sed 's/^/    /'
  "$work/gradual-testbed" set-ready --dir "$fleet_dir" prod-us-1 true >/dev/null
done

say "Summary"
"$work/gradual-testbed" status --dir "$fleet_dir"
