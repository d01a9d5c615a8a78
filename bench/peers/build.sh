#!/usr/bin/env bash
# Builds the Coflux peer programs that weft-bench compares weft against:
#   $OUT/go-coflux     Go        (bench/peers/go)
#   $OUT/tokio-coflux  Rust/tokio (bench/peers/tokio)
#   $OUT/tbb-coflux    C++/oneTBB (bench/peers/tbb)
# Usage: bench/peers/build.sh [OUT]   (OUT defaults to build/peers, relative to the caller's cwd)
#
# Incremental: Go and cargo use their own caches (cargo's target dir is $OUT/tokio-target), CMake
# builds in $OUT/tbb-build. A peer whose toolchain is missing is reported in one line and
# skipped; the others are still built. Exit status 0 only if all three were built.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-build/peers}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)

failed=()
say() { echo "peers: $*" >&2; }
skip() { say "SKIP $1: $2"; failed+=("$1"); }

# Finds a tool: $GO / $CARGO if set (must be executable), else PATH, else the usual install
# location of its official installer.
find_tool() { # name override fallback-path
    if [ -n "$2" ]; then [ -x "$2" ] && echo "$2"; return; fi
    command -v "$1" 2>/dev/null || { [ -x "$3" ] && echo "$3"; }
}

# Copies atomically, so a peer binary that is running right now can still be replaced.
publish() { # src dst
    cp -f "$1" "$2.tmp.$$" && mv -f "$2.tmp.$$" "$2"
}

# --- Go -----------------------------------------------------------------------------------------
if go=$(find_tool go "${GO:-}" /usr/local/go/bin/go); then
    say "building go-coflux"
    # GOTOOLCHAIN=local: build with the installed Go, never download another toolchain.
    if (cd "$here/go" && GOTOOLCHAIN=local "$go" build -trimpath -o "$out/go-coflux" ./cmd/coflux); then
        say "built $out/go-coflux"
    else
        say "FAILED go-coflux"; failed+=(go)
    fi
else
    skip go "'go' not found (need Go >= 1.21: https://go.dev/dl/, or apt-get install golang-go)"
fi

# --- tokio --------------------------------------------------------------------------------------
if cargo=$(find_tool cargo "${CARGO:-}" "$HOME/.cargo/bin/cargo"); then
    say "building tokio-coflux"
    # --locked: use the committed Cargo.lock. tokio is fetched from crates.io on first build.
    if CARGO_TARGET_DIR="$out/tokio-target" "$cargo" build --release --locked --quiet \
            --manifest-path "$here/tokio/Cargo.toml" &&
       publish "$out/tokio-target/release/coflux" "$out/tokio-coflux"; then
        say "built $out/tokio-coflux"
    else
        say "FAILED tokio-coflux"; failed+=(tokio)
    fi
else
    skip tokio "'cargo' not found (install Rust: https://rustup.rs, or apt-get install cargo)"
fi

# --- oneTBB -------------------------------------------------------------------------------------
tbb_build="$out/tbb-build"
if ! command -v cmake >/dev/null 2>&1; then
    skip tbb "'cmake' not found (apt-get install cmake)"
elif ! command -v "${CXX:-c++}" >/dev/null 2>&1; then
    skip tbb "C++ compiler '${CXX:-c++}' not found (apt-get install g++)"
else
    gen="Unix Makefiles"
    command -v ninja >/dev/null 2>&1 && gen=Ninja
    # A build dir configured with another generator cannot be reused: start it afresh.
    if [ -f "$tbb_build/CMakeCache.txt" ] &&
       ! grep -qx "CMAKE_GENERATOR:INTERNAL=$gen" "$tbb_build/CMakeCache.txt"; then
        rm -rf "$tbb_build"
    fi
    say "building tbb-coflux"
    mkdir -p "$tbb_build"
    if ! cmake -S "$here/tbb" -B "$tbb_build" -G "$gen" -DCMAKE_BUILD_TYPE=Release \
            >"$tbb_build/configure.log" 2>&1; then
        if grep -q 'TBB_DIR-NOTFOUND' "$tbb_build/CMakeCache.txt" 2>/dev/null; then
            skip tbb "oneTBB CMake package (TBBConfig.cmake) not found (apt-get install libtbb-dev, or put its install prefix in CMAKE_PREFIX_PATH)"
        else
            cat "$tbb_build/configure.log" >&2
            say "FAILED tbb-coflux (cmake configure, log above)"; failed+=(tbb)
        fi
    elif cmake --build "$tbb_build" && publish "$tbb_build/tbb-coflux" "$out/tbb-coflux"; then
        say "built $out/tbb-coflux"
    else
        say "FAILED tbb-coflux"; failed+=(tbb)
    fi
fi

if [ ${#failed[@]} -gt 0 ]; then
    say "not built: ${failed[*]}"
    exit 1
fi
exit 0
