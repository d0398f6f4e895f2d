#!/usr/bin/env bash
# Reads the output of `cargo test` run through hack/timed-test.sh (LOG) and
# prints how many tests ran and the 20 slowest, each with its crate and test
# binary. MAP (optional) names the crate of each binary, one `<file> <crate>`
# line each, as `cargo test --no-run --message-format=json` reports them.
# With LISTED (how many tests the workspace lists), fails when fewer ran.
set -euo pipefail
log=$1
map=${2:-/dev/null}
listed=${3:-}
read -r passed failed ignored < <(awk '/^test result: / {
       for (i = 2; i <= NF; i++) {
         if ($(i) ~ /^passed;?$/) p += $(i-1)
         if ($(i) ~ /^failed;?$/) f += $(i-1)
         if ($(i) ~ /^ignored;?$/) g += $(i-1)
       }
     }
     END { print p + 0, f + 0, g + 0 }' "$log")
echo "tests run: $passed passed, $failed failed, $ignored ignored"
echo "the 20 slowest tests (seconds, crate/test binary, test):"
# `Running ... (target/debug/deps/<binary>-<hash>)` names the binary of the
# lines that follow; libtest ends each finished test with `<seconds>s`.
awk 'FILENAME == ARGV[1] { crate[$1] = $2; next }
     /^ *Running / {
       file = $NF; gsub(/[()]/, "", file); sub(/.*\//, "", file)
       bin = file; sub(/-[0-9a-f]+$/, "", bin)
       label = (file in crate) ? crate[file] "/" bin : bin
     }
     /^test .* \.\.\. [a-zA-Z]+ <[0-9.]+s>$/ { t = $NF; gsub(/[<>s]/, "", t); printf "%9.2f  %s  %s\n", t, label, $2 }' "$map" "$log" |
  sort -rn | awk 'NR <= 20' # reads all: head would break the pipe under pipefail
ran=$((passed + failed + ignored))
if [ -n "$listed" ]; then
  echo "the workspace lists $listed tests; $ran ran"
  [ "$ran" -ge "$listed" ] ||
    { echo "error: $((listed - ran)) listed tests did not run (a test binary outside both groups?)" >&2; exit 1; }
fi
