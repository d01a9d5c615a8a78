#!/usr/bin/env bash
# A quick reading of weft's HTTP server beside Go net/http and nginx (weft-bench's HTTP suites
# are the full measurement): wrk -t2 -c100 -d8s --latency against GET / of each
# server in turn, ROUNDS interleaved rounds, printing requests/s, p99 and the server's CPU time
# per request (utime+stime from /proc/PID/stat over the run).
# Usage: bench/http/first_reading.sh BUILD_DIR [ROUNDS]   (needs wrk, nginx, go; 2 workers each)
set -euo pipefail
build=${1:?build dir with examples/hello_http}
rounds=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'for f in "$tmp"/pid.*; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null; done; rm -rf "$tmp"' EXIT
tck=$(getconf CLK_TCK)
(cd "$here/../peers/go" && GOTOOLCHAIN=local go build -trimpath -o "$tmp/go-httphello" ./cmd/httphello)

cpu_ticks() { # pid [pid...]: utime+stime of every process given
    local t=0 p
    for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
    echo "$t"
}

run_one() { # name port pids...
    local name=$1 port=$2; shift 2
    local c0 c1 out
    c0=$(cpu_ticks "$@")
    out=$(wrk -t2 -c100 -d8s --latency "http://127.0.0.1:$port/")
    c1=$(cpu_ticks "$@")
    local rps p99 reqs
    rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    local errs
    errs=$(grep -E "Non-2xx|Socket errors" <<<"$out" || true)
    printf '%-8s %10s req/s  p99 %-8s  CPU/req %6.2f us  %s\n' "$name" "$rps" "$p99" \
        "$(awk -v t=$((c1 - c0)) -v n="$reqs" -v k="$tck" 'BEGIN {print t / k / n * 1e6}')" "$errs"
}

start() { # port command...: starts, waits for the port, prints the pid
    local port=$1; shift
    "$@" >"$tmp/out.$port" 2>&1 &
    local pid=$!
    echo "$pid" >"$tmp/pid.$port"
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$pid"; return; fi
        sleep 0.05
    done
    echo "could not start: $*" >&2; cat "$tmp/out.$port" >&2; exit 1
}

stop() { # pid: SIGTERM, then wait for it to go (it is not this shell's child)
    kill "$1" 2>/dev/null || true
    while kill -0 "$1" 2>/dev/null; do sleep 0.05; done
}

mkdir -p "$tmp/nginx/logs"
sed "s/__PORT__/18092/" "$here/../peers/nginx/nginx.conf" >"$tmp/nginx/nginx.conf"
for r in $(seq "$rounds"); do
    echo "round $r"
    pid=$(start 18090 "$build/examples/hello_http" --port 18090 --workers 2)
    run_one weft 18090 "$pid"; stop "$pid"
    pid=$(start 18091 "$tmp/go-httphello" -p 18091 -t 2)
    run_one go 18091 "$pid"; stop "$pid"
    pid=$(start 18092 nginx -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -g "worker_processes 2; pid $tmp/nginx/nginx.pid;")
    sleep 0.2
    run_one nginx 18092 $(pgrep -P "$pid") "$pid"; stop "$pid"
done
