#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
: "${WORK:=/tmp/weft-http-profile}" "${PEERS:=build/peers}"
: "${BIN:=${WEFT_BIN:-build/release/examples}}"
mkdir -p "$WORK"
# $1 = weft|weft-epoll|weft-percore|weft-percore-epoll|nginx|asio|hyper|go, $2 = conns, $3 = requests:
# one `ab -r -n N -c C` run (HTTP/1.0, a connection per request) against GET /. Prints
# requests/s, the server's CPU per request from /proc (user and system from the tick counters
# of /proc/PID/stat, the total also from the nanosecond run times of /proc/PID/task/*/schedstat)
# and the share of the machine's CPU that processes other than the server and ab used meanwhile.
set -u
P=${PORT:-29171}
for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$P) 2>/dev/null || break; sleep 0.05; done
case $1 in
  weft) $BIN/hello_http --port $P --workers 2 > $WORK/srv.log 2>&1 & ;;
  weft-epoll) WEFT_IO_BACKEND=epoll $BIN/hello_http --port $P --workers 2 > $WORK/srv.log 2>&1 & ;;
  weft-percore) $BIN/hello_http --port $P --workers 2 --per-core > $WORK/srv.log 2>&1 & ;;
  weft-percore-epoll) WEFT_IO_BACKEND=epoll $BIN/hello_http --port $P --workers 2 --per-core > $WORK/srv.log 2>&1 & ;;
  nginx) setsid $PEERS/nginx-hello -p $P -t 2 > $WORK/srv.log 2>&1 & ;;
  asio) $PEERS/asio-http ${ASIO_ARGS:-} -p $P -t 2 > $WORK/srv.log 2>&1 & ;;
  hyper) $PEERS/tokio-hyper -p $P -t 2 > $WORK/srv.log 2>&1 & ;;
  go) $PEERS/go-httphello -p $P -t 2 > $WORK/srv.log 2>&1 & ;;
  *) echo "unknown system $1" >&2; exit 2 ;;
esac
SP=$!
for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$P) 2>/dev/null && break; sleep 0.05; done
kill -0 $SP 2>/dev/null || { echo "$1 c$2 INVALID: server exited"; exit 1; }
sleep 0.2
case $1 in nginx*) PIDS=$(pgrep -P $(pgrep -P $SP nginx) | tr '\n' ' ');; *) PIDS=$SP;; esac
ticks() { local u=0 s=0; for p in $PIDS; do read -r a b < <(awk '{print $14, $15}' /proc/$p/stat); u=$((u+a)); s=$((s+b)); done; echo $u $s; }
nsec() { local t=0; for p in $PIDS; do for f in /proc/$p/task/*/schedstat; do t=$((t + $(awk '{print $1}' $f))); done; done; echo $t; }
read -r u0 s0 < <(ticks); n0=$(nsec)
read -r cu0 ci0 < <(awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat)
out=$(/usr/bin/time -f "ABTIME %U %S" ab -r -n $3 -c $2 http://127.0.0.1:$P/ 2>&1)
read -r u1 s1 < <(ticks); n1=$(nsec)
read -r cu1 ci1 < <(awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat)
done_n=$(echo "$out" | awk '/^Complete requests/{print $3}')
failed=$(echo "$out" | awk '/^Failed requests/{print $3}')
non2xx=$(echo "$out" | awk '/^Non-2xx/{print $3}')
rps=$(echo "$out" | awk '/^Requests per second/{print $4}')
at=$(echo "$out" | awk '/ABTIME/{print ($2+$3)*100}')
case $1 in nginx*) kill -TERM -- -$SP;; *) kill -INT $SP;; esac
wait $SP 2>/dev/null
[ -z "$done_n" ] && { echo "$1 c$2 INVALID: $(echo "$out" | tail -2 | tr '\n' ' ')"; exit 1; }
valid=""; [ "${failed:-0}" != 0 ] || [ -n "${non2xx:-}" ] && valid="INVALID failed=$failed non2xx=${non2xx:-0}"
echo "$1 c$2 n=$done_n rps=$rps user_us=$(echo "($u1-$u0)*10000/$done_n" | bc -l | cut -c1-5) sys_us=$(echo "($s1-$s0)*10000/$done_n" | bc -l | cut -c1-5) tot_us=$(echo "($u1-$u0+$s1-$s0)*10000/$done_n" | bc -l | cut -c1-5) run_us=$(echo "($n1-$n0)/1000/$done_n" | bc -l | cut -c1-5) ab_us=$(echo "$at*10000/$done_n" | bc -l | cut -c1-5) other=$(( (cu1-cu0-(u1-u0)-(s1-s0)-${at%.*})*100/((cu1-cu0)+(ci1-ci0)) ))% $valid"
