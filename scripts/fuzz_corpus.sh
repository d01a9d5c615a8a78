#!/usr/bin/env bash
# Keeps the fuzz targets' checked-in corpora (tests/fuzz/corpus/<target>/) growing with what the
# fuzzers find, and small. For each target (or those named):
#   1. with SECONDS > 0, fuzzes it that long from a new seed into <build>/tests/fuzz/found/<target>/
#      (where the CTest runs leave their new inputs too);
#   2. merges found/<target>/ into the corpus with libFuzzer's -merge=1 (edges only,
#      -use_counters=0): an input is added only when it reaches an edge the corpus does not
#      (named by its SHA-1, as libFuzzer names it);
#   3. with --minimize, keeps the hand-written inputs (named for what they test) and reduces the
#      found ones (SHA-1 names) to those that reach an edge nothing else does.
# A crash, leak or timeout stops the script with the fuzzer's report: fix it, add the input to a
# unit test, then rerun. Review and commit the corpus changes it leaves (git status).
# Usage: scripts/fuzz_corpus.sh [--minimize] [SECONDS] [build-dir] [target...]
#        (defaults: 0 seconds, build/fuzz, every target with a corpus)
set -euo pipefail
cd "$(dirname "$0")/.."
minimize=0
if [ "${1:-}" = --minimize ]; then
    minimize=1
    shift
fi
seconds=${1:-0}
build=${2:-build/fuzz}
shift $(($# > 2 ? 2 : $#))
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    for d in tests/fuzz/corpus/*/; do targets+=("$(basename "$d")"); done
fi

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-16 \
    -DWEFT_BUILD_FUZZ=ON -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_BENCH=OFF \
    -DWEFT_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" --target "${targets[@]}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

for t in "${targets[@]}"; do
    bin=$build/tests/fuzz/$t
    corpus=tests/fuzz/corpus/$t
    found=$build/tests/fuzz/found/$t
    mkdir -p "$corpus" "$found"
    before=$(find "$corpus" -type f | wc -l)
    if [ "$seconds" -gt 0 ]; then
        echo "fuzz_corpus: $t: fuzzing for $seconds s"
        "$bin" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
            -artifact_prefix="$build/tests/fuzz/found/$t-" "$found" "$corpus" 2>"$found.log" || {
            tail -n 40 "$found.log" >&2
            echo "fuzz_corpus: $t failed (log: $found.log)" >&2
            exit 1
        }
    fi
    if [ "$minimize" = 1 ]; then
        # The hand-written inputs (named for what they test) stay; the found ones (named by
        # their SHA-1) are reduced to those that reach an edge the others do not.
        merged=$(mktemp -d)
        found_old=$(mktemp -d)
        for f in "$corpus"/*; do
            [ -f "$f" ] || continue
            if [[ "$(basename "$f")" =~ ^[0-9a-f]{40}$ ]]; then
                mv "$f" "$found_old"/
            else
                cp "$f" "$merged"/
            fi
        done
        "$bin" -merge=1 -use_counters=0 -max_len=4096 -timeout=10 "$merged" "$found_old" "$found" \
            2>"$found.merge.log" || { tail -n 20 "$found.merge.log" >&2; exit 1; }
        for f in "$merged"/*; do
            [ -f "$corpus/$(basename "$f")" ] || mv "$f" "$corpus"/
        done
        rm -rf "$merged" "$found_old"
    else
        "$bin" -merge=1 -use_counters=0 -max_len=4096 -timeout=10 "$corpus" "$found" \
            2>"$found.merge.log" || { tail -n 20 "$found.merge.log" >&2; exit 1; }
    fi
    after=$(find "$corpus" -type f | wc -l)
    echo "fuzz_corpus: $t: $before -> $after inputs ($(du -sb "$corpus" | cut -f1) bytes)"
done
