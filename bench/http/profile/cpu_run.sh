#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
# $1 = weft|nginx|asio|hyper|weft-hello , $2 = path, $3 = conns, $4 = dur, [$5 = extra wrk args]
P=${PORT:-28917}
SERVES_FILES=1
. "$(dirname "$0")/server.sh"
BIN=${WEFT_BIN:-$BIN}
start_server $1 $WORK/srv.log || { echo "$1 $2 c$3 INVALID: server exited"; exit 1; }
server_pids $1
read -r u0 s0 < <(ticks)
read -r cu0 ci0 < <(machine_ticks)
out=$(/usr/bin/time -f "WRKTIME %U %S" wrk -t2 -c$3 -d$4 ${5:-} http://127.0.0.1:$P$2 2>&1)
read -r u1 s1 < <(ticks)
read -r cu1 ci1 < <(machine_ticks)
n=$(echo "$out" | awk '/requests in/{print $1}')
rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
wt=$(echo "$out" | awk '/WRKTIME/{print ($2+$3)*100}')
err=$(echo "$out" | grep -E "Non-2xx|Socket errors" | tr '\n' ' ')
# with --latency: wrk's 99th percentile, in ms
p99=$(echo "$out" | awk '$1=="99%" {v=$2; u=v; sub(/[a-z]+$/,"",v); sub(/^[0-9.]+/,"",u); print (u=="us" ? v/1000 : (u=="s" ? v*1000 : v))}')
stop_server $1
echo "$1 $2 c$3 rps=$rps n=$n user_us=$(echo "($u1-$u0)*10000/$n" | bc -l | cut -c1-6) sys_us=$(echo "($s1-$s0)*10000/$n" | bc -l | cut -c1-6) tot_us=$(echo "($u1-$u0+$s1-$s0)*10000/$n" | bc -l | cut -c1-6) other=$(( (cu1-cu0-(u1-u0)-(s1-s0)-${wt%.*})*100/((cu1-cu0)+(ci1-ci0)) ))%${p99:+ p99_ms=$p99} $err"
