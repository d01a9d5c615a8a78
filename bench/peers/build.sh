#!/usr/bin/env bash
# Builds the peer programs that weft-bench compares weft against:
#   $OUT/go-coflux     $OUT/go-echo     $OUT/go-sake     Go         (bench/peers/go;
#                      $OUT/go-echoclient: the echo rows' load client from outside weft;
#                      $OUT/go-httphello: net/http with the routes of examples/hello_http
#                      (-cert/-key: HTTPS, the https suite; -h2c: HTTP/2 cleartext, http2);
#                      $OUT/go-fileserver: net/http's http.FileServer, for http-static;
#                      $OUT/go-wsecho, $OUT/go-wsload: gorilla/websocket's echo server and the
#                      websocket suite's load client)
#   $OUT/tungstenite-echo               Rust/tokio-tungstenite (bench/peers/tungstenite)
#   $OUT/tokio-coflux  $OUT/tokio-echo  $OUT/tokio-sake  Rust/tokio (bench/peers/tokio;
#                      $OUT/tokio-hyper: hyper 1.x's HTTP/1 server; --cert/--key: over
#                      tokio-rustls, --h2 1: HTTP/2 cleartext)
#                      $OUT/minihttp    Rust/may_minihttp (bench/peers/minihttp; the pipelining ceiling)
#   $OUT/tbb-coflux                     C++/oneTBB (bench/peers/tbb)
#                      $OUT/asio-echo   C++/Asio   (bench/peers/asio; --per-core: a context per thread;
#                      $OUT/asio-http: minimal HTTP/1.1 framing over the same server,
#                      --cert/--key: over asio::ssl (OpenSSL, libssl-dev);
#                      $OUT/asio-echo-gxx: asio-echo built with g++, for its shared context)
#                      $OUT/beast-http  C++/Boost.Beast (bench/peers/beast; built with g++)
#                      $OUT/nginx-hello Debian's nginx with nginx/nginx.conf (bench/peers/nginx/run.sh;
#                                       -r ROOT: nginx/static.conf, files served with sendfile;
#                                       -c CERT -k KEY: TLS; -2: HTTP/2)
#   $OUT/cnats-pub  $OUT/rdkafka-pub  C, the raw NATS and Kafka clients (bench/peers/cnats, rdkafka;
#                      libnats-dev, librdkafka-dev) for the eventbus suite
#   $OUT/go-bus     Go (bench/peers/go/bus, a module of its own: nats.go, franz-go, Watermill)
#   $OUT/natscli-pub    natscli's `nats bench js pub async` (pinned, `go install` into
#                       $OUT/natscli-bin), run by bench/peers/benchtools/natscli_pub.py
#   $OUT/kafka-perf-pub Kafka's ProducerPerformance (kafka-tools, JDK 17; Maven fetches it into
#                       $OUT/kafka-perf-lib), run by bench/peers/benchtools/kafka_perf_pub.py
#   $OUT/BUILD-FLAGS.json: each peer's toolchain and flags (shown in the report)
# Usage: bench/peers/build.sh [OUT]   (OUT defaults to build/peers, relative to the caller's cwd)
#
# Incremental: Go and cargo use their own caches (cargo's target dir is $OUT/tokio-target), CMake
# builds in $OUT/<dir>-build (and $OUT/asio-gxx-build, $OUT/beast-gxx-build). A peer whose
# toolchain is missing is reported in one line and skipped; the others are still built. Exit
# status 0 only if all of them were built.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-build/peers}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)

failed=()
say() { echo "peers: $*" >&2; }
skip() { # "prog [prog...]" message
    local -a progs
    read -ra progs <<<"$1"
    say "SKIP $1: $2"; failed+=("${progs[@]}")
}

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
    for prog in coflux echo echoclient sake httphello fileserver wsecho wsload; do
        say "building go-$prog"
        # GOTOOLCHAIN=local: build with the installed Go, never download another toolchain.
        if (cd "$here/go" && GOTOOLCHAIN=local "$go" build -trimpath -o "$out/go-$prog" "./cmd/$prog"); then
            say "built $out/go-$prog"
        else
            say "FAILED go-$prog"; failed+=("go-$prog")
        fi
    done
else
    skip "go-coflux go-echo go-echoclient go-sake go-httphello go-fileserver go-wsecho go-wsload" "'go' not found (need Go >= 1.24: https://go.dev/dl/)"
fi

# --- tokio --------------------------------------------------------------------------------------
if cargo=$(find_tool cargo "${CARGO:-}" "$HOME/.cargo/bin/cargo"); then
    say "building tokio-coflux tokio-echo tokio-sake tokio-hyper"
    # --locked: use the committed Cargo.lock. tokio, hyper and tokio-rustls are fetched from
    # crates.io on first build. One cargo build makes all four binaries (src/main.rs -> coflux, src/bin/echo.rs ->
    # echo, src/bin/sake.rs -> sake, src/bin/hyper.rs -> hyper).
    if CARGO_TARGET_DIR="$out/tokio-target" "$cargo" build --release --locked --quiet \
            --manifest-path "$here/tokio/Cargo.toml"; then
        for prog in coflux echo sake hyper; do
            if publish "$out/tokio-target/release/$prog" "$out/tokio-$prog"; then
                say "built $out/tokio-$prog"
            else
                say "FAILED tokio-$prog"; failed+=("tokio-$prog")
            fi
        done
    else
        say "FAILED tokio-coflux tokio-echo tokio-sake tokio-hyper"
        failed+=(tokio-coflux tokio-echo tokio-sake tokio-hyper)
    fi
else
    skip "tokio-coflux tokio-echo tokio-sake tokio-hyper" "'cargo' not found (install Rust: https://rustup.rs, or apt-get install cargo)"
fi

# --- may_minihttp (the pipelining ceiling; a crate of its own, so its deps stay out of tokio's) --
if [ -n "${cargo:-}" ]; then
    say "building minihttp"
    if CARGO_TARGET_DIR="$out/minihttp-target" "$cargo" build --release --locked --quiet \
            --manifest-path "$here/minihttp/Cargo.toml" &&
       publish "$out/minihttp-target/release/minihttp" "$out/minihttp"; then
        say "built $out/minihttp"
    else
        say "FAILED minihttp"; failed+=(minihttp)
    fi
else
    skip minihttp "'cargo' not found (install Rust: https://rustup.rs, or apt-get install cargo)"
fi

# --- tokio-tungstenite (the websocket suite's peer; a crate of its own, like minihttp) ------------
if [ -n "${cargo:-}" ]; then
    say "building tungstenite-echo"
    if CARGO_TARGET_DIR="$out/tungstenite-target" "$cargo" build --release --locked --quiet \
            --manifest-path "$here/tungstenite/Cargo.toml" &&
       publish "$out/tungstenite-target/release/tungstenite-echo" "$out/tungstenite-echo"; then
        say "built $out/tungstenite-echo"
    else
        say "FAILED tungstenite-echo"; failed+=(tungstenite-echo)
    fi
else
    skip tungstenite-echo "'cargo' not found (install Rust: https://rustup.rs, or apt-get install cargo)"
fi

# --- CMake peers (oneTBB, Asio, Beast) ----------------------------------------------------------
# Built Release (-O3 -DNDEBUG) with weft's compiler, clang 16 (scripts/bench.sh), so that no
# comparison is between two compilers' code. Two exceptions: Asio's coroutines built with clang 16
# crash when a coroutine resumes on another thread of a shared io_context (asio-echo without
# --per-core segfaulted within 2 s of echo load at c=100; --per-core and asio-http --per-core
# run clean), so the shared-context echo row uses asio-echo-gxx, built with g++ 12, and
# weft-bench shows weft's g++ build beside it (galay-net, weft=g++). Beast's server, one
# io_context on two threads, crashes the same way (SIGSEGV within 2 s of wrk -c100 keep-alive
# load), so beast-http is built with g++ 12 too.
# PEER_CXX / PEER_CXX_GXX override the two compilers.
peer_cxx=${PEER_CXX:-clang++-16}
peer_cxx_gxx=${PEER_CXX_GXX:-g++}
# Configures $here/DIR in $out/BUILD (default DIR-build) with compiler CXX (default $peer_cxx)
# and copies its targets PROG... to $out, each as PROG followed by SUFFIX. If configuring fails
# because the library's package was not found (CMake cache entry NOTFOUND_VAR-NOTFOUND), says
# MISSING_MSG in one line instead of dumping the configure log.
cmake_peer() { # dir "prog [prog...]" notfound_var missing_msg [cxx build suffix]
    local dir=$1 prog=$2 notfound_var=$3 missing_msg=$4 p
    local peer_cxx=${5:-$peer_cxx} build="$out/${6:-$dir-build}" suffix=${7:-}
    if ! command -v cmake >/dev/null 2>&1; then
        skip "$prog" "'cmake' not found (apt-get install cmake)"; return
    fi
    if ! command -v "$peer_cxx" >/dev/null 2>&1; then
        skip "$prog" "C++ compiler '$peer_cxx' not found (apt-get install clang-16, or set PEER_CXX)"; return
    fi
    local gen="Unix Makefiles"
    command -v ninja >/dev/null 2>&1 && gen=Ninja
    # A build dir configured with another generator cannot be reused: start it afresh.
    if [ -f "$build/CMakeCache.txt" ] &&
       ! grep -qx "CMAKE_GENERATOR:INTERNAL=$gen" "$build/CMakeCache.txt"; then
        rm -rf "$build"
    fi
    say "building $prog"
    mkdir -p "$build"
    if ! cmake -S "$here/$dir" -B "$build" -G "$gen" -DCMAKE_BUILD_TYPE=Release \
            -DCMAKE_CXX_COMPILER="$peer_cxx" >"$build/configure.log" 2>&1; then
        if grep -q "$notfound_var-NOTFOUND" "$build/CMakeCache.txt" 2>/dev/null; then
            skip "$prog" "$missing_msg"
        else
            cat "$build/configure.log" >&2
            say "FAILED $prog (cmake configure, log above)"; read -ra p <<<"$prog"; failed+=("${p[@]}")
        fi
    elif cmake --build "$build"; then
        for p in $prog; do
            if publish "$build/$p" "$out/$p$suffix"; then
                say "built $out/$p$suffix ($peer_cxx)"
            else
                say "FAILED $p$suffix"; failed+=("$p$suffix")
            fi
        done
    else
        say "FAILED $prog"; read -ra p <<<"$prog"; failed+=("${p[@]}")
    fi
}

cmake_peer tbb tbb-coflux TBB_DIR \
    "oneTBB CMake package (TBBConfig.cmake) not found (apt-get install libtbb-dev, or put its install prefix in CMAKE_PREFIX_PATH)"
cmake_peer asio "asio-echo asio-http" ASIO_INCLUDE_DIR \
    "standalone Asio header asio.hpp not found (apt-get install libasio-dev, or pass its include dir via CMAKE_PREFIX_PATH/ASIO_INCLUDE_DIR)"
cmake_peer asio asio-echo ASIO_INCLUDE_DIR \
    "standalone Asio header asio.hpp not found (apt-get install libasio-dev, or pass its include dir via CMAKE_PREFIX_PATH/ASIO_INCLUDE_DIR)" \
    "$peer_cxx_gxx" asio-gxx-build -gxx
cmake_peer beast beast-http Boost_DIR \
    "Boost's CMake package (BoostConfig.cmake, with Beast) not found (apt-get install libboost-dev)" \
    "$peer_cxx_gxx" beast-gxx-build

# --- nginx (Debian's package; nothing to compile: the launcher and its config are installed) ---
if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then
    if publish "$here/nginx/run.sh" "$out/nginx-hello" &&
       publish "$here/nginx/nginx.conf" "$out/nginx-hello.conf" &&
       publish "$here/nginx/static.conf" "$out/nginx-static.conf"; then
        say "installed $out/nginx-hello"
    else
        say "FAILED nginx-hello"; failed+=(nginx-hello)
    fi
else
    skip nginx-hello "'nginx' not found (apt-get install nginx-light, or bash scripts/setup.sh)"
fi

# --- eventbus: the raw C clients (cnats, librdkafka) and the Go seed shape ----------------------
# C built -O2 with the system's cc against Debian's libnats-dev and librdkafka-dev, found by
# pkg-config, the same libraries weft::bus_nats and weft::bus_kafka link.
peer_cc=${PEER_CC:-cc}
c_peer() { # prog source pkg-config-name missing-msg
    local prog=$1 src=$2 pc=$3 msg=$4 flags
    if ! command -v "$peer_cc" >/dev/null 2>&1; then
        skip "$prog" "C compiler '$peer_cc' not found (apt-get install gcc, or set PEER_CC)"; return
    fi
    if ! flags=$(pkg-config --cflags --libs "$pc" 2>/dev/null); then
        skip "$prog" "$msg"; return
    fi
    say "building $prog"
    # shellcheck disable=SC2086 # pkg-config's flags are words
    if "$peer_cc" -O2 -o "$out/$prog.tmp.$$" "$here/$src" $flags -lpthread &&
       mv -f "$out/$prog.tmp.$$" "$out/$prog"; then
        say "built $out/$prog"
    else
        say "FAILED $prog"; failed+=("$prog")
    fi
}
c_peer cnats-pub cnats/cnats_pub.c libnats "cnats not found (apt-get install libnats-dev)"
c_peer rdkafka-pub rdkafka/rdkafka_pub.c rdkafka "librdkafka not found (apt-get install librdkafka-dev)"
if [ -n "${go:-}" ]; then
    say "building go-bus"
    # A module of its own (go.mod and go.sum in bench/peers/go/bus): its dependencies, fetched
    # from the module proxy on first build, stay out of the other Go peers' module.
    if (cd "$here/go/bus" && GOTOOLCHAIN=local "$go" build -trimpath -o "$out/go-bus" ./cmd/bus); then
        say "built $out/go-bus"
    else
        say "FAILED go-bus"; failed+=(go-bus)
    fi
else
    skip go-bus "'go' not found (need Go >= 1.26 for this module: https://go.dev/dl/)"
fi

# --- eventbus: the brokers' own benchmark tools, run unchanged --------------------------------
# natscli's `nats bench js pub async` (pinned; `go install` into $OUT/natscli-bin) and Kafka's
# ProducerPerformance (kafka-tools, the broker's version, fetched by Maven from Central with
# scripts/kafka/tools/pom.xml into $OUT/kafka-perf-lib). Each gets a launcher that speaks
# weft-bench's protocol (bench/peers/benchtools: parameters, the tool's own figures, its CPU
# from /proc), copied to $OUT with the helper module they share.
install_tool_peer() { # launcher source-name
    publish "$here/benchtools/toolpeer.py" "$out/toolpeer.py" &&
        publish "$here/benchtools/$2" "$out/$1" && chmod +x "$out/$1"
}
natscli_version=v0.5.0
if [ -n "${go:-}" ]; then
    if [ -x "$out/natscli-bin/nats" ] && [ "$("$out/natscli-bin/nats" --version 2>/dev/null)" = "$natscli_version" ]; then
        say "natscli $natscli_version already in $out/natscli-bin"
    else
        say "installing natscli $natscli_version (go install)"
        # GOTOOLCHAIN=local as above; the module's own go.mod pins its dependencies.
        GOTOOLCHAIN=local GOBIN="$out/natscli-bin" "$go" install \
            "github.com/nats-io/natscli/nats@$natscli_version" || rm -f "$out/natscli-bin/nats"
    fi
    if [ -x "$out/natscli-bin/nats" ] && install_tool_peer natscli-pub natscli_pub.py; then
        say "built $out/natscli-pub (natscli $natscli_version)"
    else
        say "FAILED natscli-pub"; failed+=(natscli-pub)
    fi
else
    skip natscli-pub "'go' not found (go install of natscli $natscli_version: https://go.dev/dl/)"
fi
kafka_tools_pom=$here/../../scripts/kafka/tools/pom.xml
kafka_tools_version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$kafka_tools_pom")
if ! command -v java >/dev/null 2>&1; then
    skip kafka-perf-pub "'java' not found (JDK 17: apt-get install openjdk-17-jdk-headless)"
elif ! command -v mvn >/dev/null 2>&1; then
    skip kafka-perf-pub "'mvn' not found (it fetches kafka-tools: apt-get install maven)"
else
    lib="$out/kafka-perf-lib"
    stamp="$lib/.weft-kafka-tools-$kafka_tools_version"
    if [ ! -f "$stamp" ]; then
        say "fetching kafka-tools $kafka_tools_version and its dependencies into $lib"
        rm -rf "$lib" && mkdir -p "$lib"
        if (cd "$(dirname "$kafka_tools_pom")" && mvn -q -B dependency:copy-dependencies \
                -DincludeScope=runtime -DoutputDirectory="$lib") >"$lib.mvn.log" 2>&1; then
            touch "$stamp"
        else
            tail -n 20 "$lib.mvn.log" >&2
        fi
    fi
    if [ -f "$stamp" ] && install_tool_peer kafka-perf-pub kafka_perf_pub.py; then
        say "built $out/kafka-perf-pub (kafka-tools $kafka_tools_version)"
    else
        say "FAILED kafka-perf-pub"; failed+=(kafka-perf-pub)
    fi
fi

# What each peer was built with, for the report (weft-bench reads $out/BUILD-FLAGS.json).
cxx_version=$("$peer_cxx" --version 2>/dev/null | head -1)
cxx_gxx_version=$("$peer_cxx_gxx" --version 2>/dev/null | head -1)
go_version=$( [ -n "${go:-}" ] && "$go" version 2>/dev/null)
rustc_version=$(command -v rustc >/dev/null 2>&1 && rustc --version 2>/dev/null)
nginx_version=$( (nginx -v || /usr/sbin/nginx -v) 2>&1 | head -1)
cc_version=$("$peer_cc" --version 2>/dev/null | head -1)
nats_c_version=$(pkg-config --modversion libnats 2>/dev/null)
rdkafka_version=$(pkg-config --modversion rdkafka 2>/dev/null)
java_version=$(command -v java >/dev/null 2>&1 && java -version 2>&1 | head -1)
go_bus_modules=$(sed -n 's/^\t\(github.com[^ ]*\) \(v[^ ]*\)$/\1 \2/p' "$here/go/bus/go.mod" | paste -sd, -)
python3 - "$out/BUILD-FLAGS.json" "$cxx_version" "$go_version" "$rustc_version" "$nginx_version" \
    "$cc_version" "$nats_c_version" "$rdkafka_version" "$go_bus_modules" \
    "$natscli_version" "$kafka_tools_version" "$java_version" "$cxx_gxx_version" <<'PY'
import json, sys
path, cxx, go, rustc, nginx, cc, natsc, rdkafka, gobus, natscli, ktools, java, gxx = sys.argv[1:14]
json.dump({
    "weft": "scripts/bench.sh: clang++-16, CMAKE_BUILD_TYPE=Release (-O3 -DNDEBUG); "
            "weft=g++ rows: bench_server built with g++ the same way (build/release-gxx)",
    "asio, tbb (C++)": f"{cxx or 'not found'}, weft's compiler; CMAKE_BUILD_TYPE=Release "
                       "(-O3 -DNDEBUG)",
    "asio-echo-gxx (galay-net's shared-context asio), beast":
        f"{gxx or 'not found'}; CMAKE_BUILD_TYPE=Release (-O3 -DNDEBUG): Asio's coroutines "
        "built with clang 16 crash when they resume on another thread of a shared io_context "
        "(Beast's server is one)",
    "go": f"{go or 'not found'}; go build -trimpath (default optimisation)",
    "tokio, hyper, minihttp (Rust)": f"{rustc or 'not found'}; cargo build --release (opt-level 3, "
                           "thin LTO, codegen-units 1); hyper's TLS: tokio-rustls 0.26 at its "
                           "default features (rustls's default crypto provider)",
    "nginx": f"{nginx or 'not found'} (Debian's nginx-light); bench/peers/nginx/nginx.conf: "
             "access log off, keepalive_requests 1000000, reuseport; static.conf (http-static): "
             "sendfile on, tcp_nopush on, open_file_cache off; https: listen ... ssl, "
             "ssl_protocols TLSv1.2 TLSv1.3; http2: listen ... http2 (cleartext: h2c)",
    "cnats-pub, rdkafka-pub (C)": f"{cc or 'not found'} -O2; cnats {natsc or 'not found'}, "
                                  f"librdkafka {rdkafka or 'not found'} (Debian's, as weft links)",
    "go-bus": f"{go or 'not found'}; go build -trimpath; {gobus or 'modules unknown'}",
    "natscli-pub": f"natscli {natscli} (go install github.com/nats-io/natscli/nats@{natscli}, "
                   f"{go or 'go not found'}): nats bench js pub async --create --dedup "
                   "--batch max_pending (bench/peers/benchtools/natscli_pub.py)",
    "kafka-perf-pub": f"org.apache.kafka:kafka-tools {ktools} ProducerPerformance on "
                      f"{java or 'java not found'}, kafka-producer-perf-test.sh's JVM options "
                      "(-Xmx512M, G1, MaxGCPauseMillis=20) (bench/peers/benchtools/"
                      "kafka_perf_pub.py)",
}, open(path, "w"), indent=1)
PY

if [ ${#failed[@]} -gt 0 ]; then
    say "not built: ${failed[*]}"
    exit 1
fi
exit 0
