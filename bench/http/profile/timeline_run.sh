#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
# timeline_run.sh SYSTEM CONNS SECONDS: one `h2load --h1 -t2 -cCONNS -D SECONDS` run against
# SYSTEM (as in cpu_run.sh; h2load is Debian's nghttp2-client) with its per-request log (each
# request's start and latency), read by timeline.py: when the first request of each new
# connection was answered, and the requests and their median and p99 latency per 100 ms of
# the run (where in time a tail comes from: the fresh server's first burst, or the steady
# state).
P=${PORT:-28917}
. "$(dirname "$0")/server.sh"
command -v h2load > /dev/null || { echo "h2load missing: apt-get install nghttp2-client" >&2; exit 2; }
start_server $1 $WORK/srv.log || { echo "$1 c$2 INVALID: server exited"; exit 1; }
sleep 0.3
rm -f $WORK/timeline.log  # h2load appends to its log file
h2load --h1 -t2 -c$2 -D $3 --warm-up-time=0 --log-file=$WORK/timeline.log \
  http://127.0.0.1:$P/ > $WORK/h2load.out 2>&1
stop_server $1
grep -E "^requests:" $WORK/h2load.out
python3 "$(dirname "$0")/timeline.py" $1 $2 $WORK/timeline.log
