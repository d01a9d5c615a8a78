"""The eventbus suite's tool peers (natscli, Kafka's ProducerPerformance): which rows they run
on in each mode, and their launchers' parsing of the tools' own output."""
import importlib.util
import sys
import unittest
from pathlib import Path

from weftbench import runner
from weftbench.suite import load_suites

ROOT = Path(__file__).resolve().parents[3]
TOOLS = ROOT / "bench" / "peers" / "benchtools"
EVENTBUS = next(s for s in load_suites(ROOT / "tools" / "weft-bench" / "suites")
                if s.name == "eventbus")


def load(name: str):
    sys.path.insert(0, str(TOOLS))
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def runs_of(system: str, mode: str) -> set:
    return {(scn.name, scn.params.get("messages")) for scn in runner.scenarios_for(EVENTBUS, mode)
            if scn.only is not None and system in scn.only}


class ToolPeerRowsTest(unittest.TestCase):
    def test_built_by_the_peer_script(self):
        systems = {s.name: s for s in EVENTBUS.systems}
        self.assertEqual(systems["natscli"].program, "{peers}/natscli-pub")
        self.assertEqual(systems["kafka-perf"].program, "{peers}/kafka-perf-pub")
        for name in ("natscli", "kafka-perf"):
            self.assertIn("bench/peers/build.sh", systems[name].build)

    def test_quick_mode_runs_them_on_one_extreme_row_each(self):
        self.assertEqual(runs_of("natscli", "quick"), {("nats_memory_async", 10_000)})
        self.assertEqual(runs_of("kafka-perf", "quick"), {("kafka_async", 10_000)})

    def test_full_mode_runs_them_on_every_async_row_of_their_broker(self):
        levels = {500, 2_000, 5_000, 10_000, 1_000_000}
        self.assertEqual(runs_of("natscli", "full"),
                         {(f"nats_{s}_async", n) for s in ("memory", "file") for n in levels})
        self.assertEqual(runs_of("kafka-perf", "full"), {("kafka_async", n) for n in levels})

    def test_each_row_once_per_mode(self):
        for mode in ("quick", "full"):
            plan = [(s.name, tuple(sorted(s.params.items())))
                    for s in runner.scenarios_for(EVENTBUS, mode)]
            self.assertEqual(len(plan), len(set(plan)), mode)

    def test_the_other_systems_keep_their_quick_rows(self):
        for system in ("weft", "cnats", "go"):
            self.assertIn(("nats_memory_async", 500), runs_of(system, "quick"))
        self.assertNotIn(("nats_memory_async", 500), runs_of("natscli", "quick"))
        for system in ("weft", "cnats", "go"):
            self.assertIn(("nats_file_async", 10_000), runs_of(system, "quick"))


class QuickSizesTest(unittest.TestCase):
    """Rows whose ratio depends on the run's size run their steady-state size in quick mode
    too (tools/weft-bench/README.md, "Quick sizes")."""

    def sizes(self, name: str, key: str, mode: str) -> set:
        return {scn.params_for(mode)[key] for scn in runner.scenarios_for(EVENTBUS, mode)
                if scn.name == name and scn.targets}

    def test_memory_publish_rows_at_a_million_in_both_modes(self):
        for name in ("memory_async", "memory_awaited"):
            for mode in ("quick", "full"):
                self.assertEqual(self.sizes(name, "messages", mode), {1_000_000}, (name, mode))

    def test_postgresql_outbox_at_fifty_thousand_in_both_modes(self):
        for mode in ("quick", "full"):
            self.assertEqual(self.sizes("outbox_pg", "events", mode), {50_000}, mode)


class BrokersNeededTest(unittest.TestCase):
    def test_all_three_for_the_whole_suite(self):
        needed = EVENTBUS.session.__wrapped__.__globals__["needed_brokers"]
        self.assertEqual(needed(EVENTBUS.scenarios, "quick"),
                         ("nats", "kafka", "postgres"))

    def test_only_what_the_selected_rows_use(self):
        needed = EVENTBUS.session.__wrapped__.__globals__["needed_brokers"]
        rows = [s for s in EVENTBUS.scenarios if s.name in ("kafka_async", "outbox_sqlite")]
        self.assertEqual(needed(rows, "quick"), ("kafka",))
        rows = [s for s in EVENTBUS.scenarios if s.name == "outbox_pg_nats_file"]
        self.assertEqual(needed(rows, "full"), ("nats", "postgres"))
        self.assertEqual(needed([], "full"), ())


class NatscliOutputTest(unittest.TestCase):
    natscli = load("natscli_pub")

    def test_duration_from_its_csv(self):
        text = ("#RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs,"
                "MinLatencyMicroSecs,AvgLatencyMicroSecs\n"
                "P1LSbj9E4iRx5btmir07mH,P0,20000,2200000,84063,18493987.986995,0.118958,"
                "6230.490000,11815.266800\n")
        self.assertAlmostEqual(self.natscli.duration_s(text), 0.118958)

    def test_one_publisher_row_expected(self):
        with self.assertRaises(ValueError):
            self.natscli.duration_s("#RunID,ClientID,DurationSecs\n")

    def test_stream_count_from_stream_info(self):
        self.assertEqual(self.natscli.stream_messages(
            '{"config": {"name": "s"}, "state": {"messages": 10000, "bytes": 1}}'), 10_000)

    def test_other_scenarios_are_not_supported(self):
        self.assertEqual(self.natscli.main(["natscli-pub", "kafka_async"]), 2)
        self.assertEqual(self.natscli.main(["natscli-pub", "nats_memory_awaited"]), 2)


class ProducerPerformanceOutputTest(unittest.TestCase):
    perf = load("kafka_perf_pub")

    def test_summary_line(self):
        lines = [
            "Number of messages read: 1",
            "10000 records sent, 10204.081633 records/sec (2.14 MB/sec), 48.09 ms avg "
            "latency, 571.00 ms max latency, 31 ms 50th, 180 ms 95th, 219 ms 99th, "
            "225 ms 99.9th.",
            "producer-metrics:batch-size-avg:{client-id=kafka-perf-pub} : 55000.000",
        ]
        s = self.perf.parse_summary(lines)
        self.assertEqual(s["sent"], 10_000)
        self.assertAlmostEqual(s["rate"], 10204.081633)
        self.assertAlmostEqual(s["avg_ms"], 48.09)
        self.assertEqual(s["p99_ms"], 219)

    def test_window_lines_are_not_the_summary(self):
        window = ("52377 records sent, 10475.4 records/sec (2.20 MB/sec), 40.1 ms avg "
                  "latency, 300.0 ms max latency.")
        with self.assertRaises(ValueError):
            self.perf.parse_summary([window])

    def test_batch_size_holds_the_records_weft_batches(self):
        # 256 records of 220 bytes, no key, no header: 230 bytes each, 61 of batch header
        self.assertEqual(self.perf.batch_bytes(256, 220), 61 + 256 * 230)
        self.assertEqual(self.perf.varint_len(63), 1)
        self.assertEqual(self.perf.varint_len(64), 2)

    def test_other_scenarios_are_not_supported(self):
        self.assertEqual(self.perf.main(["kafka-perf-pub", "kafka_awaited"]), 2)
        self.assertEqual(self.perf.main(["kafka-perf-pub", "nats_memory_async"]), 2)


class MarkedRunTest(unittest.TestCase):
    toolpeer = load("toolpeer")

    def test_marks_on_two_pipes_in_the_order_written(self):
        # The start mark on stderr and the end mark on stdout right after it, no gap: two
        # reader threads lost the start 3-6 times in 20 (the stdout one read RESULT first).
        script = ("import sys\n"
                  "print('setting up', flush=True)\n"
                  "print('START', file=sys.stderr, flush=True)\n"
                  "print('RESULT 42', flush=True)\n"
                  "sys.exit(5)\n")
        for _ in range(20):
            status, out, cpu = self.toolpeer.run_marked(
                [sys.executable, "-c", script], is_start=lambda ln: ln.startswith("START"),
                is_end=lambda ln: ln.startswith("RESULT"), quiet=lambda ln: True)
            self.assertEqual(status, 5)
            self.assertEqual(out, ["setting up", "RESULT 42"])
            self.assertIsNotNone(cpu)
            self.assertGreaterEqual(cpu, 0)

    def test_cpu_between_the_marks(self):
        # 200 ms of the tool's CPU between the marks (counted on its own CPU clock); each mark
        # is sampled when the round that read it ends, up to a scheduling delay after it was
        # written, so the figure may fall short by that much, never by most of it
        script = ("import sys, time\n"
                  "print('START', file=sys.stderr, flush=True)\n"
                  "t = time.process_time()\n"
                  "while time.process_time() - t < 0.2: pass\n"
                  "print('RESULT', flush=True)\n")
        _, _, cpu = self.toolpeer.run_marked(
            [sys.executable, "-c", script], is_start=lambda ln: ln.startswith("START"),
            is_end=lambda ln: ln.startswith("RESULT"), quiet=lambda ln: True)
        self.assertGreaterEqual(cpu, 100_000_000)
        self.assertLess(cpu, 1_000_000_000)

    def test_a_stderr_line_cannot_cut_a_stdout_line(self):
        # ProducerPerformance's summary is printed in pieces; the JVM logs the float formatting
        # class it loads for the summary's first %.1f on stderr between them (-Xlog:class+load).
        # One joined pipe cut the line in every run (20 of 20 at 10,000 messages).
        script = ("import sys\n"
                  "sys.stdout.write('10000 records sent, '); sys.stdout.flush()\n"
                  "print('jdk.internal.math.FormattedFloatingDecimal source: jrt:/java.base',"
                  " file=sys.stderr, flush=True)\n"
                  "print('10204.1 records/sec (2.14 MB/sec), 48.09 ms avg latency, 571.00 ms "
                  "max latency, 31 ms 50th, 180 ms 95th, 219 ms 99th, 225 ms 99.9th.',"
                  " flush=True)\n")
        perf = load("kafka_perf_pub")
        for _ in range(5):
            status, out, _ = self.toolpeer.run_marked(
                [sys.executable, "-c", script], is_start=lambda ln: False,
                is_end=lambda ln: False, quiet=lambda ln: True)
            self.assertEqual(status, 0)
            self.assertEqual(perf.parse_summary(out)["sent"], 10_000)

    def test_order_of_marks_across_streams(self):
        line, cpu = self.toolpeer.Line, self.toolpeer.marked_cpu
        start, end = (lambda t: t == "S"), (lambda t: t == "E")
        # later reads are later, whatever the stream
        self.assertEqual(cpu([line("err", "S", 1, 10), line("out", "E", 2, 25)], start, end), 15)
        # an end read before the start does not count; the next one does
        self.assertEqual(cpu([line("out", "E", 1, 5), line("err", "S", 2, 10),
                              line("out", "E", 3, 40)], start, end), 30)
        self.assertIsNone(cpu([line("out", "E", 1, 5), line("err", "S", 2, 10)], start, end))
        # read together from the two streams: the end is taken as after the start
        self.assertEqual(cpu([line("out", "E", 4, 7), line("err", "S", 4, 7)], start, end), 0)
        # read together from one stream: its own order holds
        self.assertIsNone(cpu([line("out", "E", 4, 7), line("out", "S", 4, 7)], start, end))

    def test_no_cpu_without_both_marks(self):
        status, out, cpu = self.toolpeer.run_marked(
            [sys.executable, "-c", "print('RESULT')"], is_start=lambda ln: "START" in ln,
            is_end=lambda ln: "RESULT" in ln, quiet=lambda ln: True)
        self.assertEqual((status, out, cpu), (0, ["RESULT"], None))

    def test_parameters(self):
        self.assertEqual(self.toolpeer.parse_params(["messages=10", "body=220"]),
                         {"messages": "10", "body": "220"})
        with self.assertRaises(SystemExit):
            self.toolpeer.parse_params(["messages"])


if __name__ == "__main__":
    unittest.main()
