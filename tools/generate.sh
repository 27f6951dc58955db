#!/usr/bin/env bash
# Regenerates docs/ with tfplugindocs (pinned in tools/go.mod) and formats the examples.
# tfplugindocs needs a `terraform` binary to read the provider schema; it uses the one on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v terraform >/dev/null 2>&1; then
  echo "generate: tfplugindocs needs 'terraform' on PATH to read the provider schema" >&2
  exit 1
fi
(cd tools && go tool tfplugindocs generate --provider-dir .. --provider-name gradual --rendered-provider-name gradual)
terraform fmt -recursive examples/ >/dev/null
if [ -d modules ]; then terraform fmt -recursive modules/ >/dev/null; fi
