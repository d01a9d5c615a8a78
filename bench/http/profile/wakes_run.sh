#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
# $1 = weft|weft-epoll, $2 = conns, $3 = requests: one `ab -r -n N -c CONNS` run (a connection
# per request) against hello_http --workers 2, counting with perf's tracepoints what the server
# did per request: write calls (the server's only writes are the eventfd writes that wake a
# parked worker: responses leave by io_uring send or sendmsg), futex waits and wakes, and its
# context switches (voluntary and not). Counts only: run it beside ab_run.sh for the CPU.
P=${PORT:-29173}
case $1 in weft|weft-epoll) ;; *) echo "unknown system $1" >&2; exit 2 ;; esac
. "$(dirname "$0")/server.sh"
start_server $1 $WORK/srv.log || { echo "$1 c$2 INVALID: server exited"; exit 1; }
sleep 0.2
perf stat -x, -o $WORK/wakes.$1.txt -e syscalls:sys_enter_write,syscalls:sys_enter_futex,syscalls:sys_enter_io_uring_enter,context-switches -p $SP &
PF=$!
sleep 0.3
out=$(ab -r -n $3 -c $2 http://127.0.0.1:$P/ 2>&1)
kill -INT $PF; wait $PF 2>/dev/null
stop_server $1
n=$(echo "$out" | awk '/^Complete requests/{print $3}')
failed=$(echo "$out" | awk '/^Failed requests/{print $3}')
[ -z "$n" ] && { echo "$1 c$2 INVALID: $(echo "$out" | tail -2 | tr '\n' ' ')"; exit 1; }
echo "$1 c$2 n=$n failed=$failed $(awk -F, -v n=$n '$3 ~ /:|context/ {sub(/^syscalls:sys_enter_/, "", $3); printf "%s=%.3f ", $3, $1/n}' $WORK/wakes.$1.txt)"
