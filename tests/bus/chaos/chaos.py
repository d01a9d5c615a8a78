#!/usr/bin/env python3
"""The outbox chaos test: a producer, a relay and a consumer (chaos_node processes) against a
real broker (nats-server with JetStream, or a Kafka broker), with the relay SIGKILLed at random
instants and at the outbox's crash points, the broker killed and restarted and paused with
SIGSTOP, and the consumer killed; then the check. Every process is started by this script and
signalled by its PID only; the broker is started by scripts/brokers.sh (on WEFT_NATS_PORT or
WEFT_KAFKA_PORT; Kafka restarted on the data its kill left, WEFT_KAFKA_KEEP_DATA=1) and
signalled through its PID file.

  chaos.py --node build/test/tests/chaos_node [--broker nats|kafka] [--db sqlite|pg]
           [--events 2000] [--relay-kills 20] ...
  chaos.py --node ... --control no-inbox|mark-done-first|memory-storage|unbounded-window

On Kafka the relay's producer is idempotent (acks=all), but its idempotence ends with the
process: a relay restarted after a kill publishes again under a new producer id, so there the
inbox alone absorbs the repeats. The consumer is a group member whose offsets are committed
after acks.

Every relay writes a trace line per message handed to the broker's client and per outcome, with
its partition and offset (relay.N.log), and on PostgreSQL a trigger logs each outbox row deleted
(<prefix>_deleted): with --keep, a lost event can be followed from its deletion to the
acknowledgement before it and to the broker's log. The producer holds while a broker restart
outlasts --restart-cost, so slow restarts do not use up the staging the crash points need.

The consumer appends every delivery to deliveries.log as it arrives, before its inbox or its
order guard decides, and each outcome after it committed (chaos_node.cpp, --log); the verdict is
read from that log (check(), below). Pass (no --control): every id committed in the business
table processed, none twice; per key no event delivered by the broker for the first time after
a later event of its key; every row the consumer committed in the log; the outbox empty, no
dead letters. A control passes when its violation is reported:
  no-inbox         every publish with a fresh id, the consumer without its inbox, the relay
                   crashed after acks -> events processed twice. On Kafka the ids stay: a
                   restarted relay's producer is a new one, which the broker's idempotence
                   cannot match with the old one, so the repeats are stored again all the same
  mark-done-first  a relay that deletes a batch before publishing it, crashed in between
                   -> events lost
  memory-storage   the stream in NATS memory storage, the broker killed before the consumer
                   read it -> events lost
  unbounded-window a relay that publishes every event at once, without waiting for the ack
                   of its key's previous one, and re-sends a failed one later on its own
                   (WEFT_OUTBOX_FAULT=unbounded_window), the broker stopped while the relay
                   publishes and killed while stopped, the consumer as always (inbox and order
                   guard on) -> per-key order broken, seen in the log before the guard, or
                   events lost: when a key's failed event is lost (a resend behind the
                   broker's kill), the guard holds every later event of its key and none
                   breaks the order; either shows that the checker sees the fault
memory-storage and unbounded-window run on NATS; no-inbox and mark-done-first on Kafka too.
Every run prints its seed (--seed, else a random one) and the command line that replays it.
Exit status 0: passed (or the control saw its violation); 1: failed.
"""

import argparse
import os
import random
import shlex
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def log(*a):
    print("chaos:", *a, flush=True)


class Broker:
    """A broker of scripts/brokers.sh (`kind` nats or kafka), signalled by the PID in its PID
    file. Kafka is started on the data it has (WEFT_KAFKA_KEEP_DATA=1): a kill and a start are
    a crash and a restart, topics, messages and committed offsets kept."""

    def __init__(self, kind, port):
        self.kind, self.port = kind, port
        state = os.environ.get("WEFT_BROKERS_DIR", os.path.join(ROOT, ".cache", "brokers"))
        if kind == "kafka":
            self.pid_file = os.path.join(state, "kafka-%d" % port, "kafka.pid")
            self.env = dict(os.environ, WEFT_KAFKA_PORT=str(port), WEFT_KAFKA_KEEP_DATA="1")
            self.url = "kafka://127.0.0.1:%d" % port
        else:
            self.pid_file = os.path.join(state, "nats-%d" % port, "nats-server.pid")
            self.env = dict(os.environ, WEFT_NATS_PORT=str(port))
            self.url = "nats://127.0.0.1:%d" % port
        self.restart_seconds = []

    def start(self):
        subprocess.run([os.path.join(ROOT, "scripts", "brokers.sh"), "start", self.kind],
                       env=self.env, check=True, stdout=subprocess.DEVNULL, timeout=180)

    def pid(self):
        with open(self.pid_file) as f:
            return int(f.read().strip())

    def kill(self):
        pid = self.pid()
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.02)
        raise RuntimeError("%s %d survived SIGKILL" % (self.kind, pid))

    def restart(self):
        t0 = time.monotonic()
        self.kill()
        self.start()
        self.restart_seconds.append(time.monotonic() - t0)

    def pause(self, seconds):
        pid = self.pid()
        os.kill(pid, signal.SIGSTOP)
        time.sleep(seconds)
        os.kill(pid, signal.SIGCONT)

    def pause_then_restart(self, seconds):
        """SIGSTOP, then SIGKILL while stopped: what was sent to it meanwhile is lost."""
        t0 = time.monotonic()
        os.kill(self.pid(), signal.SIGSTOP)
        time.sleep(seconds)
        self.kill()
        self.start()
        self.restart_seconds.append(time.monotonic() - t0 - seconds)


class Proc:
    """One chaos_node process; restarted, killed and reaped by its PID."""

    def __init__(self, name, argv, logdir, env=None):
        self.name, self.argv, self.logdir = name, argv, logdir
        self.p = None
        self.starts = 0
        self.env = env

    def start(self, extra_env=None):
        env = dict(os.environ if self.env is None else self.env)
        env.update(extra_env or {})
        self.starts += 1
        out = open(os.path.join(self.logdir, "%s.%d.log" % (self.name, self.starts)), "w")
        self.p = subprocess.Popen(self.argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        out.close()

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def kill(self):
        if self.alive():
            os.kill(self.p.pid, signal.SIGKILL)
        if self.p is not None:
            self.p.wait()

    def wait(self, timeout):
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


def query(path, sql):
    if not os.path.exists(path):
        return []
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=10)
    try:
        return db.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []  # a table not created yet
    finally:
        db.close()


class SqliteApp:
    """The producer's side on SQLite: the business table `orders`, the outbox `weft_outbox`."""

    def __init__(self, path):
        self.path = path
        self.orders, self.outbox = "orders", "weft_outbox"

    def query(self, sql):
        return query(self.path, sql)


class PgApp:
    """The producer's side on PostgreSQL: `<prefix>_orders` and `<prefix>_outbox`, read by psql."""

    def __init__(self, conninfo, prefix):
        self.conninfo, self.prefix = conninfo, prefix
        self.orders, self.outbox = prefix + "_orders", prefix + "_outbox"

    def psql(self, sql, check=False):
        r = subprocess.run(["psql", self.conninfo, "-At", "-F", "|", "-c", sql],
                           capture_output=True, text=True, timeout=30)
        if check and r.returncode != 0:
            raise RuntimeError("psql: %s" % r.stderr.strip())
        if r.returncode != 0:
            return []  # a table not created yet
        return [tuple(int(v) if v.lstrip("-").isdigit() else v for v in line.split("|"))
                for line in r.stdout.splitlines() if line]

    def query(self, sql):
        return self.psql(sql)

    def terminate_relay_backend(self):
        return self.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                         "WHERE application_name = 'weft_chaos_relay'", check=True)[0][0]

    def drop(self):
        self.psql("DROP TABLE IF EXISTS %s, %s, %s_dead, %s_deleted"
                  % (self.orders, self.outbox, self.outbox, self.prefix))
        self.psql("DROP FUNCTION IF EXISTS %s_deleted_log()" % self.prefix)
        self.psql("DELETE FROM weft_schema_versions WHERE name = '%s'" % self.outbox)


def app_count(app, sql):
    rows = app.query(sql)
    return rows[0][0] if rows else 0


def read_log(path):
    """The consumer's delivery log (chaos_node consume --log): a list of (kind, id, key, seq,
    envelope id, attempt) in write order, and the number of torn lines skipped (a line a
    SIGKILL cut short lacks its closing " .")."""
    entries, torn = [], 0
    if not os.path.exists(path):
        return entries, torn
    with open(path) as f:
        for line in f:
            v = line.split()
            if len(v) != 7 or v[6] != "." or v[0] not in ("D", "P", "U", "R"):
                torn += 1
                continue
            try:
                entries.append((v[0], int(v[1]), v[2], int(v[3]), v[4], int(v[5])))
            except ValueError:
                torn += 1
    return entries, torn


def processed_ids(log_path):
    """The ids the log shows processed (P) or absorbed by the inbox as processed before (U)."""
    return {e[1] for e in read_log(log_path)[0] if e[0] in ("P", "U")}


def check(app, log_path, consumer_db, consumer_runs):
    """The verdict from the delivery log: a dict of counts, and the list of violations.

    Loss: a committed id with neither a P line nor a U line (the inbox's word that an earlier
    consumer processed it, its P line lost to a SIGKILL after the commit). Duplicates: an id
    with more than one P line. Order, from the D lines (written before the consumer's order
    guard or inbox decides): per key, the first delivery of an event after a delivery of a
    later event of its key is an order break when it is the event's first delivery by the
    broker (attempt 1); with attempt above 1 the broker had delivered it in order to a
    consumer killed before it wrote the line, and it is counted as a late redelivery."""
    committed = {r[0]: (r[1], r[2]) for r in app.query("SELECT id, key, seq FROM %s" % app.orders)}
    entries, torn = read_log(log_path)
    times, absorbed = {}, set()
    max_delivered, seen = {}, set()
    order_breaks, late_redeliveries, early_refused, dups_absorbed = 0, 0, 0, 0
    first_break = None
    for kind, biz, key, seq, _, attempt in entries:
        if kind == "P":
            times[biz] = times.get(biz, 0) + 1
        elif kind == "U":
            absorbed.add(biz)
            dups_absorbed += 1
        elif kind == "R":
            early_refused += 1
        elif biz not in seen:  # an event's first logged delivery
            seen.add(biz)
            if seq < max_delivered.get(key, 0):
                if attempt == 1:
                    order_breaks += 1
                    if first_break is None:
                        first_break = "%s seq %d after seq %d" % (key, seq, max_delivered[key])
                else:
                    late_redeliveries += 1
            max_delivered[key] = max(seq, max_delivered.get(key, 0))
    lost = [i for i in committed if i not in times and i not in absorbed]
    twice = [i for i, n in times.items() if n > 1]
    unknown = [i for i in set(times) | absorbed if i not in committed]
    in_table = {r[0] for r in query(consumer_db, "SELECT DISTINCT biz FROM received")}
    unlogged = in_table - set(times) - absorbed
    res = {
        "committed": len(committed),
        "deliveries_logged": sum(1 for e in entries if e[0] == "D"),
        "processed_once": sum(1 for n in times.values() if n == 1),
        "lost": len(lost),
        "processed_twice": len(twice),
        "unknown": len(unknown),
        "order_breaks": order_breaks,
        "late_redeliveries": late_redeliveries,
        "outbox_left": app_count(app, "SELECT count(*) FROM %s" % app.outbox),
        "dead_letters": app_count(app, "SELECT count(*) FROM %s_dead" % app.outbox),
        "duplicates_absorbed_by_inbox": dups_absorbed,
        "early_deliveries_nacked": early_refused,
        "torn_log_lines": torn,
    }
    bad = []
    if res["lost"]:
        bad.append("lost %d (first ids %s)" % (res["lost"], sorted(lost)[:10]))
    if res["processed_twice"]:
        bad.append("processed twice %d (first ids %s)" % (res["processed_twice"], sorted(twice)[:10]))
    if res["unknown"]:
        bad.append("processed but never committed %d" % res["unknown"])
    if res["order_breaks"]:
        bad.append("per-key order broken %d times (first: %s)" % (res["order_breaks"], first_break))
    if unlogged:
        bad.append("processed but missing from the delivery log: %d (first ids %s)"
                   % (len(unlogged), sorted(unlogged)[:10]))
    if torn > consumer_runs:  # each consumer process ends in a SIGKILL
        bad.append("%d torn log lines for %d consumer processes" % (torn, consumer_runs))
    if res["outbox_left"]:
        bad.append("outbox not empty: %d rows" % res["outbox_left"])
    if res["dead_letters"]:
        bad.append("dead letters: %d" % res["dead_letters"])
    return res, bad


def publish_timeouts(work):
    """Outcomes the relays' traces (relay.N.log, E lines) report as a publish timeout. With a
    per-key window above 1 each can put later events of its key ahead of it at the broker (the
    client drops the timed-out one and goes on with its partition): an order break to expect."""
    n = 0
    for name in os.listdir(work):
        if name.startswith("relay.") and name.endswith(".log"):
            with open(os.path.join(work, name), errors="replace") as f:
                n += sum(1 for line in f if line.startswith("E ") and "timed out" in line)
    return n


def wait_drained(app, log_path, events, timeout, settle=None):
    """Until the outbox is empty and the consumer processed `events` distinct ids; with
    `settle`, also returns once the outbox is empty and nothing new was processed for that many
    seconds (where losses are expected, the wait ends when progress ends, not at a guess)."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        left = app_count(app, "SELECT count(*) FROM %s" % app.outbox)
        done = len(processed_ids(log_path))
        if left == 0 and done >= events:
            return True
        if done != last:
            last, since = done, time.monotonic()
        elif settle is not None and left == 0 and time.monotonic() - since >= settle:
            return False
        time.sleep(0.2)
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--node", required=True, help="the chaos_node binary")
    ap.add_argument("--broker", choices=["nats", "kafka"], default="nats")
    ap.add_argument("--port", type=int, default=None,
                    help="the broker's (default: WEFT_NATS_PORT or 14222, WEFT_KAFKA_PORT or 19092)")
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--keys", type=int, default=None,
                    help="default 100; 20 for unbounded-window, so that the events a broker kill "
                    "loses share keys with the next batch more surely")
    ap.add_argument("--pause-ms", type=int, default=None,
                    help="between producer transactions (default: so that staging outlasts the actions)")
    ap.add_argument("--relay-kills", type=int, default=20)
    ap.add_argument("--broker-restarts", type=int, default=4)
    ap.add_argument("--broker-pauses", type=int, default=2)
    ap.add_argument("--consumer-kills", type=int, default=3)
    ap.add_argument("--crash-points", type=int, default=3, help="runs of each crash point")
    ap.add_argument("--drain-timeout", type=float, default=60)
    ap.add_argument("--seed", type=int, default=None,
                    help="of every random choice: the producer's keys and transaction sizes, the "
                    "order, instants and lengths of the actions, the crash points' counts "
                    "(default: a random one, printed)")
    ap.add_argument("--control", choices=["none", "no-inbox", "mark-done-first", "memory-storage",
                                          "unbounded-window"], default="none")
    ap.add_argument("--db", choices=["sqlite", "pg"], default="sqlite", help="the outbox's database")
    ap.add_argument("--pg-conninfo", default="host=127.0.0.1 port=%s user=postgres dbname=postgres"
                    % os.environ.get("WEFT_PG_PORT", "15432"))
    ap.add_argument("--pg-terminations", type=int, default=3, help="pg_terminate_backend of the relay")
    ap.add_argument("--window", type=int, default=1,
                    help="the relay's max_unacked_per_key (above 1 honoured on Kafka only)")
    ap.add_argument("--keep", action="store_true", help="keep the databases and logs")
    ap.add_argument("--restart-cost", type=float, default=None,
                    help="seconds a broker restart is taken to last when pacing the producer "
                    "(default: 1 for NATS, 20 for Kafka, whose JVM starts slowly: 13 to 17 s here)")
    args = ap.parse_args()
    if args.port is None:
        args.port = (int(os.environ.get("WEFT_KAFKA_PORT", "19092")) if args.broker == "kafka"
                     else int(os.environ.get("WEFT_NATS_PORT", "14222")))
    if args.restart_cost is None:
        args.restart_cost = 20.0 if args.broker == "kafka" else 1.0
    if args.keys is None:
        args.keys = 20 if args.control == "unbounded-window" else 100
    if args.control in ("memory-storage", "unbounded-window") and args.broker != "nats":
        raise SystemExit("the %s control runs on NATS" % args.control)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2**31)
    rnd = random.Random(args.seed)
    argv = [a for a in sys.argv[1:] if not a.startswith("--seed")]
    replay = " ".join(shlex.quote(a) for a in [sys.executable, os.path.abspath(__file__)] + argv
                      + ["--seed=%d" % args.seed])
    log("seed %d, %s, %s, control %s, %d events over %d keys"
        % (args.seed, args.broker, args.db, args.control, args.events, args.keys))
    log("replay: " + replay)

    work = tempfile.mkdtemp(prefix="weft-chaos-")
    app_db = os.path.join(work, "app.db")
    consumer_db = os.path.join(work, "consumer.db")
    log_path = os.path.join(work, "deliveries.log")
    topic = "chaos.%s.%d" % (args.control.replace("-", "_"), os.getpid())
    storage = "memory" if args.control == "memory-storage" else "file"
    broker = Broker(args.broker, args.port)
    broker.start()
    url = broker.url

    relay_flags = ["--fresh-ids"] if args.control == "no-inbox" and args.broker == "nats" else []
    consumer_flags = (["--no-inbox"] if args.control == "no-inbox" else []) + ["--log", log_path]
    relay_env = dict(os.environ)
    relay_env["WEFT_CHAOS_WINDOW"] = str(args.window)
    # Every message the relay hands to the broker's client and every outcome, in relay.N.log
    # (chaos_node's trace_sink): where a lost event was acknowledged, if it was.
    relay_env["WEFT_CHAOS_TRACE"] = "1"
    if args.control == "mark-done-first":
        relay_env["WEFT_OUTBOX_FAULT"] = "mark_done_first"
    if args.control == "unbounded-window":
        relay_env["WEFT_OUTBOX_FAULT"] = "unbounded_window"
    if args.pause_ms is None:
        # About a second per action (a crash run waits for its crash), a broker restart
        # restart_cost seconds, 2.5 events per transaction.
        n_actions = (args.relay_kills + args.broker_restarts * args.restart_cost + args.broker_pauses +
                     args.consumer_kills + 3 * args.crash_points +
                     (args.pg_terminations if args.db == "pg" else 0))
        if args.control == "unbounded-window":
            n_actions = args.broker_restarts * 3  # a pause of 1 s, a restart, a gap
        elif args.control != "none":
            n_actions = args.crash_points * 2
        args.pause_ms = max(2, int(1000.0 * n_actions / (args.events / 2.5)))
    # The producer holds (starts no transaction) while this file exists: see hold_producer.
    hold_file = os.path.join(work, "hold")
    producer_env = dict(os.environ, WEFT_CHAOS_HOLD=hold_file, WEFT_CHAOS_SEED=str(args.seed))
    if args.db == "pg":
        app = PgApp(args.pg_conninfo, "chaos_%d" % os.getpid())
        app.drop()
        producer = Proc("producer", [args.node, "produce-pg", args.pg_conninfo, app.prefix, str(args.events),
                                     str(args.keys), topic, str(args.pause_ms)], work, producer_env)
        relay = Proc("relay", [args.node, "relay-pg", args.pg_conninfo, app.prefix, url, topic, storage]
                     + relay_flags, work, relay_env)
    else:
        app = SqliteApp(app_db)
        producer = Proc("producer", [args.node, "produce", app_db, str(args.events), str(args.keys), topic,
                                     str(args.pause_ms)], work, producer_env)
        relay = Proc("relay", [args.node, "relay", app_db, url, topic, storage] + relay_flags, work, relay_env)
    consumer = Proc("consumer", [args.node, "consume", consumer_db, url, topic, storage] + consumer_flags, work)
    stats = {"relay_sigkills": 0, "broker_restarts": 0, "broker_pauses": 0, "consumer_kills": 0,
             "relay_backends_terminated": 0}
    crash_hits = {}

    def crash_run(point):
        """The relay restarted with a crash point armed; True when it crashed there."""
        relay.kill()
        relay.start({"WEFT_OUTBOX_CRASH_POINT": point, "WEFT_OUTBOX_CRASH_AFTER": str(rnd.randint(1, 4))})
        rc = relay.wait(15)
        if rc is None:
            relay.kill()
            relay.start()
            return False
        if rc == 86:
            crash_hits[point] = crash_hits.get(point, 0) + 1
            relay.start()
            return True
        raise RuntimeError("relay exited with %d at crash point %s (log in %s)" % (rc, point, work))

    def restart_broker_holding_producer():
        """A broker restart during which the producer stages as its pacing counted
        (args.restart_cost seconds) and then holds until the broker is back: a slow restart
        (the JVM's start on a loaded machine took 40 s here) must not use up the staging the
        actions after it need."""
        def hold():
            open(hold_file, "w").close()
            held_since[0] = time.monotonic()
        held_since = [None]
        timer = threading.Timer(args.restart_cost, hold)
        timer.start()
        try:
            broker.restart()
        finally:
            timer.cancel()
            timer.join()
            if os.path.exists(hold_file):
                os.unlink(hold_file)
            if held_since[0] is not None:
                stats["producer_held_s"] = "%.1f" % (float(stats.get("producer_held_s", 0)) +
                                                     time.monotonic() - held_since[0])

    ok = False
    t_start = time.monotonic()
    try:
        # Schema first, so relay and consumer find the tables.
        if args.control == "memory-storage":
            # Everything published and acknowledged into memory storage, then the broker
            # killed before the consumer read any of it.
            producer.start()
            relay.start()
            if producer.wait(120) != 0:
                raise RuntimeError("producer failed (log in %s)" % work)
            wait_drained(app, log_path, 0, args.drain_timeout)
            broker.restart()
            stats["broker_restarts"] += 1
            relay.kill()
            relay.start()  # makes the stream again (empty)
            consumer.start()
            wait_drained(app, log_path, args.events, args.drain_timeout, settle=3)
        elif args.control in ("no-inbox", "mark-done-first"):
            point = "after_ack" if args.control == "no-inbox" else "after_mark_done"
            consumer.start()
            producer.start()
            relay.start()
            while crash_hits.get(point, 0) < args.crash_points and producer.alive():
                crash_run(point)
            if producer.wait(120) != 0:
                raise RuntimeError("producer failed (log in %s)" % work)
            wait_drained(app, log_path, args.events, args.drain_timeout, settle=3)
            time.sleep(2)  # late redeliveries would be counted too
        elif args.control == "unbounded-window":
            # The broker stopped while the relay publishes and killed while stopped: what the
            # relay sent in that second is lost, fails at the publish timeout and is re-sent,
            # while the later events of its key went on meanwhile.
            consumer.start()
            producer.start()
            relay.start()
            for _ in range(args.broker_restarts):
                if not producer.alive():
                    break
                time.sleep(rnd.uniform(0.2, 0.6))
                broker.pause_then_restart(1.0)
                stats["broker_restarts"] += 1
                stats["broker_pauses"] += 1
            if stats["broker_restarts"] == 0:
                raise RuntimeError("the producer finished before the first broker kill: raise --pause-ms")
            if producer.wait(120) != 0:
                raise RuntimeError("producer failed (log in %s)" % work)
            wait_drained(app, log_path, args.events, args.drain_timeout, settle=3)
            time.sleep(2)
        else:
            consumer.start()
            producer.start()
            relay.start()
            actions = (["relay_kill"] * args.relay_kills + ["broker_restart"] * args.broker_restarts +
                       ["broker_pause"] * args.broker_pauses + ["consumer_kill"] * args.consumer_kills +
                       ["after_publish", "after_ack", "mid_commit"] * args.crash_points +
                       (["pg_terminate"] * args.pg_terminations if args.db == "pg" else []))
            rnd.shuffle(actions)
            pending = list(actions)
            deadline = time.monotonic() + 600
            while pending and time.monotonic() < deadline:
                a = pending.pop(0)
                if not producer.alive() and a in ("after_publish", "after_ack", "mid_commit"):
                    raise RuntimeError("the producer finished with %d actions left, a crash point "
                                       "among them: raise --pause-ms or --events" % (len(pending) + 1))
                time.sleep(rnd.uniform(0.05, 0.4))
                if a == "relay_kill":
                    relay.kill()
                    stats["relay_sigkills"] += 1
                    relay.start()
                elif a == "broker_restart":
                    restart_broker_holding_producer()
                    stats["broker_restarts"] += 1
                elif a == "broker_pause":
                    broker.pause(rnd.uniform(0.5, 1.5))
                    stats["broker_pauses"] += 1
                elif a == "pg_terminate":
                    if app.terminate_relay_backend() > 0:
                        stats["relay_backends_terminated"] += 1
                    else:
                        pending.append(a)  # the relay was between connections: later
                elif a == "consumer_kill":
                    consumer.kill()
                    stats["consumer_kills"] += 1
                    consumer.start()
                elif not crash_run(a):
                    pending.append(a)  # not reached in 15 s: try again later
                for p in (relay, consumer):
                    if not p.alive():
                        raise RuntimeError("%s exited by itself with %s (log in %s)" % (p.name, p.p.returncode, work))
            if pending:
                raise RuntimeError("actions left at the deadline: %s" % pending)
            # How long the actions took, and how long staging outlasted them (the margin
            # --pause-ms leaves; the crash points need staging to go on).
            stats["actions_s"] = "%.0f" % (time.monotonic() - t_start)
            if producer.wait(300) != 0:
                raise RuntimeError("producer failed (log in %s)" % work)
            stats["staging_s"] = "%.0f" % (time.monotonic() - t_start)
            if not wait_drained(app, log_path, args.events, args.drain_timeout):
                log("not drained within %.0f s" % args.drain_timeout)
        relay.kill()
        consumer.kill()
        res, bad = check(app, log_path, consumer_db, consumer.starts)
        res.update(stats)
        res.update({"crash_" + k: v for k, v in sorted(crash_hits.items())})
        res["relay_starts"] = relay.starts
        res["publish_timeouts"] = publish_timeouts(work)
        if res["order_breaks"] and res["publish_timeouts"] and args.window > 1:
            bad.append("%d publishes timed out: the broker was away longer than the relay's "
                       "publish timeout, which a window above 1 needs it to outlast"
                       % res["publish_timeouts"])
        res["consumer_starts"] = consumer.starts
        if broker.restart_seconds:
            res["broker_restart_s_max"] = "%.1f" % max(broker.restart_seconds)
        res["seconds"] = "%.0f" % (time.monotonic() - t_start)
        log("result " + " ".join("%s=%s" % kv for kv in res.items()))
        if args.control == "none":
            ok = not bad
            log("PASS" if ok else "FAIL: " + "; ".join(bad) + "; replay: " + replay)
        else:
            want = {"no-inbox": ("processed_twice",),
                    "unbounded-window": ("order_breaks", "lost")}.get(args.control, ("lost",))
            ok = any(res[w] > 0 for w in want)
            log("control %s: %s (%s)" % (args.control, "violation reported as expected" if ok
                                         else "NO VIOLATION SEEN: the test could not fail", "; ".join(bad)))
            if not ok:
                log("replay: " + replay)
    except Exception:
        log("replay: " + replay)
        raise
    finally:
        for p in (producer, relay, consumer):
            p.kill()
        if ok and args.db == "pg" and not args.keep:
            app.drop()
        if ok and not args.keep:
            for f in os.listdir(work):
                os.unlink(os.path.join(work, f))
            os.rmdir(work)
        else:
            log("databases and logs kept in %s" % work)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
