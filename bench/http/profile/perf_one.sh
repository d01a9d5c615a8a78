#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
# $1 name (weft-hello|weft-epoll|asio|nginx-hello), $2 conns: perf record (cpu-clock, call
# graphs: PERF_ARGS) of the server's processes during 2 s of wrk, or with AB_N=N during
# `ab -r -n N -c CONNS` (a connection per request; the data file is then perf.NAME.abCONNS.data)
P=${PORT:-28917}
. "$(dirname "$0")/server.sh"
start_profiled $1
PIDS=$(echo $PIDS | tr ' ' ',')
if [ -n "${AB_N:-}" ]; then
  perf record -q -o $WORK/perf.$1.ab$2.data -e cpu-clock -F 2999 ${PERF_ARGS:--g} -p $PIDS > /dev/null 2>&1 &
  PP=$!
  sleep 0.3
  ab -r -n $AB_N -c $2 http://127.0.0.1:$P/ 2>&1 | awk '/^Complete requests|^Failed requests/{print "'$1' ab c'$2'", $0}'
  kill -INT $PP
else
  perf record -q -o $WORK/perf.$1.c$2.data -F 2999 ${PERF_ARGS:-} -p $PIDS -- sleep 2.5 > /dev/null 2>&1 &
  PP=$!
  sleep 0.2
  wrk -t2 -c$2 -d2s http://127.0.0.1:$P/ | awk '/requests in/{print "'$1' c'$2' requests", $1}'
fi
wait $PP
stop_server $1
