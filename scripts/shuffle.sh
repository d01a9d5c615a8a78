#!/usr/bin/env bash
# Runs the core, sched, sync, io, HTTP (parser and server) and bus (memory broker, codec, SQLite
# outbox) unit tests and the stress tests under schedule shuffling (WEFT_SHUFFLE=ON: every
# scheduling choice that may go either way is taken at random; see
# include/weft/core/detail/shuffle.hpp) with many seeds. No broker is involved: the bus tests that
# need NATS, Kafka or PostgreSQL are not in the set. A failure prints its seed; replay it with
# WEFT_SHUFFLE_SEED=<seed> build/shuffle/tests/<binary> --gtest_filter=<test>.
# Usage: scripts/shuffle.sh [FIRST_SEED] [COUNT] [build-dir]   (defaults: 1 1000 build/shuffle)
# WEFT_SHUFFLE_BINS="test_bus test_http_server" limits the run to those binaries;
# WEFT_SHUFFLE_BUILD_ONLY=1 builds them and runs nothing. Skipped tests
# are listed at the end (scripts/check_skips.py), and io_uring cases skipped where io_uring works
# fail the run.
set -euo pipefail
cd "$(dirname "$0")/.."
first=${1:-1}
count=${2:-1000}
build=${3:-build/shuffle}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-16 \
    -DWEFT_WERROR=ON -DWEFT_SHUFFLE=ON -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_EXAMPLES=OFF >/dev/null
bins=${WEFT_SHUFFLE_BINS:-test_core test_sched test_sync test_io test_stress test_http
    test_http_server test_bus test_bus_outbox}
targets=$(cmake --build "$build" --target help)
present=()
for bin in $bins; do
    # test_bus_outbox exists only where SQLite was found (WEFT_BUS_SQLITE).
    if grep -q "^$bin:" <<<"$targets"; then
        present+=("$bin")
    else
        echo "shuffle: no target $bin in this configuration, skipped"
    fi
done
cmake --build "$build" --target "${present[@]}"
[ -z "${WEFT_SHUFFLE_BUILD_ONLY:-}" ] || exit 0  # .ci/run builds ahead of the run
rm -rf "$build/shuffle-xml"
mkdir -p "$build/shuffle-xml"
# One seed's runs of every binary; a failure is one line in the seed's .failed file. Two seeds
# run at a time (WEFT_SHUFFLE_JOBS), one per core: each test binary is timed by its own watchdog
# and by counts, never by durations, so sharing the cores changes no verdict.
run_seed() {
    local seed=$1
    for bin in "${present[@]}"; do
        if ! WEFT_SHUFFLE_SEED=$seed WEFT_STRESS_SCALE=${WEFT_STRESS_SCALE:-4} \
            "$build/tests/$bin" --gtest_brief=1 --gtest_output="xml:$build/shuffle-xml/$bin-$seed.xml" \
            >"$build/shuffle-$bin-$seed.log" 2>&1; then
            echo "shuffle: $bin FAILED with WEFT_SHUFFLE_SEED=$seed (log: $build/shuffle-$bin-$seed.log)" |
                tee -a "$build/shuffle-$seed.failed"
        fi
    done
}
export -f run_seed
export build
export WEFT_SHUFFLE_PRESENT="${present[*]}"
rm -f "$build"/shuffle-*.failed
seq "$first" $((first + count - 1)) |
    xargs -P "${WEFT_SHUFFLE_JOBS:-2}" -I{} bash -c 'present=($WEFT_SHUFFLE_PRESENT); run_seed {}'
failed=$(cat "$build"/shuffle-*.failed 2>/dev/null || true)
failed=$(printf '%s' "$failed" | grep -c . || true)
echo "shuffle: seeds $first..$((first + count - 1)) of ${present[*]}: $failed failed runs"
# Every skip of every run, with its reason; io_uring cases skipped where io_uring works fail.
python3 scripts/check_skips.py --step shuffle "$build"/shuffle-xml/*.xml || failed=$((failed + 1))
[ "$failed" -eq 0 ]
