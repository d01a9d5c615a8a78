#!/usr/bin/env bash
# Builds weft (g++, warnings as errors) and runs the whole test suite through CTest: unit,
# stress and integration tests, the installed-package consumer and the weft-bench harness tests.
# Usage: scripts/test.sh [build-dir]      (default: build/test)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build=${1:-build/test}
# -g1: line tables are what a failing test's stack, a sanitizer report and valgrind print, and
# g++ 12 spends a third of a weft source's compile time on full debug information (-g).
# WEFT_TEST_OPTIMIZE: the test sources at -O1, the libraries, examples and benchmarks at -O2
# (tests/CMakeLists.txt says why). g++ makes a coroutine's symmetric transfer a tail call only
# with -foptimize-sibling-calls (on from -O2): without it a chain of a million awaits overflows
# the stack, as the tests that check it show.
# WEFT_SHUFFLE: the same binaries serve schedule shuffling (scripts/shuffle.sh); without
# WEFT_SHUFFLE_SEED in the environment they schedule as a normal build.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=g++ \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" -DWEFT_SHUFFLE=ON \
    "-DWEFT_TEST_OPTIMIZE=-O1;-foptimize-sibling-calls" \
    -DWEFT_WERROR=ON -DWEFT_BUILD_TESTS=ON -DWEFT_BUILD_BENCH=ON >/dev/null
cmake --build "$build"
# The JUnit report lists every skipped test with its output (scripts/check_skips.py reads it).
ctest --test-dir "$build" --output-on-failure --timeout 600 -j2 --output-junit ctest.xml
