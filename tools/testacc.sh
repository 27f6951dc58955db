#!/usr/bin/env bash
# Acceptance tests against a real local fleet: builds the toolchain if needed, starts one test bed
# (a management cluster and three workload clusters) for every package, and runs the acceptance
# tests on OpenTofu and, when `terraform` is on PATH, on Terraform. The fleet is torn down on exit,
# whatever happened.
set -euo pipefail
cd "$(dirname "$0")/.."
env_file=$(tools/toolchain.sh | tail -n 1)
# shellcheck disable=SC1090
source "$env_file"

work=$(mktemp -d "${TMPDIR:-/tmp}/gradual-testacc.XXXXXX")
testbed="$work/gradual-testbed"
go build -o "$testbed" ./cmd/gradual-testbed
cleanup() {
  "$testbed" down --dir "$work/fleet" >&2 || true
  if [ -d "$work/scale" ]; then "$testbed" down --dir "$work/scale" >&2 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "[testacc] starting the test bed" >&2
"$testbed" up --dir "$work/fleet" >/dev/null

export GRADUAL_TESTBED_DIR="$work/fleet" TF_ACC=1 CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
# An empty CLI config, so that a missing or odd ~/.terraformrc changes nothing.
: >"$work/cli.tfrc"
export TF_CLI_CONFIG_FILE="$work/cli.tfrc"

run() {
  local cli=$1 path=$2; shift 2
  echo "[testacc] acceptance tests on $cli ($("$path" version | head -n 1))" >&2
  # -p 1: the packages share one fleet and change its clusters (labels, readiness, joins);
  # run side by side, one package's change would show up in another's plan.
  TF_ACC_TERRAFORM_PATH="$path" "$@" go test -p 1 -count=1 -timeout "${GO_TEST_TIMEOUT:-40m}" -run '^TestAcc' ./...
}
run OpenTofu "$GRADUAL_TOFU" env TF_ACC_PROVIDER_NAMESPACE=hashicorp TF_ACC_PROVIDER_HOST=registry.opentofu.org
if [ -n "${GRADUAL_TERRAFORM:-}" ]; then
  run Terraform "$GRADUAL_TERRAFORM" env
else
  echo "[testacc] terraform not on PATH: Terraform run skipped" >&2
fi

# The modules' tests (`tofu test`, and `terraform test` when present) on the same fleet.
tools/moduletest.sh

# The plan line budget at a few hundred clusters (internal/scaleacc) needs a scale bed of its own:
# 450 CAPI Clusters over 3 kwok API servers, of which the test picks ~300. The small fleet goes
# first, so that the two never hold memory together.
"$testbed" down --dir "$work/fleet" >&2
echo "[testacc] starting the scale bed: 450 CAPI Clusters over 3 kwok API servers" >&2
"$testbed" up --dir "$work/scale" --workloads 3 --clusters 450 >/dev/null
export GRADUAL_TESTBED_SCALE_DIR="$work/scale"
scale() {
  local cli=$1 path=$2; shift 2
  echo "[testacc] plan line budget on the scale bed, $cli" >&2
  TF_ACC_TERRAFORM_PATH="$path" "$@" go test -count=1 -timeout 20m -run '^TestAccScale_' ./internal/scaleacc/
}
scale OpenTofu "$GRADUAL_TOFU" env
if [ -n "${GRADUAL_TERRAFORM:-}" ]; then scale Terraform "$GRADUAL_TERRAFORM" env; fi
"$testbed" down --dir "$work/scale" >&2
unset GRADUAL_TESTBED_SCALE_DIR

# The real Cluster API controllers (core, kubeadm bootstrap and control plane, CAPD in memory, the
# test extension): CAPI provisions a cluster itself and updates a Machine in place. The test starts
# its own management cluster with the controllers (CAPD binds fixed ports: one such fleet at a time).
echo "[testacc] Cluster API controllers" >&2
env_file=$(tools/toolchain.sh cluster-api | tail -n 1)
# shellcheck disable=SC1090
source "$env_file"
GRADUAL_TEST_CLUSTER_API=1 go test -count=1 -timeout 15m -run '^TestClusterAPIControllers$' ./internal/testbed/
