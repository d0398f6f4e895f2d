#!/usr/bin/env bash
# Runs every test of the workspace, exactly the tests of `cargo test
# --workspace`, as .ci/run wants them: two groups of test binaries (meant
# to run side by side; one after the other for now, see below), the doc
# tests at the end of the second. Each test is timed by
# libtest (hack/timed-test.sh). Fails when a test fails or when fewer tests
# ran than the workspace lists, and ends with the count and the slowest.
#
#   group 1: every crate's `integration` binary (the manager's shared
#            control plane among them)
#   group 2: the other binaries (the demo, the manager's `by_hand`,
#            `identities` and `quiet_logs`, the image test) and the unit tests
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# What the workspace holds: the `<name>: test` lines of every binary's list.
cargo test --workspace --locked -q -- --list >"$logs/list" 2>"$logs/list.err" ||
  { cat "$logs/list.err" >&2; exit 1; }
listed=$(grep -c ': test$' "$logs/list")

# Which crate each test binary belongs to, for the report.
cargo test --workspace --locked --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"package_id":"[^"]*#\([^@"]*\)@[^"]*".*"executable":"[^"]*\/\([^"/]*\)".*/\2 \1/p' >"$logs/crates"

export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER=$PWD/hack/timed-test.sh

# Four tests at a time in group 1: the manager's tests wait on Jobs and
# intervals far more than they compute.
cargo test --workspace --locked --test integration -- --test-threads=4 >"$logs/1.log" 2>&1 &
one=$!
# For now group 2 starts when group 1 ends: side by side, the cores ran
# saturated and the install-mode demo and a handshake test failed on timing
# (docs/decisions.md). The groups stay apart so they can overlap again.
wait "$one" || failed1=1
# The doc tests close group 2: `--doc` builds the libraries once more (it
# resolves on its own).
(
  cargo test --workspace --locked --lib --bins --test demo --test by_hand --test identities \
    --test quiet_logs --test manager_image &&
    cargo test --workspace --locked --doc
) >"$logs/2.log" 2>&1 &
two=$!
failed=${failed1:-0}
wait "$two" || failed=1
for g in 1 2; do
  printf '\n==> test group %s\n' "$g"
  cat "$logs/$g.log"
done
[ "$failed" = 0 ] || { echo "error: a test failed (above)" >&2; exit 1; }

echo
cat "$logs"/[12].log >"$logs/all.log"
bash hack/test-report.sh "$logs/all.log" "$logs/crates"
ran=$(awk '/^test result: / { for (i = 2; i <= NF; i++) if ($(i) ~ /^(passed|failed|ignored);?$/) n += $(i-1) } END { print n + 0 }' "$logs/all.log")
echo "the workspace lists $listed tests; $ran ran"
[ "$ran" -ge "$listed" ] || { echo "error: $((listed - ran)) listed tests did not run (a test binary outside both groups?)" >&2; exit 1; }
