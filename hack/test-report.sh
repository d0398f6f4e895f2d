#!/usr/bin/env bash
# Reads the output of `cargo test` run through hack/timed-test.sh (LOG) and
# prints how many tests ran and the 20 slowest, each with its test binary.
set -euo pipefail
log=$1
awk '/^test result: / {
       for (i = 2; i <= NF; i++) {
         if ($(i) ~ /^passed;?$/) passed += $(i-1)
         if ($(i) ~ /^failed;?$/) failed += $(i-1)
         if ($(i) ~ /^ignored;?$/) ignored += $(i-1)
       }
     }
     END { printf "tests run: %d passed, %d failed, %d ignored\n", passed, failed, ignored }' "$log"
echo "the 20 slowest tests (seconds, test binary, test):"
# `Running ... (target/debug/deps/<binary>-<hash>)` names the binary of the
# lines that follow, and cargo runs a crate's library tests before its
# other binaries, so the last library seen names the crate (every crate of
# the workspace has one); libtest ends each finished test with `<seconds>s`.
awk '/^ *Running / {
       bin = $NF; gsub(/[()]/, "", bin); sub(/.*\//, "", bin); sub(/-[0-9a-f]+$/, "", bin)
       if ($2 == "unittests" && $3 == "src/lib.rs") crate = bin
       label = (bin == crate) ? crate " (lib)" : crate "/" bin
     }
     /^test .* \.\.\. [a-zA-Z]+ <[0-9.]+s>$/ { t = $NF; gsub(/[<>s]/, "", t); printf "%9.2f  %s  %s\n", t, label, $2 }' "$log" |
  sort -rn | head -20
