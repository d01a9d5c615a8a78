#!/usr/bin/env bash
# Builds weft (g++, warnings as errors) and runs the whole test suite through CTest: unit,
# stress and integration tests, the installed-package consumer and the weft-bench harness tests.
# Usage: scripts/test.sh [build-dir]      (default: build/test)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build=${1:-build/test}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=g++ \
    -DWEFT_WERROR=ON -DWEFT_BUILD_TESTS=ON -DWEFT_BUILD_BENCH=ON -DWEFT_CHECK_HEADERS=ON >/dev/null
cmake --build "$build"
# The JUnit report lists every skipped test with its output (scripts/check_skips.py reads it).
ctest --test-dir "$build" --output-on-failure --timeout 600 -j2 --output-junit ctest.xml
