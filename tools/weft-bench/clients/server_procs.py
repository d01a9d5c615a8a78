"""What the HTTP clients learn about the server under load from /proc: the processes that hold
its listening socket (nginx: the master and every worker), their resident memory, and the
ephemeral port range a client's connections come from."""
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
