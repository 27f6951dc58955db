#!/usr/bin/env bash
# `make demo`: the main job on a local fleet. Builds the toolchain (cached), starts a management
# cluster with Cluster API objects and three workload clusters, builds the provider, and runs
# examples/quickstart with OpenTofu (and Terraform when on PATH), narrating each step; then
# runs examples/flux-delivery with OpenTofu, delivered by Flux's real controllers that run beside
# the fleet (`tools/toolchain.sh flux`, cached); then builds the Cluster API controllers
# (`tools/toolchain.sh cluster-api`, cached) and runs examples/inplace-fleet against them on a
# management cluster of its own.
# KEEP=1 keeps the fleet running at the end and prints how to reach it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
indent() { sed 's/^/    /'; }
# warning TITLE LOG: the text of the first warning TITLE in a plan's output (-no-color, warnings not
# compacted), without the lines that say where in the configuration it comes from.
warning() { awk -v t="Warning: $1" '$0 == t {p = 1; next} p && /^(\(and one|Warning: |─)/ {exit} p && !/^  (with |on |[0-9]+: )/ && NF' "$2"; }

say "Building the toolchain (cached after the first run)"
env_file=$(tools/toolchain.sh | tail -n 1)
# shellcheck disable=SC1090
source "$env_file"
# Flux's source-controller and kustomize-controller, for step 7 (cached likewise).
env_file=$(tools/toolchain.sh flux | tail -n 1)
# shellcheck disable=SC1090
source "$env_file"

work=$(mktemp -d "${TMPDIR:-/tmp}/gradual-demo.XXXXXX")
fleet_dir=$work/fleet
capi_dir=$work/capi
testbed=$work/gradual-testbed
go build -o "$testbed" ./cmd/gradual-testbed
finish() {
  status=$?
  [ -n "${extension_pid:-}" ] && kill "$extension_pid" 2>/dev/null
  [ -n "${kubelet_pid:-}" ] && kill "$kubelet_pid" 2>/dev/null
  if [ "${KEEP:-}" = 1 ]; then
    say "KEEP=1: the fleet stays up"
    echo "  management kubeconfig: $fleet_dir/management.kubeconfig"
    echo "  kubectl --kubeconfig $fleet_dir/management.kubeconfig get clusters -A"
    echo "  the quickstart runs: $work/quickstart-*"
    echo "  stop it with: $testbed down --dir $fleet_dir"
    [ -d "$capi_dir" ] && echo "  the Cluster API fleet: $capi_dir/management.kubeconfig; stop it with: $testbed down --dir $capi_dir"
  else
    say "Tearing the fleet down"
    "$testbed" down --dir "$fleet_dir" >/dev/null 2>&1 || true
    [ -d "$capi_dir" ] && { "$testbed" down --dir "$capi_dir" >/dev/null 2>&1 || true; }
    rm -rf "$work"
  fi
  exit $status
}
trap finish EXIT

say "Starting a local fleet: a management cluster with Cluster API objects and three workload clusters, and Flux's controllers"
kubeconfig=$("$testbed" up --dir "$fleet_dir" --flux 2>/dev/null | tail -n 1)
"$testbed" status --dir "$fleet_dir" | indent

say "Building the provider and pointing the CLIs at it (dev_overrides, no registry needed)"
go build -o "$work/plugins/terraform-provider-gradual" .
cat >"$work/cli.tfrc" <<RC
provider_installation {
  dev_overrides {
    "registry.terraform.io/gradual-dev/gradual" = "$work/plugins"
    "registry.opentofu.org/gradual-dev/gradual" = "$work/plugins"
  }
  direct {}
}
RC
export TF_CLI_CONFIG_FILE="$work/cli.tfrc" CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1

say "Starting the reference in-place update extension (CAPI runtime-extension wire format, over TLS)"
go build -o "$work/gradual-update-extension" ./cmd/gradual-update-extension
"$work/gradual-update-extension" --kubeconfig "$kubeconfig" --ca-file "$work/extension-ca.pem" --delay 2s \
  >"$work/extension.url" 2>"$work/extension.log" &
extension_pid=$!
for _ in $(seq 50); do [ -s "$work/extension.url" ] && break; sleep 0.1; done
extension_url=$(head -n 1 "$work/extension.url")
echo "    listening at $extension_url"

clis=("$GRADUAL_TOFU")
[ -n "${GRADUAL_TERRAFORM:-}" ] && clis+=("$GRADUAL_TERRAFORM")
for cli in "${clis[@]}"; do
  name=$("$cli" version | sed -n 1p)
  dir="$work/quickstart-$(basename "$cli")"
  cp -r "$root/examples/quickstart" "$dir"
  tf() { "$cli" -chdir="$dir" "$@" -var "kubeconfig_path=$kubeconfig" -no-color -compact-warnings; }
  outputs() { "$cli" -chdir="$dir" output -no-color "$@" | indent; }

  say "[$name] Step 1: roll the demo app out to the production clusters, one cluster per wave"
  echo "    The plan shows the revision and which clusters are eligible before anything changes. A create has no state to"
  echo "    plan from, and Terraform plans it again when it applies, so \`waves\` is known after apply; the Planned Waves"
  echo "    warning shows the waves as the fleet reads now:"
  "$cli" -chdir="$dir" plan -out="$dir/plan" -var "kubeconfig_path=$kubeconfig" -no-color >"$dir/plan.log"
  sed -n '/will perform the following actions/,/^Warning: /p' "$dir/plan.log" | grep -E 'revision|waves|prod-|Plan:' | sed -n '1,20p' | indent
  warning "Planned Waves" "$dir/plan.log" | indent
  "$cli" -chdir="$dir" apply -no-color "$dir/plan" | grep -E 'Apply complete' | indent
  outputs clusters

  say "[$name] Step 2: a broken revision (its pods can never be scheduled)"
  echo "    The first wave fails verification; that cluster is restored to its backup, the revision is recorded invalid, the other cluster is untouched:"
  if tf apply -auto-approve -var app_version=1.28 -var broken=true >"$dir/broken.log" 2>&1; then
    echo "    unexpected: the broken revision applied" >&2
    exit 1
  fi
  grep -E 'Error|failed|restored|ProgressDeadline' "$dir/broken.log" | sed -n '1,8p' | indent
  tf apply -refresh-only -auto-approve >/dev/null
  outputs clusters
  outputs invalid_revisions

  say "[$name] Step 3: plan the broken revision again — refused, with where and why it failed"
  if tf plan -var app_version=1.28 -var broken=true >"$dir/refused.log" 2>&1; then
    echo "    unexpected: the plan was accepted" >&2
    exit 1
  fi
  grep -A6 'Revision Recorded Invalid' "$dir/refused.log" | sed -n '1,10p' | indent

  say "[$name] Step 4: a fixed revision goes out to every production cluster"
  tf apply -auto-approve -var app_version=1.28 | grep -E 'Apply complete' | indent
  outputs clusters

  say "[$name] Step 5: a new production cluster joins the fleet; the plan shows it, apply gives it the app and the add-ons"
  joiner="prod-ap-$(basename "$cli" | tr -dc 'a-z' | head -c 4)"
  "$testbed" add --dir "$fleet_dir" "$joiner" env=prod,region=ap >/dev/null 2>&1
  tf plan -var app_version=1.28 | grep -E "^  # |$joiner|Plan:" | sed -n '1,8p' | indent
  tf apply -auto-approve -var app_version=1.28 | grep -E 'Apply complete' | indent
  outputs clusters
  outputs addons

  say "[$name] Step 6: an in-place Kubernetes upgrade of a MachineDeployment, previewed machine by machine"
  cluster=$([ "$(basename "$cli")" = tofu ] && echo prod-eu-1 || echo prod-us-1)
  md="workers-$(basename "$cli")"
  "$testbed" machines --dir "$fleet_dir" "$cluster" "$md" 2 v1.36.3 >/dev/null 2>&1
  inplace="{cluster=\"$cluster\",machine_deployment=\"$md\",version=\"v1.37.0\",extension_url=\"$extension_url\",extension_ca_file=\"$work/extension-ca.pem\"}"
  echo "    The plan asks the update extension what Cluster API will ask (CanUpdateMachine) and shows, per machine,"
  echo "    its node, what changes and which extension updates it in place:"
  tf plan -var app_version=1.28 -var "inplace=$inplace" | grep -E 'name +=|node +=|strategy|extensions|changed_fields|Plan:' | sed -n '1,14p' | indent
  echo "    This fleet runs no Cluster API controllers, so here the demo stops at the preview; step 8 applies an"
  echo "    in-place update with the real controllers."

  say "[$name] Cleaning up: destroy removes the app and the add-ons from every cluster"
  tf destroy -auto-approve -var app_version=1.28 | grep -E 'Destroy complete' | indent
done

say "Step 7: Flux delivers, the provider gates"
echo "    Flux's source-controller and kustomize-controller run against the management cluster. Each revision is"
echo "    published as an OCI artifact and pinned by digest in one OCIRepository the namespace's clusters share; per"
echo "    cluster, a Kustomization (through the Cluster's kubeconfig Secret) applies it. The waves, canary, budget and"
echo "    invalid ledger stay in the provider."
registry=$("$testbed" status --dir "$fleet_dir" | sed -nE 's/.*OCI registry ([0-9.:]+),.*/\1/p')
flux_dir="$work/flux-delivery"
cp -r "$root/examples/flux-delivery" "$flux_dir"
tff() { "$GRADUAL_TOFU" -chdir="$flux_dir" "$@" -var "kubeconfig_path=$kubeconfig" -var "repository=oci://$registry/demo/greeter" -no-color -compact-warnings; }
fluxout() { "$GRADUAL_TOFU" -chdir="$flux_dir" output -no-color "$@" | indent; }
tff apply -auto-approve | grep -E 'Apply complete' | indent
fluxout waves
fluxout summary
say "Step 7: a revision the workload API servers refuse"
echo "    The canary's Kustomization reports kustomize-controller's refusal; the provider pins the canary back to the"
echo "    previous revision, records the revision invalid, and the other clusters never get it:"
if tff apply -auto-approve -var greeting=hi -var broken=true >"$flux_dir/broken.log" 2>&1; then
  echo "    unexpected: the broken revision applied" >&2
  exit 1
fi
grep -E '^Error: Rollout Failed|^[0-9]+ failed, |^staging-eu-1: verify|^ReconciliationFailed' "$flux_dir/broken.log" | sed -n '1,4p' | indent
tff apply -refresh-only -auto-approve >/dev/null
fluxout invalid_revisions
echo "    Planned again, it is refused:"
if tff plan -var greeting=hi -var broken=true >"$flux_dir/refused.log" 2>&1; then
  echo "    unexpected: the plan was accepted" >&2
  exit 1
fi
grep -E 'Revision Recorded Invalid' "$flux_dir/refused.log" | sed -n '1,1p' | indent
echo "    destroy deletes the Kustomizations, and Flux prunes what it applied:"
tff destroy -auto-approve | grep -E 'Destroy complete' | indent

say "Step 8: in-place upgrades across a fleet, carried out by the real Cluster API controllers"
echo "    Cluster API v1.14 (core, kubeadm bootstrap and control plane, CAPD's in-memory backend, CAPI's test"
echo "    extension as the update extension) on a management cluster of its own, with three clusters it provisions."
env_file=$(tools/toolchain.sh cluster-api | tail -n 1)
# shellcheck disable=SC1090
source "$env_file"
capi_kubeconfig=$("$testbed" up --dir "$capi_dir" --cluster-api 2>/dev/null | tail -n 1)
"$testbed" in-memory --dir "$capi_dir" edge-1:env=edge edge-2:env=edge edge-3:env=edge 2>&1 | grep -E 'provisioned' | sed 's/^\[testbed [0-9:]*\] //' | indent
# CAPD's in-memory machines run no kubelet: the stand-in makes a Node report its Machine's version once
# Cluster API has updated the Machine in place, as the restarted kubelet would. It decides nothing.
"$testbed" kubelet --dir "$capi_dir" >"$work/kubelet.log" 2>&1 &
kubelet_pid=$!
version=v1.34.0
for cli in "${clis[@]}"; do
  name=$("$cli" version | sed -n 1p)
  dir="$work/inplace-$(basename "$cli")"
  cp -r "$root/examples/inplace-fleet" "$dir"
  version=${version%.*}.$((${version##*.} + 1))
  # Warnings not compacted: the plan's waves and preview are in them.
  tfi() { "$cli" -chdir="$dir" "$@" -var "kubeconfig_path=$capi_kubeconfig" -var "kubernetes_version=$version" -no-color; }
  say "[$name] Step 8: the workers of every edge cluster to $version, in place, one cluster at a time, edge-1 first"
  echo "    The plan previews every machine (CanUpdateMachineSet / CanUpdateMachine, CAPI's own questions). A create has no"
  echo "    state to plan from, and Terraform plans it again when it applies, so \`waves\` and \`summary\` are known after"
  echo "    apply; the plan's warnings show the waves and the preview as the fleet and the extensions answer now:"
  tfi plan -out="$dir/plan" >"$dir/plan.log"
  warning "Planned Waves" "$dir/plan.log" | indent
  warning "In-Place Preview" "$dir/plan.log" | indent
  grep -E "^Plan:" "$dir/plan.log" | indent || true
  "$cli" -chdir="$dir" apply -no-color "$dir/plan" | grep -E 'Apply complete' | indent
  echo "    Every worker was updated in place by Cluster API (the same Machine), its Node on $version:"
  "$cli" -chdir="$dir" output -no-color status | indent
done
kill "$kubelet_pid" 2>/dev/null || true
kubelet_pid=

say "Summary"
"$testbed" status --dir "$fleet_dir" | indent
