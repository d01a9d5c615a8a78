#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
# perf_floor.sh SYSTEM CONNS: `perf record -e cpu-clock -a -g` over the whole machine during
# 2 s of `wrk -t2 -cCONNS` against SYSTEM (weft-hello, weft-epoll, weft-percore, asio,
# nginx-hello, hyper); then floor.py gives the server's samples per request in µs, user and
# kernel, and its top kernel functions (self time; softirq work done on the server's threads,
# such as the loopback receive of what it sent, is charged to it as the kernel charges it).
: "${WORK:=/tmp/weft-http-profile}" "${PEERS:=build/peers}"
: "${BIN:=${WEFT_BIN:-build/release/examples}}"
mkdir -p "$WORK"
set -u
P=${PORT:-28917}
for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$P) 2>/dev/null || break; sleep 0.05; done
case $1 in
  weft-hello) $BIN/hello_http --port $P --workers 2 > /dev/null 2>&1 & ;;
  weft-epoll) WEFT_IO_BACKEND=epoll $BIN/hello_http --port $P --workers 2 > /dev/null 2>&1 & ;;
  weft-percore) $BIN/hello_http --port $P --workers 2 --per-core > /dev/null 2>&1 & ;;
  asio) $PEERS/asio-http --per-core -p $P -t 2 > /dev/null 2>&1 & ;;
  hyper) $PEERS/tokio-hyper -p $P -t 2 > /dev/null 2>&1 & ;;
  nginx-hello) setsid $PEERS/nginx-hello -p $P -t 2 > /dev/null 2>&1 & ;;
esac
SP=$!
for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$P) 2>/dev/null && break; sleep 0.05; done
case $1 in nginx*) PIDS=$(pgrep -P $(pgrep -P $SP nginx) | tr '\n' ',' | sed 's/,$//');; *) PIDS=$SP;; esac
perf record -q -a -g -e cpu-clock -F 2999 -o $WORK/floor.$1.c$2.data -- sleep 2.2 > /dev/null 2>&1 &
PP=$!
sleep 0.1
n=$(wrk -t2 -c$2 -d2s http://127.0.0.1:$P/ | awk '/requests in/{print $1}')
wait $PP
case $1 in nginx*) kill -TERM -- -$SP;; *) kill -INT $SP;; esac
wait $SP 2>/dev/null
python3 bench/http/profile/floor.py $WORK/floor.$1.c$2.data "$PIDS" "$n" $1 $2
