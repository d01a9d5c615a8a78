#!/usr/bin/env python3
"""natscli's own JetStream benchmark, `nats bench js pub async`, as a peer of weft-bench's
eventbus suite (tools/weft-bench/suites/eventbus.py), with weft::bus's settings where natscli
has one:

  natscli-pub SCENARIO messages=N [max_pending=1024] [body=220] [nats_port=4222]

SCENARIO: nats_memory_async | nats_file_async (anything else: exit 2, not supported).
Runs the pinned natscli (bench/peers/build.sh installs it beside this script as
natscli-bin/nats) unchanged:

  nats --no-context -s nats://127.0.0.1:PORT bench js pub async SUBJECT --stream SUBJECT
       --create --storage memory|file --replicas 1 --dedup --dedupwindow 2m
       --batch max_pending --msgs N --size {body}B --maxbytes ... --clients 1 --no-progress
       --csv FILE

- a stream of its own per run (created by natscli's --create before its clock starts: one
  replica, memory or file storage, 2 min duplicate window, as weft's and cnats-pub's), deleted
  at the end (`nats stream rm -f`) after checking that it holds N messages;
- --dedup: every message carries a Nats-Msg-Id, natscli's own "<run id>-0-<index>" (about 14
  to 20 characters, weft's are 36: natscli cannot be given an id or its length);
- --batch max_pending: natscli publishes `batch` messages with PublishMsgAsync, then waits
  until all of them are acknowledged (PublishAsyncComplete), then the next batch. So at most
  max_pending are in flight as in weft, but the window empties between batches, where weft's
  (and cnats's) slides: a new message goes out as soon as any one is acknowledged;
- bodies of `body` zero bytes (natscli's payload), the size of weft's encoded envelope;
- no untimed warm-up message: natscli's clock starts at its first publish on a connection it
  just made (the ack inbox is set up by that first publish).

Metrics: msgs_per_s = N / natscli's own DurationSecs (its CSV: first publish to the last ack
and a flush); success_percent = 100 x messages in the stream / N (natscli stops at the first
failed ack); cpu_ns_per_msg = natscli's CPU (all threads, from /proc) between its line
"[1] Starting JetStream asynchronous publisher" (printed as its publisher starts) and its
result line, / N; ops = N. natscli's latencies are per batch (publish of the batch's first
message to the batch's last ack), not per message, so they are not reported as weft's
publish-to-ack latency.
"""
from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from toolpeer import UNSUPPORTED, emit, parse_params, run_marked, unique_name  # noqa: E402

NATS = Path(os.environ.get("WEFT_NATSCLI",
                          Path(__file__).resolve().parent / "natscli-bin" / "nats"))
STORAGE = {"nats_memory_async": "memory", "nats_file_async": "file"}


def duration_s(csv_text: str) -> float:
    """DurationSecs of the (single) publisher row of natscli's --csv output."""
    rows = [r for r in csv.reader(io.StringIO(csv_text)) if r]
    head, data = rows[0], rows[1:]
    if len(data) != 1:
        raise ValueError(f"expected one publisher row in natscli's CSV, got {len(data)}")
    return float(data[0][head.index("DurationSecs")])


def stream_messages(info_json: str) -> int:
    return int(json.loads(info_json)["state"]["messages"])


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] not in STORAGE:
        return UNSUPPORTED
    p = parse_params(argv[2:])
    n = int(p.get("messages", 10_000))
    window = int(p.get("max_pending", 1024))
    body = int(p.get("body", 220))
    url = f"nats://127.0.0.1:{int(p.get('nats_port', 4222))}"
    stream = unique_name("natsclibench")
    base = [str(NATS), "--no-context", "-s", url]
    # A bound the server reserves for the stream (DiscardNew beyond it): room for every
    # message with its headers, never less than 64 MiB.
    max_bytes = max(64 << 20, n * (body + 300))
    with tempfile.TemporaryDirectory(prefix="natscli-pub-") as tmp:
        csv_path = Path(tmp) / "bench.csv"
        cmd = base + ["bench", "js", "pub", "async", stream, "--stream", stream, "--create",
                      "--storage", STORAGE[argv[1]], "--replicas", "1", "--dedup",
                      "--dedupwindow", "2m", "--batch", str(window), "--msgs", str(n),
                      "--size", f"{body}B", "--maxbytes", str(max_bytes), "--clients", "1",
                      "--no-progress", "--csv", str(csv_path)]
        print("natscli-pub: " + " ".join(cmd), file=sys.stderr, flush=True)
        try:
            status, _, cpu_ns = run_marked(
                cmd, is_start=lambda ln: "Starting JetStream asynchronous publisher," in ln,
                is_end=lambda ln: "asynchronous publisher stats:" in ln)
            if status != 0:
                print(f"natscli-pub: nats bench exited with {status}", file=sys.stderr)
                return 1
            seconds = duration_s(csv_path.read_text())
            info = subprocess.run(base + ["stream", "info", stream, "--json"], text=True,
                                  capture_output=True, check=True).stdout
            stored = stream_messages(info)
        finally:
            subprocess.run(base + ["stream", "rm", "-f", stream], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    emit("msgs_per_s", "msg/s", n / seconds)
    emit("success_percent", "%", 100.0 * min(stored, n) / n)
    if cpu_ns is not None:
        emit("cpu_ns_per_msg", "ns", cpu_ns / n)
    emit("ops", "", n)
    if stored != n:
        print(f"natscli-pub: the stream holds {stored} messages, {n} were published",
              file=sys.stderr)
        return 3  # measured, but invalid
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
