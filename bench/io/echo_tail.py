#!/usr/bin/env python3
"""Echo tail latency, and where the waiting is: rounds of servers x clients x connection counts,
interleaved. Every run records the client's p50/p99 and QPS, the server's CPU per request
(/proc/PID/task/*/stat), the CPU other processes used (/proc/stat busy minus server and client),
and the server's and client's threads' time on a CPU and waiting for one (/proc/.../schedstat:
run-queue wait), both processes' voluntary and involuntary context switches (/proc/.../status),
and how often weft's server workers went to park and slept (bench_server's last line). Client
`weftd` is bench_client with diag=1 (where the slowest 1% are, and how often the client's own
worker parked and slept). A server given as NAME+KEY=VALUE runs NAME with that environment
variable set (e.g. weft+WEFT_IO_BACKEND=epoll); `weft1` is weft's server with one worker,
`weft1ring` with two whose connections all start on worker 0 (bench_server --one-ring),
`weftg` with two that gather the receives on one ring while the load fits one worker
(bench_server --gather, runtime_options::consolidate_io, the default, so the same as `weft`),
`weftng` with two that do not (--no-gather); srv_home_changes counts the changes of home.

    python3 bench/io/echo_tail.py ROUNDS SECONDS weft,go,tokio weftd,goc 100,500,1000 > runs.jsonl

WEFT_BIN (default build/release/bench) holds bench_server and bench_client, PEERS (default
build/peers) the peers from bench/peers/build.sh. One JSON object per run on stdout."""
import json
import os
import resource
import socket
import subprocess
import sys
import time

BIN = os.environ.get("WEFT_BIN", "build/release/bench")
PEERS = os.environ.get("PEERS", "build/peers")
HZ = os.sysconf("SC_CLK_TCK")
SERVERS = {
    "weft": lambda p: [f"{BIN}/bench_server", "-p", str(p), "-m", "echo"],
    "weft1": lambda p: [f"{BIN}/bench_server", "-p", str(p), "-m", "echo", "-t", "1"],
    "weft1ring": lambda p: [f"{BIN}/bench_server", "-p", str(p), "-m", "echo", "--one-ring"],
    "weftg": lambda p: [f"{BIN}/bench_server", "-p", str(p), "-m", "echo", "--gather"],
    "weftng": lambda p: [f"{BIN}/bench_server", "-p", str(p), "-m", "echo", "--no-gather"],
    "weftep": lambda p: [f"{BIN}/bench_server", "-p", str(p), "-m", "echo_epoll"],
    "go": lambda p: [f"{PEERS}/go-echo", "-p", str(p)],
    "tokio": lambda p: [f"{PEERS}/tokio-echo", "-p", str(p)],
}
CLIENTS = {
    "weftc": lambda c, d, p: [f"{BIN}/bench_client", "echo", f"c={c}", "s=256", f"d={d}", f"port={p}"],
    "weftd": lambda c, d, p: [f"{BIN}/bench_client", "echo", f"c={c}", "s=256", f"d={d}", f"port={p}", "diag=1"],
    "goc": lambda c, d, p: [f"{PEERS}/go-echoclient", "echo", f"c={c}", "s=256", f"d={d}", f"port={p}"],
}
def busy():
    f = open("/proc/stat").readline().split()[1:]
    v = list(map(int, f))
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7], v[3] + v[4]
def proc_cpu(pid):
    tot = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            s = open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()
            tot += int(s[11]) + int(s[12])
        except FileNotFoundError:
            pass
    return tot
def schedstat(pid):
    """{tid: (on-cpu ns, run-queue wait ns, timeslices)} of every thread of pid."""
    out = {}
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                a = open(f"/proc/{pid}/task/{t}/schedstat").read().split()
                out[t] = tuple(map(int, a))
            except (FileNotFoundError, ProcessLookupError):
                pass
    except FileNotFoundError:
        pass
    return out
def ctxsw(pid):
    """{tid: (voluntary, involuntary)} context switches of every thread of pid."""
    out = {}
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                v = n = 0
                for line in open(f"/proc/{pid}/task/{t}/status"):
                    if line.startswith("voluntary_ctxt_switches"):
                        v = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        n = int(line.split()[1])
                out[t] = (v, n)
            except (FileNotFoundError, ProcessLookupError):
                pass
    except FileNotFoundError:
        pass
    return out
def delta2(a, b):
    v = n = 0
    for t, x in b.items():
        u = a.get(t, (0, 0))
        v += x[0] - u[0]; n += x[1] - u[1]
    return v, n
def delta(a, b):
    on = wait = sl = 0
    for t, v in b.items():
        u = a.get(t, (0, 0, 0))
        on += v[0] - u[0]; wait += v[1] - u[1]; sl += v[2] - u[2]
    return on, wait, sl
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def wait_listen(p):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", p), timeout=0.1).close(); return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("server did not listen")
def run(server, client, c, d):
    p = free_port()
    # "NAME+KEY=VALUE+...": the server NAME with those environment variables; "NAME@DIR": with
    # bench_server from DIR (another build, side by side in one invocation).
    spec, _, bindir = server.partition("@")
    name, *env = spec.split("+")
    cmd = SERVERS[name](p)
    if bindir:
        cmd[0] = os.path.join(bindir, os.path.basename(cmd[0]))
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True, env={**os.environ, **dict(e.split("=", 1) for e in env)})
    try:
        wait_listen(p); time.sleep(0.2)
        cpu0 = proc_cpu(srv.pid); b0, i0 = busy(); ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        ss0 = schedstat(srv.pid); sx0 = ctxsw(srv.pid)
        cl = subprocess.Popen(CLIENTS[client](c, d, p), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        cs0 = {}; cs1 = {}; cx1 = {}
        while cl.poll() is None:
            cur = schedstat(cl.pid)
            for t, v in cur.items():
                cs0.setdefault(t, (0, 0, 0))
                cs1[t] = v
            cx1.update(ctxsw(cl.pid))
            time.sleep(0.05)
        so, se = cl.communicate()
        out = subprocess.CompletedProcess(cl.args, cl.returncode, so, se)
        ss1 = schedstat(srv.pid); sx1 = ctxsw(srv.pid)
        wall = time.time() - t0
        cpu1 = proc_cpu(srv.pid); b1, i1 = busy(); ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        srv.terminate(); srv_out = srv.communicate()[0]
    m = {}
    for line in srv_out.splitlines():  # bench_server's last line: "parks N sleeps M"
        f = line.split()
        if len(f) == 4 and f[0] == "parks":
            m.update(srv_parks=int(f[1]), srv_sleeps=int(f[3]))
        elif len(f) == 2 and f[0] == "io_home_changes":
            m["srv_home_changes"] = int(f[1])
        elif len(f) == 6 and f[0] == "worker":
            m[f"srv_w{f[1]}_sleeps"] = int(f[5])
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            j = json.loads(line); m[j["metric"]] = j["value"]
    srv_s = (cpu1 - cpu0) / HZ
    cli_s = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    ncpu = os.cpu_count()
    other = max(0.0, 100 * ((b1 - b0) / HZ - srv_s - cli_s) / (wall * ncpu))
    idle = 100 * (i1 - i0) / ((b1 - b0) + (i1 - i0))
    son, swait, ssl = delta(ss0, ss1)
    con, cwait, csl = delta(cs0, cs1)
    sv, sn = delta2(sx0, sx1)
    cv, cn = delta2({}, cx1)
    m.update(srv_vcsw=sv, srv_ivcsw=sn, cli_vcsw=cv, cli_ivcsw=cn)
    m.update(srv_oncpu_ms=son/1e6, srv_rqwait_ms=swait/1e6, srv_slices=ssl, cli_oncpu_ms=con/1e6, cli_rqwait_ms=cwait/1e6, cli_slices=csl)
    m.update(server=server, client=client, c=c, server_cpu_us_per_req=1e6 * srv_s / max(1, m.get("ops", 1)),
             other_cpu_pct=round(other, 1), idle_pct=round(idle, 1), wall=round(wall, 2),
             stderr_tail=out.stderr[-300:] if out.returncode else "")
    return m
if __name__ == "__main__":
    rounds = int(sys.argv[1]); d = int(sys.argv[2])
    servers = sys.argv[3].split(","); clients = sys.argv[4].split(","); conns = list(map(int, sys.argv[5].split(",")))
    for r in range(rounds):
        for c in conns:
            for cl in clients:
                for s in servers:
                    m = run(s, cl, c, d); m["round"] = r
                    print(json.dumps(m), flush=True)
