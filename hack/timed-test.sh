#!/usr/bin/env bash
# cargo's target runner for the test step of .ci/run: runs one test binary
# with libtest's own per-test timing (`--report-time`), so the run can end
# with the slowest tests. libtest allows that option when RUSTC_BOOTSTRAP is
# set in the test process (it reads it at run time); it is set here, for the
# test binary only, never for rustc. The harness removes it again before a
# test runs cargo (crates/testenv/src/binaries.rs).
set -euo pipefail
bin=$1
shift
RUSTC_BOOTSTRAP=1 exec "$bin" "$@" -Z unstable-options --report-time
