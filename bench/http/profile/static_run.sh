#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
# $1 = weft|nginx|go, $2 = path (/4k.bin, /1m.bin under ROOT), $3 = conns, $4 = seconds: one
# `wrk -t2` run against a static file server. Prints requests/s, the server's CPU per response
# from the nanosecond run times of /proc/PID/task/*/schedstat (run_us) and from /proc/PID/stat's
# ticks (tick_us), wrk's own CPU per response (wrk_us: on loopback much of the kernel's TCP work
# for a response runs in whichever process handles the ACKs, so the split between server and
# client is part of the reading), and the CPU other processes used meanwhile.
P=${PORT:-28919}
SERVES_FILES=1
. "$(dirname "$0")/server.sh"
start_server $1 $WORK/srv.log || { echo "$1 $2 c$3 INVALID: server exited"; exit 1; }
sleep 0.2
server_pids $1
read -r u0 s0 < <(ticks); n0=$(nsec)
read -r cu0 ci0 < <(machine_ticks)
out=$(/usr/bin/time -f "WRKTIME %U %S" wrk -t2 -c$3 -d$4 http://127.0.0.1:$P$2 2>&1)
read -r u1 s1 < <(ticks); n1=$(nsec)
read -r cu1 ci1 < <(machine_ticks)
n=$(echo "$out" | awk '/requests in/{print $1}')
rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
wt=$(echo "$out" | awk '/WRKTIME/{print ($2+$3)*100}')
err=$(echo "$out" | grep -E "Non-2xx|Socket errors" | tr '\n' ' ')
stop_server $1
[ -z "$n" ] && { echo "$1 $2 c$3 INVALID: $(echo "$out" | tail -2 | tr '\n' ' ')"; exit 1; }
echo "$1 $2 c$3 rps=$rps n=$n run_us=$(echo "($n1-$n0)/1000/$n" | bc -l | cut -c1-6) tick_us=$(echo "($u1-$u0+$s1-$s0)*10000/$n" | bc -l | cut -c1-6) wrk_us=$(echo "$wt*10000/$n" | bc -l | cut -c1-6) other=$(( (cu1-cu0-(u1-u0)-(s1-s0)-${wt%.*})*100/((cu1-cu0)+(ci1-ci0)) ))%${err:+ INVALID $err}"
