#!/usr/bin/env bash
# Runs the core, sched, sync, io and HTTP server unit tests and the stress tests under schedule shuffling
# (WEFT_SHUFFLE=ON: every scheduling choice that may go either way is taken at random; see
# include/weft/core/detail/shuffle.hpp) with many seeds. A failure prints its seed; replay it
# with WEFT_SHUFFLE_SEED=<seed> build/shuffle/tests/<binary> --gtest_filter=<test>.
# Usage: scripts/shuffle.sh [FIRST_SEED] [COUNT] [build-dir]   (defaults: 1 1000 build/shuffle)
set -euo pipefail
cd "$(dirname "$0")/.."
first=${1:-1}
count=${2:-1000}
build=${3:-build/shuffle}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-16 \
    -DWEFT_WERROR=ON -DWEFT_SHUFFLE=ON -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" --target test_core test_sched test_sync test_io test_stress test_http_server
failed=0
for seed in $(seq "$first" $((first + count - 1))); do
    for bin in test_core test_sched test_sync test_io test_stress test_http_server; do
        if ! WEFT_SHUFFLE_SEED=$seed WEFT_STRESS_SCALE=${WEFT_STRESS_SCALE:-4} \
            "$build/tests/$bin" --gtest_brief=1 >"$build/shuffle-$bin-$seed.log" 2>&1; then
            echo "shuffle: $bin FAILED with WEFT_SHUFFLE_SEED=$seed (log: $build/shuffle-$bin-$seed.log)"
            failed=$((failed + 1))
        fi
    done
done
echo "shuffle: seeds $first..$((first + count - 1)): $failed failed runs"
[ "$failed" -eq 0 ]
