#!/usr/bin/env bash
# Checks the package layers (README "Layout", .golangci.yml depguard rules) on what each package
# really links: depguard sees one file's imports, `go list -deps` the whole transitive closure,
# so a pure package that reaches client-go through a helper is caught here.
#
#   pure core        may not link Terraform, client-go, controller-runtime or any cluster-access,
#                    orchestration or glue package of ours;
#   lower layers     may not link the orchestrators (delivery, assignment), resources,
#                    providerdata or provider;
#   resources        may not import client-go or controller-runtime themselves (their tests may).
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
in="$mod/internal"
failed=0

# Every package with its transitive dependencies (.Deps), read once.
deps=$(go list -f '{{.ImportPath}} {{join .Deps " "}}' ./internal/...)

# deny PACKAGE-DIR REGEX WHY: fails when PACKAGE's transitive dependencies match REGEX.
deny() {
  local pkg=$1 regex=$2 why=$3 hits
  hits=$(awk -v p="$mod/$pkg" '$1 == p { for (i = 2; i <= NF; i++) print $i }' <<<"$deps" | grep -E "$regex" || true)
  if [ -n "$hits" ]; then
    echo "layers: $pkg links what it must not ($why):" >&2
    sed 's/^/  /' <<<"$hits" >&2
    failed=1
  fi
}

for pkg in internal/engine internal/clock internal/manifest internal/fieldpath internal/inplace internal/settings internal/usererr internal/window; do
  deny "$pkg" "^(k8s\.io/client-go|sigs\.k8s\.io/controller-runtime|github\.com/hashicorp/terraform-plugin-)|^$in/(apply|records|fleet|clientconfig|extension|delivery|assignment|resources|provider|providerdata)(/|$)" \
    "the pure core knows no Terraform and no Kubernetes client"
done
# internal/health judges with Flux's own fluxcd/pkg/runtime/cel, whose package also holds
# kustomize-controller's StatusReader (cli-utils' polling engine, which links client-go and
# controller-runtime): it links them through that package only, and imports no client itself
# (depguard checks its imports). Terraform and our cluster packages stay out.
deny internal/health "^github\.com/hashicorp/terraform-plugin-|^$in/(apply|records|fleet|clientconfig|extension|delivery|assignment|resources|provider|providerdata)(/|$)" \
  "the pure core knows no Terraform and none of the provider's cluster packages"

for pkg in $(awk '{print $1}' <<<"$deps" | sed "s|^$mod/||"); do
  case "$pkg" in
    internal/delivery | internal/assignment | internal/resources/* | internal/provider | internal/providerdata | internal/acctest | internal/scaleacc) continue ;;
  esac
  deny "$pkg" "^$in/(delivery|assignment|resources|providerdata|provider)(/|$)" "a lower layer does not reach up"
done

while read -r pkg imports; do
  hits=$(tr ' ' '\n' <<<"$imports" | grep -E '^(k8s\.io/client-go|sigs\.k8s\.io/controller-runtime)' || true)
  if [ -n "$hits" ]; then
    echo "layers: ${pkg#"$mod/"} imports Kubernetes clients; resources reach clusters through providerdata's services:" >&2
    sed 's/^/  /' <<<"$hits" >&2
    failed=1
  fi
done < <(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./internal/resources/...)

[ "$failed" = 0 ] && echo "layers: every package keeps to its layer" >&2
exit "$failed"
