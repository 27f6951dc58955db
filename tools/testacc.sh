#!/usr/bin/env bash
# Acceptance tests against real local fleets: builds the toolchain if needed, starts one test bed
# (a management cluster and three workload clusters) per CLI, and runs the acceptance tests on
# OpenTofu and, when `terraform` is on PATH, on Terraform, the two side by side (each on its own
# fleet). Each lane then goes on with what follows on its own, for its CLI: delivery through Flux
# (on a Flux test bed of the lane's own) and gradual_inplace_update on the real Cluster API
# controllers (the Cluster API fleets take a lock, so one runs at a time: the Terraform lane
# takes it first); the OpenTofu lane also runs the modules' tests. A third lane, beside them,
# runs the Cluster API controllers' own test, the plan line budget on a scale bed (both CLIs side
# by side), the fleetless checks named in GRADUAL_TESTACC_CHECKS, and the bridge for joiners on
# the real Cluster API controllers (both CLIs, one after the other).
# Every fleet is torn down on exit, whatever happened.
#
#   GRADUAL_TESTACC_SERIAL=1 tools/testacc.sh   # one CLI after the other, on one fleet
#
# Why side by side: the suite mostly waits (rollouts verified, Leases expiring, CLIs starting), so
# two lanes on 2 cores take far less than twice one lane; the tests that check what the provider
# does to the fleet rather than how a CLI drives it run on one lane only (acctest.OnOneLane).
# Within a lane, packages run one at a
# time (-p 1): they share the lane's fleet and change its clusters (labels, readiness, joins); run
# side by side, one package's change would show up in another's plan.
set -euo pipefail
cd "$(dirname "$0")/.."
# stage MESSAGE: what starts now, with the time of day, so that a run's log shows where its time
# went.
stage() { echo "[testacc $(date +%T)] $*" >&2; }
env_file=$(tools/toolchain.sh | tail -n 1)
# shellcheck disable=SC1090
source "$env_file"
# The Cluster API controllers too (built once, cached), before the lanes that use them start.
env_file=$(tools/toolchain.sh cluster-api | tail -n 1)
# shellcheck disable=SC1090
source "$env_file"
# And Flux's source-controller and kustomize-controller, for the Flux stage (cached likewise).
env_file=$(tools/toolchain.sh flux | tail -n 1)
# shellcheck disable=SC1090
source "$env_file"

work=$(mktemp -d "${TMPDIR:-/tmp}/gradual-testacc.XXXXXX")
testbed="$work/gradual-testbed"
go build -o "$testbed" ./cmd/gradual-testbed
# The scale bed and the Flux beds, started by a lane; down is a no-op until then.
fleets=("$work/scale" "$work/fleet-flux-OpenTofu" "$work/fleet-flux-Terraform")
lanes=()
cleanup() {
  for pid in "${lanes[@]}"; do kill "$pid" 2>/dev/null || true; done
  for dir in "${fleets[@]}"; do "$testbed" down --dir "$dir" >&2 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# up NAME: starts the lane fleet NAME, once more if it does not come up (it tears itself down
# then): a bed that starts while the machine is busy can miss its deadlines.
up() {
  stage "starting test bed $1"
  fleets+=("$work/$1")
  "$testbed" up --dir "$work/$1" >/dev/null && return 0
  stage "the test bed $1 did not come up: starting it once more"
  "$testbed" up --dir "$work/$1" >/dev/null
}

export TF_ACC=1 CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
# An empty CLI config, so that a missing or odd ~/.terraformrc changes nothing.
: >"$work/cli.tfrc"
export TF_CLI_CONFIG_FILE="$work/cli.tfrc"

# Every test binary is built once, here, and the provider binary the CLI-driving tests install
# once (acctest.ProviderBinaryEnv): the lanes then link and build nothing, so they do not
# compile the same packages side by side, and no test builds its own provider.
stage "building the test binaries and the provider"
# Only the packages with acceptance tests (TestAcc*, and the test bed's TestClusterAPIControllers)
# are built and run here, "directory import-path" per line; the others ran as unit tests.
packages=$(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}} {{.ImportPath}}{{end}}' ./... | while read -r dir pkg; do
  if grep -qE '^func (TestAcc|TestClusterAPIControllers\()' "$dir"/*_test.go 2>/dev/null; then echo "$dir $pkg"; fi
done)
# shellcheck disable=SC2046 # one import path per word
go test -c -o "$work/testbin/" $(awk '{print $2}' <<<"$packages") >/dev/null
go build -o "$work/provider/terraform-provider-gradual" .
export GRADUAL_PROVIDER_BINARY="$work/provider/terraform-provider-gradual"

# run_tests TIMEOUT RUN-REGEX [env assignments...]: runs the prebuilt test binary of every
# package (in its directory, as go test does), one package at a time. It prints each test's
# result and time, and a package's whole output when it fails; it fails when a package failed.
run_tests() {
  local timeout=$1 run=$2; shift 2
  local failed=0 dir pkg bin log start rc
  while read -r dir pkg; do
    bin="$work/testbin/${pkg##*/}.test"
    log=$(mktemp "$work/log.XXXXXX")
    start=$SECONDS
    rc=0
    (cd "$dir" && env "$@" "$bin" -test.count=1 -test.v -test.timeout "$timeout" -test.run "$run") >"$log" 2>&1 </dev/null || rc=$?
    grep -E '^\s*--- (PASS|FAIL)' "$log" || true
    if [ "$rc" = 0 ]; then
      echo "ok   $pkg $((SECONDS - start))s"
    else
      cat "$log"
      echo "FAIL $pkg $((SECONDS - start))s (exit $rc)"
      failed=1
    fi
    rm -f "$log"
  done <<<"$packages"
  return "$failed"
}

# run_one PACKAGE-DIR TIMEOUT RUN-REGEX [env assignments...]: one package's prebuilt test
# binary, verbose (each test's time and logs are what these runs are read for).
run_one() {
  local dir=$1 timeout=$2 run=$3; shift 3
  (cd "$dir" && env "$@" "$work/testbin/${dir##*/}.test" -test.count=1 -test.v -test.timeout "$timeout" -test.run "$run")
}

# acc CLI-NAME CLI-PATH FLEET-DIR [env assignments...]: the acceptance tests of every package.
acc() {
  local cli=$1 path=$2 fleet=$3; shift 3
  stage "acceptance tests on $cli ($("$path" version | head -n 1))"
  run_tests "${GO_TEST_TIMEOUT:-40m}" '^TestAcc' "$@" GRADUAL_TESTBED_DIR="$fleet" TF_ACC_TERRAFORM_PATH="$path"
}
tofu_env=(TF_ACC_PROVIDER_NAMESPACE=hashicorp TF_ACC_PROVIDER_HOST=registry.opentofu.org)

# bed_up DIR [flags...]: starts a test bed the lanes start late (the scale bed, the Flux bed),
# once more if it does not come up (it tears itself down then): it starts while the other lane is
# busy, and a bed that is not there would fail every test on it.
bed_up() {
  local dir=$1; shift
  "$testbed" up --dir "$dir" "$@" >/dev/null && return 0
  stage "the test bed in $dir did not come up: starting it once more"
  "$testbed" up --dir "$dir" "$@" >/dev/null
}

# scale CLI-NAME CLI-PATH [env assignments...]: the plan line budget on the scale bed.
scale() {
  local cli=$1 path=$2; shift 2
  stage "plan line budget on the scale bed, $cli"
  GRADUAL_TESTBED_SCALE_DIR="$work/scale" run_one internal/scaleacc 20m '^TestAccScale_' "$@" TF_ACC_TERRAFORM_PATH="$path"
}
# The plan line budget at a few hundred clusters (internal/scaleacc) needs a scale bed of its own:
# 360 CAPI Clusters over 3 kwok API servers, of which the test picks ~240. The two CLIs' runs go
# side by side on it: each labels the Clusters and names its resources and namespaces after a
# label of its own (scaleacc's setUp), so neither sees the other's, and the runs mostly wait on
# the bed's API servers rather than on each other.
scale_stage() {
  stage "starting the scale bed: 360 CAPI Clusters over 3 kwok API servers"
  bed_up "$work/scale" --workloads 3 --clusters 360 || return 1
  local pids=() rc=0 pid
  ( scale OpenTofu "$GRADUAL_TOFU" 2>&1 | sed -u 's/^/[scale OpenTofu] /'; exit "${PIPESTATUS[0]}" ) &
  pids+=("$!")
  if [ -n "${GRADUAL_TERRAFORM:-}" ]; then
    ( scale Terraform "$GRADUAL_TERRAFORM" 2>&1 | sed -u 's/^/[scale Terraform] /'; exit "${PIPESTATUS[0]}" ) &
    pids+=("$!")
  fi
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  "$testbed" down --dir "$work/scale" >&2 || true
  return "$rc"
}

# The real Cluster API controllers (core, kubeadm bootstrap and control plane, CAPD in memory, the
# test extension): CAPI provisions a cluster itself and updates a Machine in place. The test starts
# its own management cluster with the controllers (CAPD binds fixed ports: the tests take
# /tmp/gradual-capi.lock, so one such fleet runs at a time).
capi_controllers() {
  stage "Cluster API controllers"
  # The lock the in-place tests take (internal/resources/inplaceupdate), so that the two never
  # run their fleets at once.
  (
    flock 9
    run_one internal/testbed 15m '^TestClusterAPIControllers$' GRADUAL_TEST_CLUSTER_API=1
  ) 9>/tmp/gradual-capi.lock
}

# gradual_inplace_update against those controllers: the preview and CAPI's choice agree (a
# covered version bump done in place, same Machine, for a MachineDeployment and a three-replica
# KubeadmControlPlane; a cluster built from a ClusterClass upgraded through its topology, on both
# CLIs, and three such clusters as a fleet in waves with a canary), an uncovered change refused at
# plan, two extensions for one hook refused at plan as Cluster API refuses them, a stale
# plan stopping the apply, an extension registered only by Service (the managers reach it through
# the test bed's stand-in for cluster DNS) and a MachineHealthCheck remediating a machine during its
# in-place update (those two on one lane). One Cluster API fleet per CLI run, started by the tests. Verbose (-v):
# each test's time and what it logs (the fleet's start, Machine UIDs before and after) are the
# figures these runs are read for.
capi_inplace() {
  local cli=$1 path=$2; shift 2
  stage "gradual_inplace_update on the real Cluster API controllers, $cli"
  run_one internal/resources/inplaceupdate 20m '^TestAccCAPIInPlace_' "$@" TF_ACC_TERRAFORM_PATH="$path" GRADUAL_TEST_CLUSTER_API=1
}

# follow_joins' bridge: Cluster API's ClusterResourceSet controller gives joiners the modules (the
# rollout's revision) between applies, on a fleet each test starts (about a minute each), the
# TestAccCAPIBridge_flux* ones with Flux's controllers beside Cluster API's (the assignment or
# rollout delivers through Flux; the bridge is the same). They need no CLI lane's fleet, so
# `make test` runs them in the third lane, for both CLIs.
capi_bridges() {
  local cli=$1 path=$2; shift 2
  stage "gradual_module_assignment's bridge for joiners on the real Cluster API controllers, $cli"
  run_one internal/resources/moduleassignment 10m '^TestAccCAPIBridge_' "$@" TF_ACC_TERRAFORM_PATH="$path" GRADUAL_TEST_CLUSTER_API=1 || return 1
  stage "gradual_rollout's bridge for joiners on the real Cluster API controllers, $cli"
  run_one internal/resources/rollout 10m '^TestAccCAPIBridge_' "$@" TF_ACC_TERRAFORM_PATH="$path" GRADUAL_TEST_CLUSTER_API=1
}

# Delivery through Flux (delivery.flux of gradual_rollout and gradual_module_assignment) on a test
# bed of its own started with --flux: Flux's real source-controller and kustomize-controller
# against the management cluster, and an OCI registry. The Flux tests (TestAccRollout_flux*:
# delivery, the run with credentials that grant nothing on the Clusters' Secrets, a registry with
# credentials and a CA of its own that the test serves, one requiring client certificates,
# per-cluster values, health checks and the check Job through Flux, a Secret of
# sensitive_manifests SOPS-encrypted for an age key kustomize-controller decrypts with, the fault
# tests, moving a rollout from direct delivery to Flux and back (TestAccRollout_fluxEngineMove*),
# and the contract tests written once for both engines, TestAccRollout_fluxContract_*: a saved
# plan then a relabel, a second state, a kill mid-apply, one owner per object, a revision
# admission refuses, a revision that installs a fail-closed webhook, a webhook down 20 s, the Lease held by another apply or a paused holder, the
# management cluster paused as a revision fails, a cluster's records deleted, a second state with
# another record namespace; about 10 minutes on each CLI's lane, hence the 20-minute bound;
# TestAccModuleAssignment_flux*: two ordered modules and a join, per-cluster values, the same fault
# tests, and moving an assignment from direct delivery to Flux and back, module by module, on one
# lane (TestAccModuleAssignment_fluxEngineMove*)) skip on the other fleets; here
# they run on each CLI on a Flux bed of that CLI's own (the tests change the three clusters of
# their fleet, so two CLIs never share one), so that the two CLIs' runs go in two lanes side by
# side; the tests marked for one lane run on one CLI each.
#
# flux_acc CLI-NAME CLI-PATH LANE [env assignments...]: LANE is GRADUAL_ACC_LANE=i/n, or
# GRADUAL_ACC_LANE= for every test.
flux_acc() {
  local cli=$1 path=$2 lane=$3; shift 3
  local dir="$work/fleet-flux-$cli" rc=0
  stage "delivery through Flux, $cli: starting a test bed with Flux's controllers"
  bed_up "$dir" --flux || return 1
  run_one internal/resources/rollout 20m '^TestAccRollout_flux' "$@" GRADUAL_TESTBED_DIR="$dir" \
    TF_ACC_TERRAFORM_PATH="$path" "$lane" || rc=1
  run_one internal/resources/moduleassignment 10m '^TestAccModuleAssignment_flux' "$@" \
    GRADUAL_TESTBED_DIR="$dir" TF_ACC_TERRAFORM_PATH="$path" "$lane" || rc=1
  "$testbed" down --dir "$dir" >&2 || true
  return "$rc"
}

# checks: the make targets named in GRADUAL_TESTACC_CHECKS (`make test` names the fleetless
# checks: validate-examples, modules-mock, docs-check), one after the other. They need no fleet
# and mostly wait on CLIs starting, so `make test` runs them here, beside the lanes, rather than
# before and after them; each works in a scratch directory of its own.
checks() {
  [ -n "${GRADUAL_TESTACC_CHECKS:-}" ] || return 0
  stage "checks beside the lanes: $GRADUAL_TESTACC_CHECKS"
  # shellcheck disable=SC2086 # a list of make targets
  make --no-print-directory $GRADUAL_TESTACC_CHECKS
}

if [ -n "${GRADUAL_TESTACC_SERIAL:-}" ] || [ -z "${GRADUAL_TERRAFORM:-}" ]; then
  checks
  [ -n "${GRADUAL_TERRAFORM:-}" ] || stage "terraform not on PATH: Terraform run skipped"
  up fleet
  acc OpenTofu "$GRADUAL_TOFU" "$work/fleet" "${tofu_env[@]}"
  [ -z "${GRADUAL_TERRAFORM:-}" ] || acc Terraform "$GRADUAL_TERRAFORM" "$work/fleet"
  GRADUAL_TESTBED_DIR="$work/fleet" tools/moduletest.sh
  "$testbed" down --dir "$work/fleet" >&2 || true
  scale_stage
  capi_controllers
  capi_inplace OpenTofu "$GRADUAL_TOFU" "${tofu_env[@]}"
  capi_bridges OpenTofu "$GRADUAL_TOFU" "${tofu_env[@]}"
  if [ -n "${GRADUAL_TERRAFORM:-}" ]; then
    capi_inplace Terraform "$GRADUAL_TERRAFORM"
    capi_bridges Terraform "$GRADUAL_TERRAFORM"
  fi
  if [ -n "${GRADUAL_TERRAFORM:-}" ]; then
    flux_acc OpenTofu "$GRADUAL_TOFU" GRADUAL_ACC_LANE=0/2 "${tofu_env[@]}"
    flux_acc Terraform "$GRADUAL_TERRAFORM" GRADUAL_ACC_LANE=1/2
  else
    flux_acc OpenTofu "$GRADUAL_TOFU" GRADUAL_ACC_LANE= "${tofu_env[@]}"
  fi
else
  # Fleets start one after the other: side by side they race for free ports and CPU.
  up fleet-tofu
  up fleet-terraform
  # lane NAME COMMAND...: runs COMMAND (a function of this script) in the background with its
  # output prefixed by [NAME], and records its exit code.
  lane() {
    local name=$1; shift
    ( set +e; "$@" 2>&1 | sed -u "s/^/[$name] /" | tee "$work/$name.log"; echo "${PIPESTATUS[0]}" >"$work/$name.rc" ) &
    lanes+=("$!")
  }
  # The tests marked acctest.OnOneLane (what the provider does to the fleet, not how a CLI drives
  # it) are spread over the two lanes; the CLI-specific ones run on both. A lane's fleet goes
  # down as soon as its acceptance tests are done, before the lane's next stage starts. After
  # that each lane runs its CLI's Flux tests on a Flux bed of its own and its CLI's Cluster API
  # stage; the Cluster API fleets run one at a time (the lock), so the Terraform lane takes its
  # Cluster API stage first and the OpenTofu lane its Flux stage first, and the scale bed (both
  # CLIs) ends the OpenTofu lane.
  tofu_lane() {
    local rc=0
    acc OpenTofu "$GRADUAL_TOFU" "$work/fleet-tofu" "${tofu_env[@]}" GRADUAL_ACC_LANE=0/2 &&
      GRADUAL_TESTBED_DIR="$work/fleet-tofu" tools/moduletest.sh || rc=1
    "$testbed" down --dir "$work/fleet-tofu" >&2 || true
    flux_acc OpenTofu "$GRADUAL_TOFU" GRADUAL_ACC_LANE=0/2 "${tofu_env[@]}" || rc=1
    capi_inplace OpenTofu "$GRADUAL_TOFU" "${tofu_env[@]}" GRADUAL_ACC_LANE=0/2 || rc=1
    return "$rc"
  }
  terraform_lane() {
    local rc=0
    acc Terraform "$GRADUAL_TERRAFORM" "$work/fleet-terraform" GRADUAL_ACC_LANE=1/2 || rc=1
    "$testbed" down --dir "$work/fleet-terraform" >&2 || true
    capi_inplace Terraform "$GRADUAL_TERRAFORM" GRADUAL_ACC_LANE=1/2 || rc=1
    flux_acc Terraform "$GRADUAL_TERRAFORM" GRADUAL_ACC_LANE=1/2 || rc=1
    return "$rc"
  }
  # What needs neither CLI lane's fleet: the Cluster API controllers' own test, the plan line
  # budget on the scale bed (both CLIs, side by side), the fleetless checks, and the bridge's
  # tests on both CLIs (each test starts a Cluster API fleet of its own), one after the other in
  # a third lane beside the lanes' acceptance tests, not after them. The two CLI lanes are the
  # run's critical path (each about 40 minutes: acceptance, Flux, Cluster API in place); this
  # lane is done within their first half. The Cluster API fleets run one at a time (the lock),
  # and the lanes' in-place stages come after this lane's fleets, or wait for the lock.
  beside() {
    local rc=0
    capi_controllers || rc=1
    scale_stage || rc=1
    checks || rc=1
    capi_bridges OpenTofu "$GRADUAL_TOFU" "${tofu_env[@]}" || rc=1
    capi_bridges Terraform "$GRADUAL_TERRAFORM" || rc=1
    return "$rc"
  }
  lane OpenTofu tofu_lane
  lane Terraform terraform_lane
  lane Beside beside
  wait "${lanes[@]}" || true
  lanes=()
  failed=0
  for name in OpenTofu Terraform Beside; do
    rc=$(cat "$work/$name.rc" 2>/dev/null || echo 1)
    stage "$name lane exit code $rc"
    [ "$rc" = 0 ] || failed=1
  done
  # What failed, last: a CI log is often read from its tail only.
  if [ "$failed" != 0 ]; then
    stage "what failed"
    for name in OpenTofu Terraform Beside; do
      awk -f tools/failures.awk "$work/$name.log" 2>/dev/null | tail -n 80 >&2 || true
    done
  fi
  # The lane logs are kept (the last three runs) where a clean clone's run does not remove them.
  keep="${XDG_CACHE_HOME:-$HOME/.cache}/terraform-provider-gradual/testacc-logs"
  if mkdir -p "$keep/$(date -u +%Y%m%dT%H%M%S)" 2>/dev/null; then
    cp "$work"/*.log "$keep/$(ls -1 "$keep" | tail -n 1)/" 2>/dev/null || true
    ls -1d "$keep"/* | head -n -3 | xargs -r rm -rf
    stage "lane logs kept in $keep/$(ls -1 "$keep" | tail -n 1)"
  fi
  [ "$failed" = 0 ] || exit 1
fi
