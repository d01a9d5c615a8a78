"""One measurement: run a scenario program, read its figures, its CPU and everyone else's CPU.

Server and broker CPU (server_cpu_ns_per_op, broker_cpu_s_per_m): each server runs in a cgroup
v2 directory of its own, made for it (a broker is moved into one for the suite's session), and
its CPU is that directory's cpu.stat usage_usec: the scheduler's run time in microseconds,
every thread and child process that ever ran there, those that exited during the run too. Where
no cgroup v2 directory can be made (not root, no cgroup2 mount) it falls back to /proc/PID/stat
utime+stime, whole clock ticks (10 ms): a run of 5,000 requests at 16 us each is 8 ticks, so
that figure moves in steps of an eighth. Each such metric says which it used ("method").

Client and total CPU (client_cpu_ns_per_op, total_cpu_ns_per_op): on loopback the kernel charges
TCP work to whichever side triggers it, so a server that batches its writes differently moves
CPU between itself and the load client. The client's CPU (the load tool's own, when the client
prints it as `client_cpu_s`, else the whole client process's from wait4) is reported beside the
server's, and their sum per op is what CPU targets are judged on: the client is the same
program for every server.

Server memory (server_rss_kib): the sum of VmRSS over every process in the server's cgroup (a
launcher script and what it starts, nginx's master and workers), else over its session.

Other-CPU: /proc/stat's aggregate busy ticks over the run, minus the CPU the measured
processes used themselves (the child from wait4's rusage, a server from its cgroup or
/proc/PID/stat), divided by wall time x CPUs. It tells whether something else competed for the
cores. The part of it that niced processes spent in user mode (/proc/stat's `nice` column:
builds run under `nice -n 19` on a shared machine) is recorded apart: such processes get the
cores only when the measured ones leave them idle, so a run is repeated for the other CPU at
normal priority only.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HZ = os.sysconf("SC_CLK_TCK")
UNSUPPORTED_EXIT = 2
# The measurement ran but is not to be trusted (an HTTP load saw errors or wrong responses):
# its figures are kept for the record, never averaged in; the next round runs it again.
INVALID_EXIT = 3


def busy_ticks(cpu_line: str) -> int:
    """Busy ticks of a /proc/stat "cpu" line: user nice system irq softirq steal.

    idle and iowait are not busy; guest time is already inside user. Steal counts as busy:
    it is CPU another tenant took from us.
    """
    f = [int(x) for x in cpu_line.split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = f + [0] * (8 - len(f))
    return user + nice + system + irq + softirq + steal


def nice_ticks(cpu_line: str) -> int:
    """User ticks of niced processes (nice > 0) on a /proc/stat "cpu" line (its 2nd field).

    Their system time is not told apart by the kernel: it stays in the busy ticks at normal
    priority, so niced CPU is if anything under-counted and normal-priority CPU over-counted."""
    f = cpu_line.split()
    return int(f[2]) if len(f) > 2 else 0


def read_cpu() -> tuple[int, int, int]:
    """(aggregate busy ticks, of them niced user ticks, number of CPUs) from /proc/stat."""
    lines = Path("/proc/stat").read_text().splitlines()
    ncpu = sum(1 for ln in lines if ln.startswith("cpu") and ln[3:4].isdigit())
    return busy_ticks(lines[0]), nice_ticks(lines[0]), ncpu


def read_busy() -> tuple[int, int]:
    """(aggregate busy ticks, number of CPUs) from /proc/stat."""
    busy, _, ncpu = read_cpu()
    return busy, ncpu


def other_cpu_percent(busy_delta_ticks: int, own_cpu_s: float, wall_s: float, ncpu: int,
                      hz: int = HZ) -> float:
    """Percent of the machine's CPU used by anything but the measured processes."""
    if wall_s <= 0 or ncpu <= 0:
        return 0.0
    other_s = busy_delta_ticks / hz - own_cpu_s
    return max(0.0, 100.0 * other_s / (wall_s * ncpu))


def niced_cpu_percent(nice_delta_ticks: int, own_niced_cpu_s: float, other_percent: float,
                      wall_s: float, ncpu: int, hz: int = HZ) -> float:
    """Percent of the machine's CPU that niced processes other than the measured ones used (at
    most all of the other CPU). `own_niced_cpu_s`: the measured processes' CPU when they run
    niced themselves (the harness under `nice`), else 0."""
    if wall_s <= 0 or ncpu <= 0:
        return 0.0
    niced_s = nice_delta_ticks / hz - own_niced_cpu_s
    return min(other_percent, max(0.0, 100.0 * niced_s / (wall_s * ncpu)))


def is_noisy(other_percent: float, wall_s: float, threshold: float, hz: int = HZ) -> bool:
    """Above threshold by more than /proc/stat's resolution (one tick per CPU over the run).

    Runs shorter than a few ticks cannot be judged: their allowance exceeds any threshold.
    """
    allowance = 100.0 / (hz * wall_s) if wall_s > 0 else float("inf")
    return other_percent - allowance > threshold


def parse_metrics(stdout: str) -> list[dict]:
    """The protocol lines {"metric", "unit", "value"}; other output is ignored."""
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "metric" in obj and isinstance(obj.get("value"), (int, float)):
            out.append({"metric": str(obj["metric"]), "unit": str(obj.get("unit", "")),
                        "value": float(obj["value"])})
    return out


def tail(text: str, lines: int = 6, chars: int = 600) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])[-chars:]


@dataclass
class Run:
    status: str  # "ok" | "unsupported" | "failed" | "invalid"
    metrics: list[dict] = field(default_factory=list)
    error: str = ""
    wall_s: float = 0.0
    cpu_s: float = 0.0  # the child's user + sys
    server_cpu_s: float | None = None
    other_cpu_percent: float = 0.0  # every other process, niced ones included
    niced_cpu_percent: float = 0.0  # the part of other_cpu_percent that niced processes used
    noisy: bool = False  # other CPU at normal priority above the threshold
    attempts: int = 1


def session_cpu_ticks(sid: int) -> int:
    """utime+stime (and reaped children's) of every process in session sid, in ticks."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            rest = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited while we looked
        if int(rest[3]) == sid:  # fields 6 (session), 14-17 (utime stime cutime cstime)
            total += sum(int(x) for x in rest[11:15])
    return total


def process_cpu_ticks(pid: int) -> int:
    """CPU of a background process, in ticks: of its whole session when it leads one (a
    database's postmaster and its backends, started with setsid), else its own (all its
    threads, and its reaped children's); 0 if it is gone."""
    try:
        rest = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0
    if int(rest[3]) == pid:
        return session_cpu_ticks(pid)
    return sum(int(x) for x in rest[11:15])


CGROUP_METHOD = "cgroup"  # cgroup v2 cpu.stat usage_usec: microseconds, exited threads included
TICKS_METHOD = "ticks"  # /proc/PID/stat utime+stime: whole clock ticks
METHOD_TEXT = {CGROUP_METHOD: "cgroup v2 cpu.stat usage_usec (µs)",
               TICKS_METHOD: "/proc/PID/stat utime+stime (10 ms ticks)"}


def cgroup2_home() -> Path | None:
    """This process's own cgroup v2 directory (where a child group is made), or None when the
    unified hierarchy is not mounted (cgroup v1 only)."""
    try:
        mount = next(left.split()[4] for left, _, right in
                     (ln.partition(" - ") for ln in
                      Path("/proc/self/mountinfo").read_text().splitlines())
                     if right.split()[:1] == ["cgroup2"])
        own = next(ln[3:] for ln in Path("/proc/self/cgroup").read_text().splitlines()
                   if ln.startswith("0::"))
    except (OSError, StopIteration, IndexError):
        return None
    home = Path(mount) / own.lstrip("/")
    return home if home.is_dir() else Path(mount)


class CpuGroup:
    """A cgroup v2 directory of the harness's own holding one measured process tree (a server
    and whatever it forks, or a broker moved in), read for CPU through cpu.stat's usage_usec.
    The cpu controller is not needed: cpu.stat's usage is kept for every cgroup v2 directory.

    Lifetime: make() -> put processes in (enter_self in the child before exec, or add) ->
    usage_ns() around each run -> close(): kill=True ends what is left in it (a server), kill=
    False moves it back where the harness runs (a broker that outlives the suite); then the
    directory is removed."""

    counter = 0

    def __init__(self, path: Path):
        self.path = path
        self.procs = str(path / "cgroup.procs")  # made here: enter_self runs after fork

    @classmethod
    def make(cls, label: str) -> "CpuGroup | None":
        """A new empty group, or None when none can be made (then CPU is read in ticks)."""
        home = cgroup2_home()
        if home is None:
            return None
        cls.counter += 1
        path = home / f"weft-bench-{os.getpid()}-{label}-{cls.counter}"
        try:
            path.mkdir()
        except OSError:
            return None
        group = cls(path)
        try:
            group.usage_ns()
        except (OSError, ValueError):
            group.remove()
            return None
        return group

    def usage_ns(self) -> int:
        for line in (self.path / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) * 1000
        raise ValueError(f"no usage_usec in {self.path}/cpu.stat")

    def enter_self(self) -> None:
        """Moves the calling process into the group: a Popen preexec_fn, so that the server
        and all it starts run in it from its first instruction. Async-signal-safe calls only.
        A refused move (no permission over the cgroup) leaves the process where it was: the
        caller sees it missing from pids() and reads ticks instead."""
        try:
            fd = os.open(self.procs, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
        except OSError:
            pass

    def add(self, pid: int) -> None:
        """Moves a running process (all its threads) into the group."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def close(self, kill: bool) -> None:
        """Kill (kill=True) or move back to the harness's own group (False) every process still
        in the group, then remove the directory (a group left behind is only a name)."""
        for _ in range(100):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    if kill:
                        os.kill(pid, signal.SIGKILL)
                    else:
                        (self.path.parent / "cgroup.procs").write_text(str(pid))
                except OSError:
                    pass
            time.sleep(0.02)
        self.remove()

    def remove(self) -> None:
        for _ in range(50):  # a killed process leaves the group once it is reaped
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def move_into_group(pid: int, group: CpuGroup) -> None:
    """A background process into `group`: with its whole session when it leads one (a
    postmaster and its backends; backends started later are forked inside the group)."""
    members = [pid]
    try:
        if int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3]) == pid:
            members = session_pids(pid)
    except (OSError, IndexError, ValueError):
        pass
    for p in members:
        try:
            group.add(p)
        except OSError:
            pass


def session_pids(sid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[3]) == sid:
                out.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return out


@contextlib.contextmanager
def background_groups(background: dict):
    """{pid: CpuGroup | None} for a suite's background processes ({name: pid}), each moved
    into a group of its own for the session's length and moved back after."""
    groups = {}
    try:
        for name, pid in background.items():
            group = CpuGroup.make(f"bg-{name}")
            if group is not None:
                move_into_group(pid, group)
            groups[pid] = group
        yield groups
    finally:
        for group in groups.values():
            if group is not None:
                group.close(kill=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_session(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


class ServerError(Exception):
    pass


def start_server(argv: list[str], port: int, ready_timeout: float,
                 err_file, env: dict | None = None,
                 group: CpuGroup | None = None) -> subprocess.Popen:
    """Start argv in its own session (and in `group`, if any) and wait until 127.0.0.1:port
    accepts connections.

    `env`: variables added to the harness's environment for the server."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=err_file, start_new_session=True,
                            env={**os.environ, **env} if env else None,
                            preexec_fn=group.enter_self if group else None)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerError(f"server exited with {proc.returncode} before accepting")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.02)
    stop_server(proc)
    raise ServerError(f"server not accepting on port {port} after {ready_timeout:g}s")


def stop_server(proc: subprocess.Popen) -> None:
    kill_session(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        kill_session(proc.pid)
        proc.wait()


def run_once(argv: list[str], timeout: float, threshold: float,
             server_argv: list[str] | None = None, port: int | None = None,
             ready_timeout: float = 10.0, server_env: dict | None = None,
             background: dict | None = None, charged: int | None = None,
             groups: dict | None = None) -> Run:
    """Run argv once (with its server around it, if any) and measure it.

    `background`: {name: pid} of processes that run across runs (a suite's brokers); their CPU
    is not other CPU. `charged`: the one of them whose CPU per million ops is reported.
    `groups`: {pid: CpuGroup} of those background processes (background_groups)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.TemporaryFile() as server_err:
        server = None
        group = CpuGroup.make("server") if server_argv else None
        try:
            if server_argv:
                server = start_server(server_argv, port, ready_timeout, server_err, server_env,
                                      group)
                if group is not None and server.pid not in group.pids():
                    group.remove()  # the server could not enter it: ticks instead
                    group = None
            return measure_child(argv, timeout, threshold, out, err, server, background, charged,
                                 group, groups)
        except (ServerError, OSError) as e:
            server_err.seek(0)
            detail = tail(server_err.read().decode(errors="replace"))
            return Run("failed", error=f"{e}" + (f"\n{detail}" if detail else ""))
        finally:
            if server is not None:
                stop_server(server)
            if group is not None:
                group.close(kill=True)


def rss_kib(pid: int) -> int:
    """Resident set size of one process (VmRSS), 0 if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kib(pids: list[int]) -> int:
    """Sum of VmRSS over `pids` (a process that is gone counts 0). Pages shared between them
    (a master's and its workers' code) count once per process, as each one's VmRSS does."""
    return sum(rss_kib(pid) for pid in pids)


def server_pids(server_pid: int, group: "CpuGroup | None") -> list[int]:
    """Every process of a server: those in its cgroup, else those in its session (the server
    leads one: start_server). A launcher script and what it starts are all counted."""
    if group is not None:
        pids = group.pids()
        if pids:
            return pids
    return session_pids(server_pid)


class RssSampler:
    """Samples a server's RSS (summed over its processes: server_pids) every 50 ms while the
    client runs; keeps the peak."""

    def __init__(self, pids: Callable[[], list[int]]):
        self.pids = pids
        self.peak = tree_rss_kib(pids())
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self) -> None:
        while not self.stop.wait(0.05):
            self.peak = max(self.peak, tree_rss_kib(self.pids()))

    def finish(self) -> int:
        self.stop.set()
        self.thread.join()
        return max(self.peak, tree_rss_kib(self.pids()))


class CpuReader:
    """CPU seconds of one measured server or broker: from its cgroup when it has one (method
    "cgroup"), else from /proc in ticks (method "ticks"; `ticks` reads them)."""

    def __init__(self, group: CpuGroup | None, ticks: Callable[[], int]):
        self.group, self.ticks = group, ticks
        self.method = CGROUP_METHOD if group is not None else TICKS_METHOD
        self.last = 0.0
        self.start = self.read()

    def read(self) -> float:
        if self.group is None:
            return self.ticks() / HZ
        try:
            self.last = self.group.usage_ns() / 1e9
        except (OSError, ValueError):
            pass  # the group is gone: its CPU is what was read last
        return self.last

    def elapsed(self) -> float:
        return self.read() - self.start


def measure_child(argv, timeout, threshold, out, err, server, background=None,
                  charged=None, group=None, groups=None) -> Run:
    timed_out = threading.Event()

    def on_timeout(pid: int) -> None:
        timed_out.set()
        kill_session(pid)

    server_cpu_reader = (CpuReader(group, lambda: session_cpu_ticks(server.pid))
                         if server else None)
    bg_readers = {pid: CpuReader((groups or {}).get(pid),
                                 lambda pid=pid: process_cpu_ticks(pid))
                  for pid in (background or {}).values()}
    sampler = RssSampler(lambda: server_pids(server.pid, group)) if server else None
    busy_before, nice_before, ncpu = read_cpu()
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                            start_new_session=True, env=client_env(server, group))
    timer = threading.Timer(timeout, on_timeout, (proc.pid,))
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except BaseException:  # Ctrl-C: the child has its own session, so it did not get SIGINT
        kill_session(proc.pid)
        proc.wait()
        raise
    finally:
        timer.cancel()
    wall = time.monotonic() - start
    busy_after, nice_after, _ = read_cpu()
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    server_cpu = server_cpu_reader.elapsed() if server_cpu_reader else None
    bg_cpu = {pid: r.elapsed() for pid, r in bg_readers.items()}
    server_rss = sampler.finish() if sampler else None

    out.seek(0)
    err.seek(0)
    stdout = out.read().decode(errors="replace")
    stderr = err.read().decode(errors="replace")
    cpu = usage.ru_utime + usage.ru_stime
    own = cpu + (server_cpu or 0.0) + sum(bg_cpu.values())
    other = other_cpu_percent(busy_after - busy_before, own, wall, ncpu)
    # The harness's children inherit its nice value: when it runs niced, their user time is in
    # the nice column too (counted whole: their system time is not, so this errs low).
    niced = niced_cpu_percent(nice_after - nice_before, own if os.nice(0) > 0 else 0.0, other,
                              wall, ncpu)
    run = Run("ok", wall_s=wall, cpu_s=cpu, server_cpu_s=server_cpu, other_cpu_percent=other,
              niced_cpu_percent=niced, noisy=is_noisy(other - niced, wall, threshold))
    if timed_out.is_set():
        run.status, run.error = "failed", f"timed out after {timeout:g}s\n{tail(stderr)}".strip()
    elif code == UNSUPPORTED_EXIT:
        run.status = "unsupported"
    elif code == INVALID_EXIT:
        run.status, run.error = "invalid", tail(stderr) or "invalid (exit 3)"
        run.metrics = parse_metrics(stdout)
    elif code != 0:
        why = f"exit {code}" if code > 0 else f"killed by {signal.Signals(-code).name}"
        run.status, run.error = "failed", f"{why}\n{tail(stderr)}".strip()
    else:
        run.metrics = parse_metrics(stdout)
        if not run.metrics:
            run.status, run.error = "failed", f"printed no metric line\n{tail(stderr)}".strip()
        elif server_cpu is not None:
            run.metrics = pair_metrics(run.metrics, server_cpu, cpu, server_cpu_reader.method,
                                       server_rss or 0)
        if charged in bg_cpu:
            ops = next((m["value"] for m in run.metrics if m["metric"] == "ops"), None)
            if ops:
                run.metrics.append({"metric": "broker_cpu_s_per_m", "unit": "s",
                                    "value": bg_cpu[charged] * 1e6 / ops,
                                    "method": bg_readers[charged].method})
    return run


CLIENT_CPU_METRIC = "client_cpu_s"  # printed by a client: its load tool's own CPU seconds


def pair_metrics(printed: list[dict], server_cpu_s: float, client_process_cpu_s: float,
                 method: str, server_rss: int) -> list[dict]:
    """A server pair's rows: what the client printed (its `client_cpu_s` taken out), then per
    op (the client's `ops`) the server's CPU, the client's (its `client_cpu_s` when printed:
    the load tool alone, without the client's own start-up; else the whole client process's)
    and their total, and the server's peak RSS. The total is read the server's way (`method`);
    the client's CPU is wait4's rusage, in microseconds, either way."""
    client = next((m["value"] for m in printed if m["metric"] == CLIENT_CPU_METRIC), None)
    out = [m for m in printed if m["metric"] != CLIENT_CPU_METRIC]
    client = client_process_cpu_s if client is None else client
    ops = next((m["value"] for m in out if m["metric"] == "ops"), None)
    if ops:
        out += [{"metric": "server_cpu_ns_per_op", "unit": "ns",
                 "value": server_cpu_s * 1e9 / ops, "method": method},
                {"metric": "client_cpu_ns_per_op", "unit": "ns", "value": client * 1e9 / ops},
                {"metric": "total_cpu_ns_per_op", "unit": "ns",
                 "value": (server_cpu_s + client) * 1e9 / ops, "method": method}]
    out.append({"metric": "server_rss_kib", "unit": "KiB", "value": float(server_rss)})
    return out


SERVER_CGROUP_ENV = "WEFT_BENCH_SERVER_CGROUP"  # the server's cgroup directory, for a client
SERVER_SESSION_ENV = "WEFT_BENCH_SERVER_SESSION"  # the server's session id (its pid)


def client_env(server, group: "CpuGroup | None") -> dict | None:
    """The client's environment: where the server's processes are (a client that reads the
    server's memory itself, clients/http-idle, sums the same processes as server_rss_kib)."""
    if server is None:
        return None
    env = {**os.environ, SERVER_SESSION_ENV: str(server.pid)}
    if group is not None:
        env[SERVER_CGROUP_ENV] = str(group.path)
    return env


def competing_percent(run: Run) -> float:
    """The other CPU a run's noise is judged by: what processes at normal priority used."""
    return run.other_cpu_percent - run.niced_cpu_percent


def measure(argv, timeout, threshold, retries, **server) -> Run:
    """run_once, repeated up to `retries` times while other processes at normal priority used
    > threshold CPU.

    Keeps the first quiet run, else the least disturbed one, marked noisy.
    """
    best = None
    for attempt in range(1, retries + 2):
        run = run_once(argv, timeout, threshold, **server)
        run.attempts = attempt
        if run.status != "ok" or not run.noisy:
            return run
        if best is None or competing_percent(run) < competing_percent(best):
            best = run
    best.attempts = retries + 1
    return best


def machine_facts() -> dict:
    def first(path: str, key: str, sep: str = ":") -> str:
        try:
            for line in Path(path).read_text().splitlines():
                if line.startswith(key):
                    return line.split(sep, 1)[1].strip().strip('"')
        except OSError:
            pass
        return "unknown"

    mem_kb = first("/proc/meminfo", "MemTotal").split()[0]
    memory = f"{int(mem_kb) / 1024 / 1024:.1f} GiB" if mem_kb.isdigit() else "unknown"
    return {
        "cpu_model": first("/proc/cpuinfo", "model name"),
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "memory": memory,
        "os": first("/etc/os-release", "PRETTY_NAME", "="),
        "python": platform.python_version(),
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }
