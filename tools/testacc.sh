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

# The real Cluster API controllers (core, kubeadm bootstrap and control plane, CAPD in memory, the
# test extension): CAPI provisions a cluster itself and updates a Machine in place. The test starts
# its own management cluster with the controllers (CAPD binds fixed ports: one such fleet at a time).
echo "[testacc] Cluster API controllers" >&2
env_file=$(tools/toolchain.sh cluster-api | tail -n 1)
# shellcheck disable=SC1090
source "$env_file"
GRADUAL_TEST_CLUSTER_API=1 go test -count=1 -timeout 15m -run '^TestClusterAPIControllers$' ./internal/testbed/

# gradual_inplace_update against those controllers, on both CLIs: the preview and CAPI's choice
# agree (a covered version bump done in place, same Machine), an uncovered change refused at plan,
# a stale plan stopping the apply. One Cluster API fleet per CLI run, started by the tests (they
# hold /tmp/gradual-capi.lock while it runs).
capi_acc() {
  local cli=$1 path=$2; shift 2
  echo "[testacc] gradual_inplace_update on the real Cluster API controllers, $cli" >&2
  TF_ACC_TERRAFORM_PATH="$path" GRADUAL_TEST_CLUSTER_API=1 "$@" \
    go test -count=1 -timeout 20m -run '^TestAccCAPIInPlace_' ./internal/resources/inplaceupdate/
}
capi_acc OpenTofu "$GRADUAL_TOFU" env TF_ACC_PROVIDER_NAMESPACE=hashicorp TF_ACC_PROVIDER_HOST=registry.opentofu.org
if [ -n "${GRADUAL_TERRAFORM:-}" ]; then
  capi_acc Terraform "$GRADUAL_TERRAFORM" env
fi
