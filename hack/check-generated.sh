#!/usr/bin/env bash
# Regenerates every generated file and fails when the result differs from
# what is committed (or adds a file git does not track).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

generated=(config/crd/bases)
# Generators are added here as the project gains generated files.
rm -f config/crd/bases/*.yaml
cargo run --quiet -p captf-api --bin crdgen >/dev/null

if ! git diff --quiet -- "${generated[@]}" || [ -n "$(git status --porcelain -- "${generated[@]}")" ]; then
  echo "generated files differ from the commit:" >&2
  git status --short -- "${generated[@]}" >&2
  git diff --stat -- "${generated[@]}" >&2
  echo "run the generators and commit the result" >&2
  exit 1
fi
echo "generated files are current"
