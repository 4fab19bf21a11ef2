#!/usr/bin/env bash
# Runs miri (the MIR interpreter: undefined behaviour, aliasing under Stacked Borrows, data
# races, leaks, weak-memory effects of atomics) on tests of code it can execute without a
# kernel and within a few minutes (sizes cut under cfg(miri)). docs/reliability.md lists what
# runs, what was tried and left out for time, and why the rest cannot run.
#
#   ZLR_REQUIRE_ENV=1  nightly present but miri not installable fails instead of skipping
set -uo pipefail
cd "$(dirname "$0")/.."

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "!!! NO NIGHTLY TOOLCHAIN: miri needs nightly; miri was NOT run."
    echo "!!! Install it: rustup toolchain install nightly --component miri"
    exit 0
fi
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup component add --toolchain nightly miri rust-src >/dev/null 2>&1
fi
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    echo "!!! NIGHTLY HAS NO MIRI and it could not be installed"
    echo "!!! (rustup component add --toolchain nightly miri); miri was NOT run."
    [ "${ZLR_REQUIRE_ENV:-}" = 1 ] && exit 1
    exit 0
fi

# miri's own build of std, once per toolchain (kept in ~/.cache/miri).
cargo +nightly miri setup >/dev/null 2>&1 || { echo "!!! cargo miri setup failed"; exit 1; }

# Its own target dir: miri's artefacts never mix with the normal build's.
export CARGO_TARGET_DIR=target/miri
# -Zmiri-strict-provenance: no integer-to-pointer casts slip through; the rest is miri's
# default checking (Stacked Borrows, data races, leaks, alignment, uninitialised reads).
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-strict-provenance}"
failed=0
run() {
    local what=$1
    shift
    local start=$SECONDS log
    log=$(mktemp)
    if cargo +nightly miri test "$@" >"$log" 2>&1; then
        echo "miri $what: ok, $(grep -c '^test .* ok$' "$log") tests in $((SECONDS - start)) s"
    else
        failed=1
        echo "!!! miri $what FAILED (cargo +nightly miri test $*); the end of its output:"
        tail -n 80 "$log"
    fi
    rm -f "$log"
}

# The AF_XDP rings' index protocol and volatile slot accesses on an anonymous mapping, two
# threads standing in for us and the kernel (the mmap'ed UMEM and sockets need a kernel).
run "zl-afxdp rings" -p zl-afxdp --lib ring::
# Not zl-lpm: its concurrent test (three readers spinning while a writer recycles groups) ran
# over 5 minutes interpreted even at 40 changes (docs/reliability.md).
# Packet buffers, pools and batches.
run "zl-port" -p zl-port --lib
# The Zombie List under maximum contention: four threads on lists of one and two zombies
# (every observation races for the same entries and a 3- or 6-entry table), 100 observations
# each, then the invariants. Not the larger concurrent tests: the first (M = 100, 400
# operations per thread) ran over 3 minutes interpreted (docs/reliability.md).
run "zl-zombie (four threads, lists of 1 and 2)" -p zl-zombie --test concurrent four_threads_tiny_lists
exit $failed
