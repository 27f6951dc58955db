#!/usr/bin/env bash
# The end-to-end half of `make bench`: builds the toolchain if needed (kubectl included), the
# provider, cmd/gradual-testbed and cmd/gradual-bench, starts a scale bed, measures, and tears the
# bed down on exit, whatever happened.
#
# The curve (default): a management cluster and BENCH_SERVERS (default 4) kwok API servers
# presenting as many CAPI Clusters as the largest of BENCH_SIZES (default 4,16,64,256,1000), the
# last BENCH_SOLO (default 1) of those servers serving one Cluster each; at each size one
# 20-object revision rolled out by `tofu apply` of a gradual_rollout: plan, first apply,
# no-change plan, a one-Cluster drift repair on the solo Cluster (saved plan, then applied) and
# the plan of a revision change (times, provider peak RSS and CPU seconds, plan line counts),
# against `kubectl apply --server-side` + `kubectl wait` on the same Clusters. Quick:
# BENCH_SIZES=4,16.
# Written to BENCH_OUT (default ./bench-out): curve.csv and curve.md (the table of
# docs-dev/benchmarks-notebook.md, with machine and date).
#
# BENCH_ENGINES (default direct,flux): the delivery engines measured at each size. With flux the
# bed also runs Flux's source-controller and kustomize-controller and an OCI registry (built by
# `tools/toolchain.sh flux`); each size is then rolled out a second time through Flux, and the
# controllers' CPU seconds and peak RSS are measured beside the provider's.
# BENCH_FLUX_CONCURRENT=N starts both Flux controllers with --concurrent N (default: theirs, 4).
# BENCH_APPLY_TIMEOUT (default 20m) bounds each apply of the curve.
#
# BENCH_COMPARE=1: instead, the 4-cluster comparison: four workload clusters with a control plane
# each, RUNS (default 5) alternating rounds of provider and kubectl after a warm-up, medians.
#
# BENCH_CLI=terraform drives the provider with Terraform ($GRADUAL_TERRAFORM, else `terraform` on
# PATH) instead of OpenTofu; the CSV's `cli` column and the table's heading name the CLI.
# BENCH_BASELINE=0 skips the kubectl baseline (provider only, quicker).
# BENCH_LOGS=DIR keeps each tofu run's provider log (TF_LOG_PROVIDER=INFO) and output in DIR.
# One fleet at a time on a machine: the bed runs under flock /tmp/gradual-fleet.lock.
set -euo pipefail
cd "$(dirname "$0")/.."
env_file=$(tools/toolchain.sh | tail -n 1)
# shellcheck disable=SC1090
source "$env_file"

work=$(mktemp -d "${TMPDIR:-/tmp}/gradual-bench.XXXXXX")
cleanup() {
  if [ -x "$work/gradual-testbed" ]; then "$work/gradual-testbed" down --dir "$work/fleet" >&2 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
# An INT or TERM (Ctrl-C, a CI timeout) must still tear the fleet down: exit runs the EXIT trap.
trap 'exit 130' INT TERM

go build -o "$work/gradual-testbed" ./cmd/gradual-testbed
go build -o "$work/gradual-bench" ./cmd/gradual-bench
go build -o "$work/plugins/terraform-provider-gradual" .

exec 9>/tmp/gradual-fleet.lock
echo "[bench] waiting for the fleet lock (/tmp/gradual-fleet.lock)" >&2
flock 9
# The fleet's daemons must not inherit fd 9 (`9>&-` below): if this script were killed, they
# would go on holding the lock, and every later fleet would wait for it (it happened).

kubectl=${GRADUAL_KUBECTL:-$(command -v kubectl || true)}
if [ "${BENCH_BASELINE:-1}" = 0 ]; then kubectl=none; fi
cli=$GRADUAL_TOFU
case "${BENCH_CLI:-tofu}" in
  tofu | opentofu) ;;
  terraform)
    cli=${GRADUAL_TERRAFORM:-$(command -v terraform || true)}
    if [ -z "$cli" ]; then echo "[bench] BENCH_CLI=terraform, but no terraform binary (GRADUAL_TERRAFORM or PATH)" >&2; exit 2; fi ;;
  *) echo "[bench] BENCH_CLI must be tofu or terraform, not ${BENCH_CLI}" >&2; exit 2 ;;
esac
args=(--fleet "$work/fleet" --plugins "$work/plugins" --work "$work" --tofu "$cli" --kubectl "$kubectl")
if [ -n "${BENCH_LOGS:-}" ]; then args+=(--logs "$BENCH_LOGS"); fi

if [ -n "${BENCH_COMPARE:-}" ]; then
  echo "[bench] starting the test bed: a management cluster and 4 workload clusters" >&2
  "$work/gradual-testbed" up --dir "$work/fleet" --workloads 4 >/dev/null 9>&-
  "$work/gradual-bench" "${args[@]}" --clusters 4 --runs "${RUNS:-5}"
  exit
fi

sizes=${BENCH_SIZES:-4,16,64,256,1000}
servers=${BENCH_SERVERS:-4}
solo=${BENCH_SOLO:-1}
largest=$(tr ',' '\n' <<<"$sizes" | sort -n | tail -n 1)
clusters=$((largest > servers ? largest : servers))
out=${BENCH_OUT:-bench-out}
mkdir -p "$out"
engines=${BENCH_ENGINES:-direct,flux}
bed=(--workloads "$servers" --clusters "$clusters" --solo "$solo")
if [[ ",$engines," == *,flux,* ]]; then
  # shellcheck disable=SC1090
  source "$(tools/toolchain.sh flux | tail -n 1)"
  bed+=(--flux --flux-concurrent "${BENCH_FLUX_CONCURRENT:-0}")
fi
echo "[bench] starting the scale bed: $clusters CAPI Clusters over $servers kwok API servers ($solo serving one Cluster each); engines $engines" >&2
"$work/gradual-testbed" up --dir "$work/fleet" "${bed[@]}" >/dev/null 9>&-
"$work/gradual-bench" "${args[@]}" --sizes "$sizes" --engines "$engines" --apply-timeout "${BENCH_APPLY_TIMEOUT:-20m}" --csv "$out/curve.csv" --markdown "$out/curve.md"
echo "[bench] written: $out/curve.csv, $out/curve.md" >&2
