#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
: "${WORK:=/tmp/weft-http-profile}" "${PEERS:=build/peers}" "${ROOT:=$WORK/root}"
: "${BIN:=${WEFT_BIN:-build/release/examples}}"
mkdir -p "$WORK"
# $1 = weft|nginx|asio|hyper|weft-hello , $2 = path, $3 = conns, $4 = dur, [$5 = extra wrk args]
set -u
P=${PORT:-28917}
for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$P) 2>/dev/null || break; sleep 0.05; done  # the previous server gone
BIN=${WEFT_BIN:-$BIN}
case $1 in
  weft) $BIN/file_server --root $ROOT --port $P --workers 2 > $WORK/srv.log 2>&1 & ;;
  weft-hello) $BIN/hello_http --port $P --workers 2 ${HELLO_ARGS:-} > $WORK/srv.log 2>&1 & ;;
  nginx) setsid $PEERS/nginx-hello -p $P -t 2 -r $ROOT > $WORK/srv.log 2>&1 & ;;
  nginx-hello) setsid $PEERS/nginx-hello -p $P -t 2 > $WORK/srv.log 2>&1 & ;;
  asio) $PEERS/asio-http ${ASIO_ARGS:-} -p $P -t 2 > $WORK/srv.log 2>&1 & ;;
  minihttp) $PEERS/minihttp -p $P -t 2 > $WORK/srv.log 2>&1 & ;;
  hyper) $PEERS/tokio-hyper -p $P -t 2 > $WORK/srv.log 2>&1 & ;;
esac
SP=$!
for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$P) 2>/dev/null && break; sleep 0.05; done
kill -0 $SP 2>/dev/null || { echo "$1 $2 c$3 INVALID: server exited"; exit 1; }
case $1 in nginx*) PIDS=$(pgrep -P $(pgrep -P $SP nginx) | tr '\n' ' ');; *) PIDS=$SP;; esac
ticks() { local u=0 s=0; for p in $PIDS; do read -r a b < <(awk '{print $14, $15}' /proc/$p/stat); u=$((u+a)); s=$((s+b)); done; echo $u $s; }
read -r u0 s0 < <(ticks)
read -r cu0 ci0 < <(awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat)
out=$(/usr/bin/time -f "WRKTIME %U %S" wrk -t2 -c$3 -d$4 ${5:-} http://127.0.0.1:$P$2 2>&1)
read -r u1 s1 < <(ticks)
read -r cu1 ci1 < <(awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat)
n=$(echo "$out" | awk '/requests in/{print $1}')
rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
wt=$(echo "$out" | awk '/WRKTIME/{print ($2+$3)*100}')
err=$(echo "$out" | grep -E "Non-2xx|Socket errors" | tr '\n' ' ')
# with --latency: wrk's 99th percentile, in ms
p99=$(echo "$out" | awk '$1=="99%" {v=$2; u=v; sub(/[a-z]+$/,"",v); sub(/^[0-9.]+/,"",u); print (u=="us" ? v/1000 : (u=="s" ? v*1000 : v))}')
case $1 in nginx*) kill -TERM -- -$SP;; minihttp) kill -KILL $SP;; *) kill -INT $SP;; esac
wait $SP 2>/dev/null
echo "$1 $2 c$3 rps=$rps n=$n user_us=$(echo "($u1-$u0)*10000/$n" | bc -l | cut -c1-6) sys_us=$(echo "($s1-$s0)*10000/$n" | bc -l | cut -c1-6) tot_us=$(echo "($u1-$u0+$s1-$s0)*10000/$n" | bc -l | cut -c1-6) other=$(( (cu1-cu0-(u1-u0)-(s1-s0)-${wt%.*})*100/((cu1-cu0)+(ci1-ci0)) ))%${p99:+ p99_ms=$p99} $err"
