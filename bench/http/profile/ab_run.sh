#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
# $1 = weft|weft-epoll|weft-percore|weft-percore-epoll|nginx|asio|hyper|go, $2 = conns, $3 = requests:
# one `ab -r -n N -c C` run (HTTP/1.0, a connection per request) against GET /. Prints
# requests/s, the server's CPU per request from /proc (user and system from the tick counters
# of /proc/PID/stat, the total also from the nanosecond run times of /proc/PID/task/*/schedstat)
# and the share of the machine's CPU that processes other than the server and ab used meanwhile.
P=${PORT:-29171}
. "$(dirname "$0")/server.sh"
start_server $1 $WORK/srv.log || { echo "$1 c$2 INVALID: server exited"; exit 1; }
sleep 0.2
server_pids $1
read -r u0 s0 < <(ticks); n0=$(nsec)
read -r cu0 ci0 < <(machine_ticks)
out=$(/usr/bin/time -f "ABTIME %U %S" ab -r -n $3 -c $2 http://127.0.0.1:$P/ 2>&1)
read -r u1 s1 < <(ticks); n1=$(nsec)
read -r cu1 ci1 < <(machine_ticks)
done_n=$(echo "$out" | awk '/^Complete requests/{print $3}')
failed=$(echo "$out" | awk '/^Failed requests/{print $3}')
non2xx=$(echo "$out" | awk '/^Non-2xx/{print $3}')
rps=$(echo "$out" | awk '/^Requests per second/{print $4}')
at=$(echo "$out" | awk '/ABTIME/{print ($2+$3)*100}')
stop_server $1
[ -z "$done_n" ] && { echo "$1 c$2 INVALID: $(echo "$out" | tail -2 | tr '\n' ' ')"; exit 1; }
valid=""; [ "${failed:-0}" != 0 ] || [ -n "${non2xx:-}" ] && valid="INVALID failed=$failed non2xx=${non2xx:-0}"
echo "$1 c$2 n=$done_n rps=$rps user_us=$(echo "($u1-$u0)*10000/$done_n" | bc -l | cut -c1-5) sys_us=$(echo "($s1-$s0)*10000/$done_n" | bc -l | cut -c1-5) tot_us=$(echo "($u1-$u0+$s1-$s0)*10000/$done_n" | bc -l | cut -c1-5) run_us=$(echo "($n1-$n0)/1000/$done_n" | bc -l | cut -c1-5) ab_us=$(echo "$at*10000/$done_n" | bc -l | cut -c1-5) other=$(( (cu1-cu0-(u1-u0)-(s1-s0)-${at%.*})*100/((cu1-cu0)+(ci1-ci0)) ))% $valid"
