#!/usr/bin/env bash
# The end-to-end half of `make bench`: builds the toolchain if needed (kubectl included), starts a
# fleet of a management cluster and four workload clusters, builds the provider and
# cmd/gradual-bench, and runs it: one 20-object revision rolled out by `tofu apply` of a
# gradual_rollout (update_limit = 4) against `kubectl apply --server-side` + `kubectl wait` on the
# same clusters in parallel, after a warm-up round, RUNS times each (default 5, alternating which
# goes first), medians compared; plus the provider's peak RSS and a no-change plan. The fleet is
# torn down on exit, whatever happened.
# BENCH_LOGS=DIR keeps each tofu run's provider log (TF_LOG_PROVIDER=INFO) in DIR.
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

echo "[bench] starting the test bed: a management cluster and 4 workload clusters" >&2
"$work/gradual-testbed" up --dir "$work/fleet" --workloads 4 >/dev/null

args=(--fleet "$work/fleet" --plugins "$work/plugins" --work "$work" --clusters 4 --runs "${RUNS:-5}"
  --tofu "$GRADUAL_TOFU" --kubectl "${GRADUAL_KUBECTL:-$(command -v kubectl || true)}")
if [ -n "${BENCH_LOGS:-}" ]; then args+=(--logs "$BENCH_LOGS"); fi
"$work/gradual-bench" "${args[@]}"
