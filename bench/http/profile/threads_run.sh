#!/usr/bin/env bash
# Part of bench/http/profile (see README.md there). Run from the repository root.
# threads_run.sh SYSTEM CONNS SECONDS [WRK ARGS]: one `wrk -t2 --latency` run against SYSTEM
# (as in cpu_run.sh). Over the middle of the run (from 0.3 s to 0.2 s before its end), for each
# thread of the server and of wrk that ran: the share of the wall time it ran, waited in the run
# queue (runnable, no CPU) and slept (the rest), from /proc/PID/task/TID/schedstat; the machine's
# idle and niced shares and the rest used by others (/proc/stat, both CPUs); and, sampled every
# 2 ms from /proc/PID/task/TID/stat, the share of samples in which one server thread was
# runnable or running while the other slept (with two server threads), and the times per second
# each server thread blocked (voluntary context switches, /proc/PID/task/TID/status).
P=${PORT:-28917}
. "$(dirname "$0")/server.sh"
start_server $1 $WORK/srv.log
server_pids $1
wrk -t2 -c$2 -d$3 --latency ${4:-} http://127.0.0.1:$P/ > $WORK/wrk.out 2>&1 &
WP=$!
ws=$(date +%s.%N)
sleep 0.3
python3 - "$PIDS" "$WP" "$(echo "$ws + $3 - 0.2" | bc -l)" "$1" "$2" <<'PY' > $WORK/threads.out
import os, sys, time
spids, wp, end = sys.argv[1].split(), sys.argv[2], float(sys.argv[3])  # end: wall clock
def tids(p): return [(p, t) for t in os.listdir(f"/proc/{p}/task")]
def sched(p, t):
    try:
        with open(f"/proc/{p}/task/{t}/schedstat") as f: a = f.read().split()
    except OSError: return None  # a thread that ended
    return int(a[0]), int(a[1])
def state(p, t):
    with open(f"/proc/{p}/task/{t}/stat") as f: s = f.read()
    return s[s.rindex(")") + 2]
def vcsw(p, t):  # voluntary context switches: the times it blocked
    try:
        with open(f"/proc/{p}/task/{t}/status") as f:
            for l in f:
                if l.startswith("voluntary_ctxt_switches"): return int(l.split()[1])
    except OSError: return 0
    return 0
def cpu():
    with open("/proc/stat") as f: a = [int(x) for x in f.readline().split()[1:]]
    return a  # user nice system idle iowait irq softirq steal
srv = [x for p in spids for x in tids(p)]; cli = tids(wp); allsrv = list(srv)
s0 = {x: sched(*x) for x in srv + cli}; v0 = {x: vcsw(*x) for x in srv}; c0 = cpu(); t0 = time.monotonic()
samples = []  # per sample, per server thread: runnable or running
while time.time() < end:
    st = []
    for x in srv:
        try: st.append(state(*x) == "R")
        except OSError: st.append(False)
    samples.append(tuple(st))
    time.sleep(0.002)
s1 = {x: sched(*x) for x in srv + cli}; v1 = {x: vcsw(*x) for x in srv}; c1 = cpu(); t1 = time.monotonic()
srv = [x for x in srv if s0[x] and s1[x]]; cli = [x for x in cli if s0[x] and s1[x]]
wall = (t1 - t0) * 1e9
def row(name, x):
    r = s1[x][0] - s0[x][0]; w = s1[x][1] - s0[x][1]
    return r, w, f"{name} {x[1]}: run {100*r/wall:.0f}% wait {100*w/wall:.0f}% sleep {100*(wall-r-w)/wall:.0f}%"
rows = []
work = []
for x in srv:
    r, w, s = row("server", x)
    if r > 0.01 * wall: rows.append(s + f" blocked {(v1[x] - v0[x]) / (wall / 1e9):.0f}/s"); work.append(x)
for x in cli:
    r, w, s = row("wrk", x)
    if r > 0.01 * wall: rows.append(s)
d = [b - a for a, b in zip(c0, c1)]; tot = sum(d[:8])
srv_run = sum(s1[x][0] - s0[x][0] for x in srv); cli_run = sum(s1[x][0] - s0[x][0] for x in cli)
ncpu = os.cpu_count()
rest = 100 - 100*d[3]/tot - 100*d[4]/tot - 100*srv_run/(wall*ncpu) - 100*cli_run/(wall*ncpu)
print(f"{sys.argv[4]} c{sys.argv[5]} window {wall/1e9:.2f}s: machine idle {100*(d[3]+d[4])/tot:.1f}% niced {100*d[1]/tot:.1f}% others (niced included) {rest:.1f}%; server {100*srv_run/(wall*ncpu):.1f}% wrk {100*cli_run/(wall*ncpu):.1f}% of {ncpu} CPUs")
for s in rows: print("  " + s)
if len(work) == 2:
    i, j = allsrv.index(work[0]), allsrv.index(work[1])
    a = sum(1 for s in samples if s[i] and not s[j]); b = sum(1 for s in samples if s[j] and not s[i])
    c = sum(1 for s in samples if s[i] and s[j]); z = sum(1 for s in samples if not s[i] and not s[j])
    print(f"  samples {len(samples)}: {work[0][1]} alone R {100*a/len(samples):.0f}%, {work[1][1]} alone R {100*b/len(samples):.0f}%, both R {100*c/len(samples):.0f}%, neither {100*z/len(samples):.0f}%")
PY
wait $WP
stop_server $1
cat $WORK/threads.out
awk '/requests in/{print "  wrk:", $1, "requests"} /Requests\/sec/{print "  req/s", $2} $1=="50%"||$1=="90%"||$1=="99%"{printf "  %s %s", $1, $2} END{print ""}' $WORK/wrk.out
grep -E "Non-2xx|Socket errors" $WORK/wrk.out || true
