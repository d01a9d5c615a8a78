#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
# sched_run.sh SYSTEM CONNS SECONDS [WRK ARGS]: one `wrk -t2` run against SYSTEM (as in
# cpu_run.sh), then per thread of the server (threads that ran under 20 ms left out), from
# /proc/PID/task/TID/schedstat over the run: CPU time, time runnable but waiting for a CPU
# (run-queue delay) and times scheduled in, each per 1,000 requests, with wrk's p99.
P=${PORT:-28917}
. "$(dirname "$0")/server.sh"
start_server $1 $WORK/srv.log
server_pids $1
snap() {  # TID run_ns wait_ns slices, for every thread of the given processes
  for p in "$@"; do for t in /proc/$p/task/*; do
    [ -r $t/schedstat ] && echo "${t##*/} $(cat $t/schedstat)"; done; done
}
snap $PIDS > $WORK/s0
wrk -t2 -c$2 -d$3 --latency ${4:-} http://127.0.0.1:$P/ > $WORK/wrk.out 2>&1 &
WP=$!
# wrk's own threads, over the middle of the run (from 0.3 s to 0.2 s before its end: its
# schedstat is gone once it exits), per 1,000 requests at the run's mean rate
sleep 0.3; snap $WP > $WORK/w0; t0=$(date +%s.%N)
sleep $(echo "$3 - 0.5" | bc -l); snap $WP > $WORK/w1; t1=$(date +%s.%N)
wait $WP
snap $PIDS > $WORK/s1
stop_server $1
n=$(awk '/requests in/{print $1}' $WORK/wrk.out)
p99=$(awk '$1=="99%"{print $2}' $WORK/wrk.out)
python3 - "$WORK/s0" "$WORK/s1" "$n" "$1" "$2" "$p99" "$WORK/w0" "$WORK/w1" "$(echo "$t1 - $t0" | bc -l)" "$3" <<'PY'
import sys
def rd(f):
    d={}
    for l in open(f):
        t,a,b,c=l.split(); d[t]=(int(a),int(b),int(c))
    return d
a,b=rd(sys.argv[1]),rd(sys.argv[2]); n=int(sys.argv[3]); k=n/1000
out=[]
tot=[0,0,0]
for t in b:
    x=[b[t][i]-a.get(t,(0,0,0))[i] for i in range(3)]
    if x[0] < 20_000_000: continue  # threads that hardly ran (the main thread, helpers)
    tot=[tot[i]+x[i] for i in range(3)]
    out.append(f"run={x[0]/1e6/k:.2f}ms wait={x[1]/1e6/k:.2f}ms in={x[2]/k:.1f}")
wa,wb=rd(sys.argv[7]),rd(sys.argv[8]); win=float(sys.argv[9]); kw=k*win/float(sys.argv[10])  # requests in the window, at the run's mean rate
w=[sum(wb[t][i]-wa.get(t,(0,0,0))[i] for t in wb) for i in range(3)]
print(f"{sys.argv[4]} c{sys.argv[5]} n={n} p99={sys.argv[6]} per 1000 req: all run={tot[0]/1e6/k:.2f}ms wait={tot[1]/1e6/k:.2f}ms in={tot[2]/k:.1f} | "+" | ".join(out)+f" || wrk run={w[0]/1e6/kw:.2f}ms wait={w[1]/1e6/kw:.2f}ms in={w[2]/kw:.1f}")
PY
