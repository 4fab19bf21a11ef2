#!/usr/bin/env bash
# The C ABI's CI checks, run by .ci/run after `cargo test --workspace` has built
# target/debug/libzl_aqm_capi.a:
#  1. include/zl_aqm.h equals what the pinned cbindgen generates from the crate;
#  2. the C example (crates/zl-aqm-capi/examples/c/zlred_trace.c, through the C ABI) prints exactly what the Rust
#     example (crates/zl-aqm/examples/foreign_loop.rs, zl_aqm directly) prints, for two seeds;
#  3. the header compiles and links from C++ too (cpp_compat: extern "C");
#  4. the benchmark program (crates/zl-aqm-capi/examples/c/bench_arrive.c) builds, and one replay gives the same
#     verdicts per call as in a burst (its timings are not looked at here).
# Usage: scripts/capi-check.sh   (from anywhere). Needs the cbindgen version that .ci/run pins
# (`cargo install cbindgen --version <it> --locked`).
set -euo pipefail
cd "$(dirname "$0")/.."

CBINDGEN_VERSION=${CBINDGEN_VERSION:-$(sed -n 's/^export CBINDGEN_VERSION=//p' .ci/run)}
if ! cbindgen --version 2>/dev/null | grep -qx "cbindgen $CBINDGEN_VERSION"; then
    echo "cbindgen $CBINDGEN_VERSION (pinned in .ci/run) is needed: cargo install cbindgen --version $CBINDGEN_VERSION --locked" >&2
    exit 1
fi

out=target/capi-check
mkdir -p "$out"

cbindgen --quiet --config crates/zl-aqm-capi/cbindgen.toml --crate zl-aqm-capi \
    --output "$out/zl_aqm.h"
if ! diff -u crates/zl-aqm-capi/include/zl_aqm.h "$out/zl_aqm.h"; then
    echo "include/zl_aqm.h is stale: regenerate it with the command in crates/zl-aqm-capi/cbindgen.toml" >&2
    exit 1
fi
echo "header: include/zl_aqm.h equals cbindgen $CBINDGEN_VERSION's output"

# The test profile: the artifacts `cargo test --workspace` has just built, nothing rebuilt.
cargo build -q --profile test -p zl-aqm-capi
cargo build -q --profile test -p zl-aqm --example foreign_loop
cc -std=c11 -O2 -Wall -Wextra -Werror -Icrates/zl-aqm-capi/include crates/zl-aqm-capi/examples/c/zlred_trace.c \
    target/debug/libzl_aqm_capi.a -lpthread -ldl -lm -o "$out/zlred_trace"
for run in "1 200000" "77 50000"; do
    # shellcheck disable=SC2086
    "$out/zlred_trace" $run >"$out/c.txt"
    # shellcheck disable=SC2086
    target/debug/examples/foreign_loop $run >"$out/rust.txt"
    if ! diff -u "$out/rust.txt" "$out/c.txt"; then
        echo "the C example and the Rust example differ for seed/packets $run" >&2
        exit 1
    fi
    echo "C example = Rust example for seed/packets $run ($(grep -c '' "$out/c.txt") lines): $(tail -2 "$out/c.txt" | head -1)"
done

cc -std=c11 -O2 -Wall -Wextra -Werror -Icrates/zl-aqm-capi/include crates/zl-aqm-capi/examples/c/bench_arrive.c \
    target/debug/libzl_aqm_capi.a -lpthread -ldl -lm -o "$out/bench_arrive"
"$out/bench_arrive" 0 >/dev/null
echo "bench_arrive: per-call and burst verdicts equal"

if command -v c++ >/dev/null; then
    printf '#include "zl_aqm.h"\nint main() { ZlArrival a = zl_arrival_default(); return a.ecn; }\n' \
        >"$out/from_cpp.cpp"
    c++ -std=c++11 -Wall -Wextra -Werror -Icrates/zl-aqm-capi/include "$out/from_cpp.cpp" \
        target/debug/libzl_aqm_capi.a -lpthread -ldl -lm -o "$out/from_cpp"
    "$out/from_cpp"
    echo "header: compiles and links from C++"
fi
