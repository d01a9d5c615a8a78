#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
# $1 = weft|weft-epoll|asio|nginx-hello, $2 conns: syscalls per request under strace -c -f
# during 2 s of wrk, or with AB_N=N during `ab -r -n N -c CONNS` (a connection per request)
P=${PORT:-28917}
. "$(dirname "$0")/server.sh"
start_profiled $1
PIDS=$(for p in $PIDS; do echo -n "-p $p "; done)
strace -f -c -o $WORK/strace-hello.$1.txt $PIDS &
ST=$!
sleep 0.5
if [ -n "${AB_N:-}" ]; then
  n=$(ab -r -n $AB_N -c $2 http://127.0.0.1:$P/ 2>&1 | awk '/^Complete requests/{print $3}')
else
  n=$(wrk -t2 -c$2 -d2s http://127.0.0.1:$P/ | awk '/requests in/{print $1}')
fi
kill -INT $ST; wait $ST
stop_server $1; sleep 0.5
echo "== $1 c$2 requests=$n"
awk -v n=$n '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ {printf "  %-16s %8.3f per request\n", $NF, $4/n} $5 ~ /^[0-9]+$/ && $NF ~ /^[a-z_0-9]+$/ && NF==6 {printf "  %-16s %8.3f per request (errors %s)\n", $NF, $4/n, $5}' $WORK/strace-hello.$1.txt | sort -u
