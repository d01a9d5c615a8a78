#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
: "${WORK:=/tmp/weft-http-profile}" "${PEERS:=build/peers}" "${ROOT:=$WORK/root}"
: "${BIN:=${WEFT_BIN:-build/release/examples}}"
mkdir -p "$WORK"
# $1 = weft|weft-epoll|asio|nginx-hello, $2 conns: syscalls per request under strace -c -f
# during 2 s of wrk, or with AB_N=N during `ab -r -n N -c CONNS` (a connection per request)
set -u
P=${PORT:-28917}
case $1 in
  weft) $BIN/hello_http --port $P --workers 2 > /dev/null 2>&1 & ;;
  weft-epoll) WEFT_IO_BACKEND=epoll $BIN/hello_http --port $P --workers 2 > /dev/null 2>&1 & ;;
  asio) $PEERS/asio-http --per-core -p $P -t 2 > /dev/null 2>&1 & ;;
  nginx-hello) setsid $PEERS/nginx-hello -p $P -t 2 > /dev/null 2>&1 & ;;
esac
SP=$!
for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$P) 2>/dev/null && break; sleep 0.05; done
case $1 in nginx*) PIDS=$(pgrep -P $(pgrep -P $SP nginx) | sed 's/^/-p /' | tr '\n' ' ');; *) PIDS="-p $SP";; esac
strace -f -c -o $WORK/strace-hello.$1.txt $PIDS &
ST=$!
sleep 0.5
if [ -n "${AB_N:-}" ]; then
  n=$(ab -r -n $AB_N -c $2 http://127.0.0.1:$P/ 2>&1 | awk '/^Complete requests/{print $3}')
else
  n=$(wrk -t2 -c$2 -d2s http://127.0.0.1:$P/ | awk '/requests in/{print $1}')
fi
kill -INT $ST; wait $ST
case $1 in nginx*) kill -TERM -- -$SP;; *) kill -INT $SP;; esac
wait $SP 2>/dev/null; sleep 0.5
echo "== $1 c$2 requests=$n"
awk -v n=$n '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ {printf "  %-16s %8.3f per request\n", $NF, $4/n} $5 ~ /^[0-9]+$/ && $NF ~ /^[a-z_0-9]+$/ && NF==6 {printf "  %-16s %8.3f per request (errors %s)\n", $NF, $4/n, $5}' $WORK/strace-hello.$1.txt | sort -u
