#!/usr/bin/env bash
# Reads the output of `cargo test` run through hack/timed-test.sh (LOG) and
# prints how many tests ran and the 20 slowest, each with its crate and test
# binary. MAP (optional) names the crate of each binary, one `<file> <crate>`
# line each, as `cargo test --no-run --message-format=json` reports them.
set -euo pipefail
log=$1
map=${2:-/dev/null}
awk '/^test result: / {
       for (i = 2; i <= NF; i++) {
         if ($(i) ~ /^passed;?$/) passed += $(i-1)
         if ($(i) ~ /^failed;?$/) failed += $(i-1)
         if ($(i) ~ /^ignored;?$/) ignored += $(i-1)
       }
     }
     END { printf "tests run: %d passed, %d failed, %d ignored\n", passed, failed, ignored }' "$log"
echo "the 20 slowest tests (seconds, crate/test binary, test):"
# `Running ... (target/debug/deps/<binary>-<hash>)` names the binary of the
# lines that follow; libtest ends each finished test with `<seconds>s`.
awk 'FNR == NR { crate[$1] = $2; next }
     /^ *Running / {
       file = $NF; gsub(/[()]/, "", file); sub(/.*\//, "", file)
       bin = file; sub(/-[0-9a-f]+$/, "", bin)
       label = (file in crate) ? crate[file] "/" bin : bin
     }
     /^test .* \.\.\. [a-zA-Z]+ <[0-9.]+s>$/ { t = $NF; gsub(/[<>s]/, "", t); printf "%9.2f  %s  %s\n", t, label, $2 }' "$map" "$log" |
  sort -rn | awk 'NR <= 20' # reads all: head would break the pipe under pipefail
