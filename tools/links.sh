#!/usr/bin/env bash
# Fails when a relative Markdown link points to a file that does not exist. It reads README.md,
# ARCHITECTURE.md, CONTRIBUTING.md, CHANGELOG.md and the Markdown under docs/, templates/,
# modules/ and examples/: inline links `[text](target)` and reference definitions
# `[label]: target`, outside fenced code blocks and inline code. http(s), mailto and pure #anchor
# links are not checked, nor are anchors themselves. A template (templates/**/*.md.tmpl) is
# rendered into docs/ by tfplugindocs, so its links are resolved from where its page lands:
# templates/guides/x.md.tmpl from docs/guides/. `make lint` (and so `make test`) runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

files=()
for f in README.md ARCHITECTURE.md CONTRIBUTING.md CHANGELOG.md; do
  [ -f "$f" ] && files+=("$f")
done
while IFS= read -r f; do files+=("$f"); done < <(
  git ls-files --cached --others --exclude-standard -- \
    'docs/*.md' 'docs-dev/*.md' 'templates/*.md' 'templates/*.md.tmpl' 'modules/*.md' 'examples/*.md' | sort -u
)

# links FILE prints the link targets of FILE, one per line, as "LINE<TAB>TARGET".
links() {
  awk '
    /^[ \t]*(```|~~~)/ { fenced = !fenced; next }
    fenced { next }
    {
      line = $0
      gsub(/`[^`]*`/, "", line)
      if (match(line, /^[ \t]*\[[^]]+\]:[ \t]*[^ \t]+/)) {
        def = substr(line, RSTART, RLENGTH)
        sub(/^[ \t]*\[[^]]+\]:[ \t]*/, "", def)
        print NR "\t" def
        next
      }
      while (match(line, /\]\([^)]*\)/)) {
        target = substr(line, RSTART + 2, RLENGTH - 3)
        line = substr(line, RSTART + RLENGTH)
        sub(/^[ \t]*</, "", target); sub(/>.*$/, "", target)
        sub(/[ \t].*$/, "", target) # a title after the target
        print NR "\t" target
      }
    }' "$1"
}

bad=0
for f in "${files[@]}"; do
  base=$(dirname "$f")
  case "$f" in
    templates/*.md.tmpl) base=docs${base#templates} ;;
  esac
  while IFS=$'\t' read -r line target; do
    case "$target" in
      "" | \#* | http://* | https://* | mailto:*) continue ;;
      *://*) continue ;;
    esac
    path=${target%%#*}
    path=${path%%\?*}
    [ -n "$path" ] || continue
    case "$path" in
      /*) resolved=.$path ;;
      *) resolved=$base/$path ;;
    esac
    if [ ! -e "$resolved" ]; then
      echo "$f:$line: broken link: $target ($resolved does not exist)" >&2
      bad=1
    fi
  done < <(links "$f")
done
if [ "$bad" != 0 ]; then
  echo "links: fix the links above (a template's links resolve from its page under docs/)" >&2
  exit 1
fi
echo "links: ${#files[@]} files, every relative link resolves"
