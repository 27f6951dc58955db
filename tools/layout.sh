#!/usr/bin/env bash
# Writes the package list of CONTRIBUTING.md's "Layout" section from the package docs (the first
# sentence of each package comment), grouped by layer, between the layout markers. `make
# generate` runs it, so `make test`'s generate check fails when a package is added, removed or
# re-described without CONTRIBUTING.md following. The layers are the ones tools/layers.sh and
# .golangci.yml enforce.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)

layer() {
  case "$1" in
    internal/engine | internal/clock | internal/manifest | internal/fieldpath | internal/health | internal/inplace | internal/settings | internal/usererr | internal/window) echo "1 pure core (no Terraform, no Kubernetes clients)" ;;
    internal/apply | internal/blame | internal/records | internal/fleet | internal/fluxdelivery | internal/crsbridge | internal/clientconfig | internal/extension | internal/inplace/owners | internal/inplace/ownerupdate) echo "2 cluster access" ;;
    internal/delivery | internal/assignment | internal/inplace/fleetupdate) echo "3 orchestration (the engine's Worlds)" ;;
    internal/provider | internal/providerdata | internal/resources/* | internal/functions | internal/diagnostics) echo "4 Terraform glue" ;;
    *) echo "5 test beds and acceptance wiring" ;;
  esac
}

block=$(
  go list -f '{{.ImportPath}}	{{.Doc}}' ./internal/... | sed "s|^$mod/||" |
    while IFS=$'\t' read -r pkg doc; do
      [ -n "$doc" ] || { echo "layout: $pkg has no package comment" >&2; exit 1; }
      printf '%s\t%s\t%s\n' "$(layer "$pkg")" "$pkg" "$doc"
    done | sort -t$'\t' -k1,1 -k2,2 |
    awk -F'\t' '
      $1 != last { if (last != "") print ""; last = $1; title = $1; sub(/^[0-9] /, "", title); print "**" title "**"; print "" }
      { d = $3; sub(/^Package [^ ]+ /, "", d); print "- `" $2 "/` " d }'
)
begin='<!-- layout:begin (tools/layout.sh writes this list from the package comments: edit those) -->'
end='<!-- layout:end -->'
doc=CONTRIBUTING.md
grep -qF "$begin" "$doc" || { echo "layout: $doc has no layout markers" >&2; exit 1; }
awk -v begin="$begin" -v end="$end" -v block="$block" '
  $0 == begin { print; print ""; print block; print ""; skip = 1; next }
  $0 == end { skip = 0 }
  !skip { print }' "$doc" >"$doc.tmp"
mv "$doc.tmp" "$doc"
