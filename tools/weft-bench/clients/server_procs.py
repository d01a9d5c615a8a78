"""What the HTTP clients learn about the server under load from /proc: the server's processes
(those the harness put in its cgroup or session, or those holding its listening socket), their
resident memory, and the ephemeral port range a client's connections come from."""
from __future__ import annotations

import os
from pathlib import Path


def listening_inodes(port: int) -> set[str]:
    """Inodes of the TCP sockets listening on `port` (any address, IPv4 or IPv6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f[9])
    return inodes


def server_pids(port: int) -> list[int]:
    """The processes with a descriptor on a socket listening on `port`."""
    wanted = {f"socket:[{i}]" for i in listening_inodes(port)}
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            fds = os.listdir(proc / "fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(proc / "fd" / fd) in wanted:
                    pids.append(int(proc.name))
                    break
            except OSError:
                continue
    return sorted(pids)


def session_pids(sid: int) -> list[int]:
    """The processes of session `sid`."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[3]) == sid:
                pids.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return sorted(pids)


def harness_server_pids(env: dict | None = None) -> list[int] | None:
    """The server's processes as the harness sees them (weftbench/measure.py, server_pids):
    every process in its cgroup (WEFT_BENCH_SERVER_CGROUP), else in its session
    (WEFT_BENCH_SERVER_SESSION); None when the harness gave neither (run by hand)."""
    env = os.environ if env is None else env
    group = env.get("WEFT_BENCH_SERVER_CGROUP")
    if group:
        try:
            pids = [int(x) for x in (Path(group) / "cgroup.procs").read_text().split()]
            if pids:
                return sorted(pids)
        except OSError:
            pass
    sid = env.get("WEFT_BENCH_SERVER_SESSION")
    return session_pids(int(sid)) if sid else None


def rss_kib(pids: list[int]) -> int:
    """Sum of VmRSS over `pids` (a process that is gone counts 0)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def ephemeral_range() -> tuple[int, int]:
    lo, hi = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return lo, hi
