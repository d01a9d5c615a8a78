#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
: "${WORK:=/tmp/weft-http-profile}" "${PEERS:=build/peers}" "${ROOT:=$WORK/root}"
: "${BIN:=${WEFT_BIN:-build/release/examples}}"
mkdir -p "$WORK"
# $1 = weft|nginx|go, $2 = path (/4k.bin, /1m.bin under ROOT), $3 = conns, $4 = seconds: one
# `wrk -t2` run against a static file server. Prints requests/s, the server's CPU per response
# from the nanosecond run times of /proc/PID/task/*/schedstat (run_us) and from /proc/PID/stat's
# ticks (tick_us), wrk's own CPU per response (wrk_us: on loopback much of the kernel's TCP work
# for a response runs in whichever process handles the ACKs, so the split between server and
# client is part of the reading), and the CPU other processes used meanwhile.
set -u
P=${PORT:-28919}
for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$P) 2>/dev/null || break; sleep 0.05; done
case $1 in
  weft) $BIN/file_server --root $ROOT --port $P --workers 2 > $WORK/srv.log 2>&1 & ;;
  nginx) setsid $PEERS/nginx-hello -p $P -t 2 -r $ROOT > $WORK/srv.log 2>&1 & ;;
  go) $PEERS/go-fileserver -p $P -t 2 -r $ROOT > $WORK/srv.log 2>&1 & ;;
  *) echo "unknown system $1" >&2; exit 2 ;;
esac
SP=$!
for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$P) 2>/dev/null && break; sleep 0.05; done
kill -0 $SP 2>/dev/null || { echo "$1 $2 c$3 INVALID: server exited"; exit 1; }
sleep 0.2
case $1 in nginx*) PIDS=$(pgrep -P $(pgrep -P $SP nginx) | tr '\n' ' ');; *) PIDS=$SP;; esac
ticks() { local u=0 s=0; for p in $PIDS; do read -r a b < <(awk '{print $14, $15}' /proc/$p/stat); u=$((u+a)); s=$((s+b)); done; echo $u $s; }
nsec() { local t=0; for p in $PIDS; do for f in /proc/$p/task/*/schedstat; do t=$((t + $(awk '{print $1}' $f))); done; done; echo $t; }
read -r u0 s0 < <(ticks); n0=$(nsec)
read -r cu0 ci0 < <(awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat)
out=$(/usr/bin/time -f "WRKTIME %U %S" wrk -t2 -c$3 -d$4 http://127.0.0.1:$P$2 2>&1)
read -r u1 s1 < <(ticks); n1=$(nsec)
read -r cu1 ci1 < <(awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat)
n=$(echo "$out" | awk '/requests in/{print $1}')
rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
wt=$(echo "$out" | awk '/WRKTIME/{print ($2+$3)*100}')
err=$(echo "$out" | grep -E "Non-2xx|Socket errors" | tr '\n' ' ')
case $1 in nginx*) kill -TERM -- -$SP;; *) kill -INT $SP;; esac
wait $SP 2>/dev/null
[ -z "$n" ] && { echo "$1 $2 c$3 INVALID: $(echo "$out" | tail -2 | tr '\n' ' ')"; exit 1; }
echo "$1 $2 c$3 rps=$rps n=$n run_us=$(echo "($n1-$n0)/1000/$n" | bc -l | cut -c1-6) tick_us=$(echo "($u1-$u0+$s1-$s0)*10000/$n" | bc -l | cut -c1-6) wrk_us=$(echo "$wt*10000/$n" | bc -l | cut -c1-6) other=$(( (cu1-cu0-(u1-u0)-(s1-s0)-${wt%.*})*100/((cu1-cu0)+(ci1-ci0)) ))%${err:+ INVALID $err}"
