"""What the brokers' own benchmark tools (natscli's `nats bench`, Kafka's ProducerPerformance)
need to speak weft-bench's scenario protocol (tools/weft-bench/README.md): the key=value
parameters, the JSON metric lines, and the tool's CPU over its measured part only.

The tools are run unchanged. Their CPU is read from /proc while they run: each thread's
/proc/PID/task/TID/schedstat (its run time in nanoseconds), summed over every thread the tool
had, at two lines of its output: one printed just before its measured part starts, one when it
prints its result. So start-up (a JVM's class loading, the connection and stream set-up) and
shutdown are not charged to the messages, as the C peers read getrusage around their timed
loop only. The two lines may come on different streams (ProducerPerformance: a class-load log
line on stderr, its summary on stdout); the two pipes are read by one thread in rounds that
order them (read_both), and the CPU is sampled when a round holding a mark ends. A thread that
exits between two readings keeps the last value read for it (the reader samples every 20 ms
while the tool runs), so at most 20 ms of such a thread's time can be missed; the tools' worker
threads live until after their result line.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, NamedTuple

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


class Line(NamedTuple):
    """A line of the tool's output as it was read: which stream, the text (no newline), the
    round of reads that completed it (read_both) and the tool's CPU (ns, CpuTracker.sample)
    taken right after that round when the line was a mark."""
    stream: str  # "out" | "err"
    text: str
    round: int
    cpu_ns: int | None = None


def read_both(proc: subprocess.Popen, mark: Callable[[str], bool],
              sample: Callable[[], int]) -> list[Line]:
    """Reads the tool's stdout and stderr on this one thread until both are closed, each into
    lines of its own (a line on one stream is never cut by the other), in rounds: a round
    waits for data on either pipe, then reads every pipe that has some, again and again, until
    a poll finds both empty. At that moment everything written so far has been read, and
    whatever a later round reads was written after it: a line of an earlier round was written
    before any line of a later one, whichever the streams; within a round only each stream's
    own order is known. When a round completes a line `mark` picks, the tool's CPU is sampled
    once at its end, so a mark's figure is the CPU within a round's length of its writing,
    not whenever a reader thread got to it."""
    streams = {proc.stdout.fileno(): "out", proc.stderr.fileno(): "err"}
    partial = {fd: b"" for fd in streams}
    lines: list[Line] = []
    poller = select.poll()
    for fd in streams:
        poller.register(fd, select.POLLIN)
    open_fds = set(streams)
    round_no = 0
    while open_fds:
        round_no += 1
        fresh: list[Line] = []
        ready = poller.poll()  # wait for either
        while ready:
            for fd, _ in ready:
                data = os.read(fd, 1 << 16)
                if not data:
                    poller.unregister(fd)
                    open_fds.discard(fd)
                    if partial[fd]:  # a last line without its newline
                        fresh.append(Line(streams[fd], partial[fd].decode(errors="replace"),
                                          round_no))
                        partial[fd] = b""
                    continue
                *done, partial[fd] = (partial[fd] + data).split(b"\n")
                fresh += [Line(streams[fd], ln.decode(errors="replace"), round_no)
                          for ln in done]
            ready = poller.poll(0) if open_fds else []  # until both are empty
        if any(mark(ln.text) for ln in fresh):
            cpu = sample()
            fresh = [ln._replace(cpu_ns=cpu) if mark(ln.text) else ln for ln in fresh]
        lines += fresh
    return lines


def marked_cpu(lines: list[Line], is_start: Callable[[str], bool],
               is_end: Callable[[str], bool]) -> int | None:
    """CPU ns from the first line matching is_start to the first line matching is_end read
    with it or after it (None if either is missing). Within a stream the order is the order
    written; an end read by the same read as the start, on the other stream, is taken as after
    it (the tools print their result after their start line; between the two there was no
    CPU sample to tell them apart: the CPU between them is 0 within a round's length)."""
    start = next((i for i, ln in enumerate(lines) if is_start(ln.text)), None)
    if start is None:
        return None
    first = lines[start]
    end = next((ln for i, ln in enumerate(lines) if is_end(ln.text) and (
        i > start or (ln.round == first.round and ln.stream != first.stream))), None)
    if end is None or end.cpu_ns is None or first.cpu_ns is None:
        return None
    return end.cpu_ns - first.cpu_ns


def run_marked(argv: list[str], is_start: Callable[[str], bool], is_end: Callable[[str], bool],
               env: dict | None = None, quiet: Callable[[str], bool] = lambda line: False
               ) -> tuple[int, list[str], int | None]:
    """Runs argv, reading its stdout and its stderr (two pipes, so that a line written to one
    cannot cut a line of the other: the JVM logs a class it loads on stderr in the middle of a
    line it is printing on stdout) on one thread, in the order read (read_both); the lines not
    `quiet` are copied to stderr once it ends. Returns (exit status, stdout lines, CPU ns of
    the tool from the first line of either pipe matching is_start to the first later line
    matching is_end; None if either was not seen)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env)
    tracker = CpuTracker(proc.pid)
    try:
        lines = read_both(proc, lambda ln: is_start(ln) or is_end(ln), tracker.sample)
        status = proc.wait()
    finally:
        tracker.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    shown = [ln.text for ln in lines if ln.stream == "err"] + [
        ln.text for ln in lines if ln.stream == "out"]
    print("\n".join(ln for ln in shown if not quiet(ln)), file=sys.stderr, flush=True)
    return status, [ln.text for ln in lines if ln.stream == "out"], marked_cpu(
        lines, is_start, is_end)


def unique_name(prefix: str) -> str:
    """A stream or topic name of this run's own."""
    return f"{prefix}-{os.getpid()}-{time.time_ns()}"
