#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
: "${WORK:=/tmp/weft-http-profile}" "${PEERS:=build/peers}" "${ROOT:=$WORK/root}"
: "${BIN:=${WEFT_BIN:-build/release/examples}}"
# NICE: the niceness of the server and wrk (19 by default). Instruction counts do not depend on
# it; set NICE=0 where other work keeps the cores busy, or a server at low priority under
# callgrind may answer too few requests for a per-request figure.
: "${NICE:=19}"
mkdir -p "$WORK"
# $1 name, rest: command. Measures instructions per request under wrk -t1 -c50 -d$DUR (counters zeroed after start-up),
# or with AB_N=N under `ab -r -n N -c ${AB_C:-50}` (HTTP/1.0, a connection per request).
set -u
name=$1; shift
P=${PORT:-28919}
D=$WORK/cg; mkdir -p $D
rm -f $D/$name.out*
nice -n $NICE valgrind --tool=callgrind --callgrind-out-file=$D/$name.out.%p "$@" > $D/$name.log 2>&1 &
VP=$!
for i in $(seq 400); do (exec 3<>/dev/tcp/127.0.0.1/$P) 2>/dev/null && break; sleep 0.1; done
sleep 1
nice -n 19 callgrind_control -z > /dev/null 2>&1
if [ -n "${AB_N:-}" ]; then
  out=$(nice -n $NICE ab -r -n $AB_N -c ${AB_C:-50} http://127.0.0.1:$P${URLPATH:-/} 2>&1 | awk '/^Complete requests/{print $3, "requests in"}')
else
  out=$(nice -n $NICE wrk -t1 -c50 -d${DUR:-8}s ${WRKARGS:-} http://127.0.0.1:$P${URLPATH:-/})
fi
nice -n 19 callgrind_control -d > /dev/null 2>&1
sleep 1
n=$(echo "$out" | awk '/requests in/{print $1}')
kill -TERM $VP; sleep 2; kill -KILL $VP 2>/dev/null; wait $VP 2>/dev/null
# the dump made by -d (part 1) holds what ran since the zeroing
f=$(ls $D/$name.out.*.1 2>/dev/null | head -1)
[ -z "$f" ] && f=$(ls -t $D/$name.out.* | head -1)
ir=$(grep -h "^summary:\|^totals:" $f | head -1 | awk '{print $2}')
echo "$name requests=$n Ir=$ir Ir/req=$(( ir / n )) file=$f"
