#!/usr/bin/env bash
# valgrind memcheck over the echo server (bench_server) under a few seconds of bench_client
# load, stopped with SIGINT, then over the HTTP server (examples/hello_http) under wrk keep-alive
# load, POSTs, a pipelined pair and a malformed request, drained with SIGTERM; each on the epoll
# backend and on io_uring. Fails on any memcheck error or definitely-lost byte.
# On io_uring two things make this work (both only when valgrind's header was found at configure
# time, WEFT_HAVE_VALGRIND): the reactor's park never blocks for long in io_uring_enter under
# valgrind (valgrind 3.19 holds its big lock across that call, see uring_reactor.cpp), and every
# completion that reports memory the kernel wrote marks those bytes defined for memcheck
# (src/io/kernel_writes.hpp); a read past a completion's count is still reported.
# usage: scripts/memcheck.sh [build-dir] [backends]   (default build/memcheck "epoll io_uring";
# RelWithDebInfo, g++)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/memcheck}
backends=${2:-epoll io_uring}
# An existing build directory is used as it is configured (it must build the bench targets):
# .ci/run passes the g++ RelWithDebInfo build of its tests.
if [ ! -f "$build/CMakeCache.txt" ]; then
    nice -n 19 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_COMPILER=g++ -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_BENCH=ON >/dev/null
fi
grep -q '^WEFT_HAVE_VALGRIND:INTERNAL=1' "$build/CMakeCache.txt" || {
    echo "memcheck: <valgrind/memcheck.h> not found (apt: valgrind): io_uring cannot be checked"
    exit 1
}
nice -n 19 cmake --build "$build" --target bench_server bench_client hello_http -j2 >/dev/null
log=$(mktemp)
out=$(mktemp)
trap 'rm -f "$log" "$out" "$out.raw"' EXIT
vg=(valgrind --tool=memcheck --error-exitcode=1 --leak-check=full
    --errors-for-leak-kinds=definite --log-file="$log")

# Wait for "listening on" in $out (valgrind start-up is slow), bounded to 30 s.
wait_listening() {
    for _ in $(seq 300); do
        grep -q 'listening on' "$out" && return 0
        kill -0 "$1" 2>/dev/null || { cat "$out" "$log"; return 1; }
        sleep 0.1
    done
    echo "memcheck: $2 did not start"
    kill -KILL "$1"
    return 1
}

# Wait for valgrind ($1) to end and judge its log; $2 names the run.
verdict() {
    local rc=0
    wait "$1" || rc=$?
    grep -E 'ERROR SUMMARY|definitely lost|indirectly lost|possibly lost' "$log" || true
    if [ "$rc" -ne 0 ]; then
        cat "$log"
        echo "memcheck: $2 FAILED (exit $rc)"
        exit 1
    fi
    echo "memcheck: $2 ok"
}

echo_server() {
    # bench_server prints the port it was given, not the one bound: pick one below the
    # ephemeral range (32768 up), where load tools' client sockets cannot hold it.
    local backend=$1 port=$((20000 + RANDOM % 12000))
    : >"$log"
    : >"$out"
    "${vg[@]}" "$build/bench/bench_server" -h 127.0.0.1 -p "$port" -t 2 -b "$backend" \
        >"$out" 2>&1 &
    local pid=$!
    wait_listening "$pid" "echo server ($backend)" || exit 1
    # The client runs outside valgrind, on the same backend.
    "$build/bench/bench_client" -h 127.0.0.1 -p "$port" -c 8 -s 64 -d 3 -b "$backend"
    kill -INT "$pid"
    verdict "$pid" "echo server ($backend)"
}

http_server() {
    local backend=$1 port
    : >"$log"
    : >"$out"
    WEFT_IO_BACKEND=$backend "${vg[@]}" "$build/examples/hello_http" --port 0 \
        --workers 2 >"$out" 2>&1 &
    local pid=$!
    wait_listening "$pid" "HTTP server ($backend)" || exit 1
    port=$(grep -o 'listening on .*' "$out" | head -1 | sed 's/.*://')
    # (A forced backend that cannot start fails the server: no silent fallback to epoll.)
    local url="http://127.0.0.1:$port"
    wrk -t2 -c16 -d3s "$url/" | grep -E 'requests in|Non-2xx|Socket errors' || true
    for i in $(seq 20); do
        curl -s -o /dev/null -X POST --data-binary "body $i" "$url/echo"
    done
    curl -s -o /dev/null "$url/missing"
    # Two pipelined requests, then one the parser refuses (two Content-Lengths): answered 400.
    printf 'GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\nPOST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab' |
        timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; cat >&3; cat <&3" >"$out.raw" || true
    local statuses
    statuses=$(grep -ao 'HTTP/1.1 [0-9]*' "$out.raw" | cut -d' ' -f2 | tr '\n' ' ')
    echo "memcheck: pipelined + malformed ($backend) -> $statuses"
    [ "$statuses" = "200 200 400 " ] || {
        echo "memcheck: expected 200 200 400"
        kill -TERM "$pid"
        exit 1
    }
    kill -TERM "$pid"
    verdict "$pid" "HTTP server ($backend)"
}

for backend in $backends; do
    echo_server "$backend"
    http_server "$backend"
done
