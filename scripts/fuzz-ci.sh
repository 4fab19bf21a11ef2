#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for a bounded time, each starting from its committed
# corpus fuzz/corpus/<target>/ (read only: new inputs go to fuzz/corpus-run/<target>/, which
# is ignored). A crash, leak, timeout or out-of-memory fails the run and prints the input as
# hex. Per target it prints the executions done (libFuzzer's stat::number_of_executed_units).
#
#   ZLR_FUZZ_SECONDS   seconds for every target (default: each target's own, below; 240 s in all)
#   ZLR_REQUIRE_ENV=1  a missing nightly toolchain fails instead of skipping
set -uo pipefail
cd "$(dirname "$0")/.."
# Seconds per target when ZLR_FUZZ_SECONDS is not set: 240 s in all, so CI stays under about 35
# minutes (at 285 s it took 35.9). A shallow target (metrics_request's coverage stops growing
# within seconds) gets less; the ones that build a whole config or write files get more.
secs_for() {
    if [ -n "${ZLR_FUZZ_SECONDS:-}" ]; then
        echo "$ZLR_FUZZ_SECONDS"
        return
    fi
    case $1 in
        metrics_request) echo 15 ;;
        parse_frame | netlink_events | pcap_read) echo 35 ;;
        capture_roundtrip) echo 40 ;;
        router_config | config_reload) echo 40 ;;
        *) echo 35 ;;
    esac
}

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "!!! NO NIGHTLY TOOLCHAIN: cargo-fuzz needs nightly (-Zsanitizer); the fuzz targets"
    echo "!!! were NOT built or run. Install it: rustup toolchain install nightly"
    [ "${ZLR_REQUIRE_ENV:-}" = 1 ] && exit 1
    exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked || { echo "!!! installing cargo-fuzz failed"; exit 1; }
fi

cargo +nightly fuzz build -O || { echo "!!! the fuzz targets do not build"; exit 1; }

# One target: runs it, writes its report to $2 and exits non-zero when it fails.
fuzz_one() {
    local t=$1 report=$2
    local secs corpus run artifacts log
    secs=$(secs_for "$t")
    corpus=fuzz/corpus/$t
    run=fuzz/corpus-run/$t
    artifacts=fuzz/artifacts/$t
    if [ ! -d "$corpus" ]; then
        echo "!!! $t has no committed corpus ($corpus)" >"$report"
        return 1
    fi
    rm -rf "$run" "$artifacts"
    mkdir -p "$run" "$artifacts"
    log=$(mktemp)
    # -timeout: one input running 60 s is a hang (a build under ASan takes up to 20 s); -rss_limit_mb: a leak or a huge allocation.
    if cargo +nightly fuzz run -O "$t" "$run" "$corpus" -- \
        -max_total_time="$secs" -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" >"$log" 2>&1; then
        execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
        echo "fuzz $t: ok, ${execs:-?} executions in ${secs} s, $cov, corpus $(ls "$corpus" | wc -l) + $(ls "$run" | wc -l) new inputs" >"$report"
        rm -f "$log"
        return 0
    fi
    {
        echo "!!! fuzz $t FAILED; the end of libFuzzer's output:"
        tail -n 60 "$log"
        for f in "$artifacts"/*; do
            [ -f "$f" ] || continue
            echo "!!! input that fails $t ($f, $(stat -c %s "$f") bytes), hex:"
            od -An -tx1 -v "$f" | head -n 200
        done
    } >"$report"
    rm -f "$log"
    return 1
}

# Every libFuzzer process is single-threaded: as many targets run at once as there are CPUs
# (the longest first), so each target keeps its seconds and the step's wall time drops (240 s
# of runs take about 125 s on 2 CPUs). Reports print in target order once all have finished.
lanes=$(nproc 2>/dev/null || echo 1)
targets=$(for t in $(cargo +nightly fuzz list); do echo "$(secs_for "$t") $t"; done | sort -rn | cut -d' ' -f2)
reports=$(mktemp -d)
failed=0
running=0
for t in $targets; do
    if [ "$running" -ge "$lanes" ]; then
        wait -n || failed=1
        running=$((running - 1))
    fi
    fuzz_one "$t" "$reports/$t" &
    running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
done
for t in $(cargo +nightly fuzz list); do
    cat "$reports/$t" 2>/dev/null || { echo "!!! fuzz $t wrote no report"; failed=1; }
done
rm -rf "$reports"
exit $failed
