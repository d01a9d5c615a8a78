"""What the brokers' own benchmark tools (natscli's `nats bench`, Kafka's ProducerPerformance)
need to speak weft-bench's scenario protocol (tools/weft-bench/README.md): the key=value
parameters, the JSON metric lines, and the tool's CPU over its measured part only.

The tools are run unchanged. Their CPU is read from /proc while they run: each thread's
/proc/PID/task/TID/schedstat (its run time in nanoseconds), summed over every thread the tool
had, at two lines of its output: one printed just before its measured part starts, one when it
prints its result. So start-up (a JVM's class loading, the connection and stream set-up) and
shutdown are not charged to the messages, as the C peers read getrusage around their timed
loop only. A thread that exits between two readings keeps the last value read for it (the
reader samples every 20 ms while the tool runs), so at most 20 ms of such a thread's time can
be missed; the tools' worker threads live until after their result line.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

UNSUPPORTED = 2  # the protocol's "this system does not implement that scenario"


def parse_params(argv: list[str]) -> dict[str, str]:
    """key=value arguments -> dict (values as strings; unknown keys are the caller's to ignore)."""
    params = {}
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or not key:
            raise SystemExit(f"bad parameter {arg!r} (want key=value)")
        params[key] = value
    return params


def emit(metric: str, unit: str, value: float) -> None:
    print(json.dumps({"metric": metric, "unit": unit, "value": round(float(value), 6)}),
          flush=True)


def thread_cpu_ns(pid: int) -> dict[int, int]:
    """{tid: run time in ns} of every thread of `pid` now ({} once it is gone)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            out[int(tid)] = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # exited while we looked
    return out


class CpuTracker:
    """Every thread's latest run time, sampled every `interval` s while the process runs."""

    def __init__(self, pid: int, interval: float = 0.02):
        self.pid = pid
        self.seen: dict[int, int] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self.thread.start()

    def _run(self, interval: float) -> None:
        while not self.stop.wait(interval):
            self.sample()

    def sample(self) -> int:
        """Reads every live thread now; returns the sum over all threads ever seen (ns)."""
        now = thread_cpu_ns(self.pid)
        with self.lock:
            self.seen.update(now)
            return sum(self.seen.values())

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def run_marked(argv: list[str], is_start: Callable[[str], bool], is_end: Callable[[str], bool],
               env: dict | None = None, quiet: Callable[[str], bool] = lambda line: False
               ) -> tuple[int, list[str], int | None]:
    """Runs argv, reading its stdout and its stderr line by line (each pipe on a thread of its
    own, so that neither fills up and a line written to one cannot split a line of the other);
    the lines not `quiet` are copied to stderr once it ends. Returns (exit status, stdout
    lines, CPU ns of the tool from the first line of either pipe matching is_start to the
    first later line matching is_end; None if either was not seen)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env, text=True, errors="replace")
    tracker = CpuTracker(proc.pid)
    out: list[str] = []
    err: list[str] = []
    marks: dict[str, int] = {}
    lock = threading.Lock()

    def read(pipe, into: list[str]) -> None:
        for line in pipe:
            with lock:
                if "start" not in marks and is_start(line):
                    marks["start"] = tracker.sample()
                elif "start" in marks and "end" not in marks and is_end(line):
                    marks["end"] = tracker.sample()
            into.append(line.rstrip("\n"))

    readers = [threading.Thread(target=read, args=(proc.stdout, out)),
               threading.Thread(target=read, args=(proc.stderr, err))]
    try:
        for r in readers:
            r.start()
        for r in readers:
            r.join()
        status = proc.wait()
    finally:
        tracker.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    print("\n".join(ln for ln in err + out if not quiet(ln)), file=sys.stderr, flush=True)
    cpu = marks["end"] - marks["start"] if len(marks) == 2 else None
    return status, out, cpu


def unique_name(prefix: str) -> str:
    """A stream or topic name of this run's own."""
    return f"{prefix}-{os.getpid()}-{time.time_ns()}"
