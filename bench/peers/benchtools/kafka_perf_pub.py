#!/usr/bin/env python3
"""Kafka's own producer benchmark, org.apache.kafka.tools.ProducerPerformance (kafka-tools
4.1.1, the broker's version), as a peer of weft-bench's eventbus suite
(tools/weft-bench/suites/eventbus.py), with weft::bus's Kafka settings where the Java producer
has one:

  kafka-perf-pub kafka_async messages=N [max_pending=1024] [body=220] [kafka_port=9092]
                 [linger_ms=5] [batch_messages=0]

Anything but kafka_async: exit 2 (not supported). Runs the tool unchanged on the machine's
JDK (`java` on PATH, or $JAVA) from the jars bench/peers/build.sh fetched beside this script
(kafka-perf-lib/, scripts/kafka/tools/pom.xml), with the JVM options Kafka's own
kafka-producer-perf-test.sh passes (-Xmx512M, G1 with MaxGCPauseMillis=20, ...):

  java ... org.apache.kafka.tools.ProducerPerformance --topic T --num-records N
       --payload-file F --throughput -1 --print-metrics --producer-props
       bootstrap.servers=127.0.0.1:PORT acks=all enable.idempotence=true linger.ms=5
       batch.size=B buffer.memory=4B max.in.flight.requests.per.connection=5
       compression.type=none delivery.timeout.ms=30000 request.timeout.ms=25000

- a topic of its own per run (one partition, replication factor 1, as weft's and
  rdkafka-pub's), made here through the wire protocol (CreateTopics) and waited for until its
  leader is known, before the JVM starts; deleted (DeleteTopics) at the end;
- batching as weft's: linger.ms = linger_ms, and batch.size (bytes) = the size of a record
  batch of batch_messages records (0: max_pending / 4, weft's default) of `body` bytes;
- the in-flight window: the Java producer bounds bytes, not messages. buffer.memory =
  max_pending / batch_messages x batch.size, so at most max_pending records are buffered or
  in flight (send() blocks beyond it, Java's own back-pressure);
- records: a `body`-byte value (one line of 'x' in the payload file, the raw clients'
  bodies), NO key and NO header: ProducerPerformance sends ProducerRecord(topic, value) and
  cannot be given either, so it sends about 50 bytes less per record than weft (key = the
  index, header weft-id of 36 characters), and its partitioner (the default: sticky for
  records without a key, murmur2 for keyed ones) has nothing to hash; one partition anyway;
- no untimed warm-up record: its clock starts after the producer is built, so the first
  record's metadata request and the idempotent producer's id are inside it. The JVM's start
  is outside it (ProducerPerformance's own records/sec, over its send loop and flush).

Metrics, from its summary line ("N records sent, R records/sec (...), A ms avg latency, M ms
max latency, p50, p95, p99, p99.9"): msgs_per_s = R; mean_latency_ms = A; p99_latency_ms =
p99 (whole milliseconds: the tool's resolution); success_percent = 100 x N sent / N asked
(records whose callback saw no error); cpu_ns_per_msg = the JVM's CPU (all threads, from
/proc) from the moment it loads ProducerPerformance$Stats (-Xlog:class+load: the line before
its clock starts, after the producer is built) to its summary line, / N; ops = N.

The tool's stdout and stderr must stay on two pipes (toolpeer.run_marked). Its summary is the
JVM's first %.1f: System.out writes "N records sent, " and only then loads the float formatting
classes (jdk.internal.math.FormattedFloatingDecimal...), which -Xlog:class+load logs on stderr;
in one joined pipe those log lines land inside the summary line, which then matches nothing
("no ProducerPerformance summary line": 20 runs of 20 at 10,000 messages, 0 of 20 on two
pipes).
"""
from __future__ import annotations

import os
import re
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from toolpeer import UNSUPPORTED, emit, parse_params, run_marked, unique_name  # noqa: E402

LIB = Path(os.environ.get("WEFT_KAFKA_PERF_LIB",
                          Path(__file__).resolve().parent / "kafka-perf-lib"))
# bin/kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS and kafka-producer-perf-test.sh's heap.
# Compiler threads are kept for the JVM's life (no dynamic count), so that no thread whose
# CPU is charged exits before the summary line.
JVM_OPTS = ["-Xmx512M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
            "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
            "-XX:-UseDynamicNumberOfCompilerThreads", "-Xlog:class+load=info:stderr:none"]
SUMMARY = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \([\d.]+ MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")
STATS_CLASS = "org.apache.kafka.tools.ProducerPerformance$Stats"

# Record batch v2 framing: 61 bytes of batch header; per record a varint length, then
# attributes (1), timestamp delta (varint, < 64 ms within a linger: 1), offset delta (varint,
# up to 2 below 8192), key length -1 (1), value length (varint), the value, header count (1).


def varint_len(v: int) -> int:
    z = (v << 1) ^ (v >> 63)  # zigzag
    n = 1
    while z >= 0x80:
        z >>= 7
        n += 1
    return n


def batch_bytes(records: int, body: int) -> int:
    inner = 1 + 1 + 2 + 1 + varint_len(body) + body + 1
    return 61 + records * (varint_len(inner) + inner)


def parse_summary(lines: list[str]) -> dict:
    """The tool's last summary line as numbers."""
    for line in reversed(lines):
        m = SUMMARY.match(line.strip())
        if m:
            sent, rate, avg, mx, p50, p95, p99, p999 = m.groups()
            return {"sent": int(sent), "rate": float(rate), "avg_ms": float(avg),
                    "max_ms": float(mx), "p50_ms": int(p50), "p95_ms": int(p95),
                    "p99_ms": int(p99), "p999_ms": int(p999)}
    raise ValueError("no ProducerPerformance summary line in its output")


# --- the few Kafka requests the run needs, on the wire protocol (no JVM start of their own) --

def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class Admin:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def request(self, api_key: int, version: int, body: bytes) -> bytes:
        self.corr += 1
        msg = struct.pack(">hhi", api_key, version, self.corr) + _string("kafka-perf-pub") + body
        self.sock.sendall(struct.pack(">i", len(msg)) + msg)
        size = struct.unpack(">i", self._exact(4))[0]
        resp = self._exact(size)
        if struct.unpack(">i", resp[:4])[0] != self.corr:
            raise RuntimeError("correlation id mismatch")
        return resp[4:]

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise RuntimeError("connection closed by the broker")
            buf += chunk
        return buf

    def create_topic(self, topic: str) -> None:
        # CreateTopics v4: [name, partitions 1, replication 1, no assignments, no configs],
        # timeout 10 s, validate_only false
        body = (struct.pack(">i", 1) + _string(topic) + struct.pack(">ihii", 1, 1, 0, 0)
                + struct.pack(">ib", 10_000, 0))
        r = self.request(19, 4, body)
        pos = 4 + 4  # throttle, array length
        nlen = struct.unpack(">h", r[pos:pos + 2])[0]
        err = struct.unpack(">h", r[pos + 2 + nlen:pos + 4 + nlen])[0]
        if err != 0:
            raise RuntimeError(f"CreateTopics {topic}: error code {err}")

    def leader(self, topic: str) -> int:
        # Metadata v4: one topic, no auto-creation -> its partition 0's leader (-1: none yet)
        r = self.request(3, 4, struct.pack(">i", 1) + _string(topic) + struct.pack(">b", 0))
        pos = 4
        (brokers,) = struct.unpack(">i", r[pos:pos + 4])
        pos += 4
        for _ in range(brokers):
            pos += 4
            pos += 2 + struct.unpack(">h", r[pos:pos + 2])[0] + 4
            rack = struct.unpack(">h", r[pos:pos + 2])[0]
            pos += 2 + max(rack, 0)
        pos += 2 + max(struct.unpack(">h", r[pos:pos + 2])[0], 0)  # cluster id
        pos += 4  # controller id
        pos += 4  # topic count (1)
        err = struct.unpack(">h", r[pos:pos + 2])[0]
        pos += 2
        pos += 2 + struct.unpack(">h", r[pos:pos + 2])[0] + 1  # name, is_internal
        if err != 0 or struct.unpack(">i", r[pos:pos + 4])[0] < 1:
            return -1
        pos += 4
        perr, _part, leader = struct.unpack(">hii", r[pos:pos + 10])
        return leader if perr == 0 else -1

    def delete_topic(self, topic: str) -> None:
        # DeleteTopics v3: [name], timeout 10 s (the answer is not needed)
        self.request(20, 3, struct.pack(">i", 1) + _string(topic) + struct.pack(">i", 10_000))


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] != "kafka_async":
        return UNSUPPORTED
    p = parse_params(argv[2:])
    n = int(p.get("messages", 10_000))
    window = int(p.get("max_pending", 1024))
    body = int(p.get("body", 220))
    port = int(p.get("kafka_port", 9092))
    linger = int(p.get("linger_ms", 5))
    per_batch = int(p.get("batch_messages", 0)) or min(max(window // 4, 1), 10_000)
    batch_size = batch_bytes(per_batch, body)
    buffer_memory = max(window // per_batch, 1) * batch_size
    topic = unique_name("kafkaperfbench")
    java = os.environ.get("JAVA", "java")
    admin = Admin(port)
    try:
        admin.create_topic(topic)
        for _ in range(200):  # until the leader is known: no metadata retry inside the clock
            if admin.leader(topic) >= 0:
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"topic {topic} has no leader after 10 s")
        with tempfile.TemporaryDirectory(prefix="kafka-perf-pub-") as tmp:
            payload = Path(tmp) / "payload"
            payload.write_text("x" * body + "\n")
            cmd = [java, *JVM_OPTS, "-cp", f"{LIB}/*",
                   "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                   "--num-records", str(n), "--payload-file", str(payload),
                   "--throughput", "-1", "--print-metrics", "--producer-props",
                   f"bootstrap.servers=127.0.0.1:{port}", "acks=all",
                   "enable.idempotence=true", f"linger.ms={linger}",
                   f"batch.size={batch_size}", f"buffer.memory={buffer_memory}",
                   "max.in.flight.requests.per.connection=5", "compression.type=none",
                   "delivery.timeout.ms=30000", "request.timeout.ms=25000",
                   "client.id=kafka-perf-pub"]
            print("kafka-perf-pub: " + " ".join(cmd), file=sys.stderr, flush=True)
            status, lines, cpu_ns = run_marked(
                cmd, is_start=lambda ln: STATS_CLASS in ln,
                is_end=lambda ln: SUMMARY.match(ln.strip()) is not None,
                quiet=lambda ln: " source: " in ln or ln.startswith("producer-")
                or ln.startswith("app-info") or ln.startswith("kafka-metrics-count"))
    finally:
        try:
            admin.delete_topic(topic)
        finally:
            admin.close()
    if status != 0:
        print(f"kafka-perf-pub: ProducerPerformance exited with {status}", file=sys.stderr)
        return 1
    try:
        s = parse_summary(lines)
    except ValueError as e:
        print(f"kafka-perf-pub: {e}; its stdout ended with:", *lines[-3:], sep="\n",
              file=sys.stderr)
        return 1
    emit("msgs_per_s", "msg/s", s["rate"])
    emit("mean_latency_ms", "ms", s["avg_ms"])
    emit("p99_latency_ms", "ms", s["p99_ms"])
    emit("success_percent", "%", 100.0 * s["sent"] / n)
    if cpu_ns is not None:
        emit("cpu_ns_per_msg", "ns", cpu_ns / n)
    emit("ops", "", n)
    return 0 if s["sent"] == n else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
