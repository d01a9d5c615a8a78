#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
# perf_floor.sh SYSTEM CONNS: `perf record -e cpu-clock -a -g` over the whole machine during
# 2 s of `wrk -t2 -cCONNS` against SYSTEM (weft-hello, weft-epoll, weft-percore, asio,
# nginx-hello, hyper); then floor.py gives the server's samples per request in µs, user and
# kernel, and its top kernel functions (self time; softirq work done on the server's threads,
# such as the loopback receive of what it sent, is charged to it as the kernel charges it).
P=${PORT:-28917}
. "$(dirname "$0")/server.sh"
start_profiled $1
PIDS=$(echo $PIDS | tr ' ' ',')
perf record -q -a -g -e cpu-clock -F 2999 -o $WORK/floor.$1.c$2.data -- sleep 2.2 > /dev/null 2>&1 &
PP=$!
sleep 0.1
n=$(wrk -t2 -c$2 -d2s http://127.0.0.1:$P/ | awk '/requests in/{print $1}')
wait $PP
stop_server $1
python3 bench/http/profile/floor.py $WORK/floor.$1.c$2.data "$PIDS" "$n" $1 $2
