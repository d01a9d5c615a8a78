import unittest

from weftbench.runner import rotated


class RotationTest(unittest.TestCase):
    def test_each_system_leads_one_round_in_turn(self):
        systems = ["weft", "go", "tokio"]
        orders = [rotated(systems, k) for k in range(4)]
        self.assertEqual(orders[0], ["weft", "go", "tokio"])
        self.assertEqual(orders[1], ["go", "tokio", "weft"])
        self.assertEqual(orders[2], ["tokio", "weft", "go"])
        self.assertEqual(orders[3], orders[0])
        self.assertEqual([o[0] for o in orders[:3]], systems)

    def test_every_round_runs_every_system_once(self):
        systems = ["a", "b"]
        for k in range(5):
            self.assertEqual(sorted(rotated(systems, k)), systems)
        self.assertEqual(rotated([], 3), [])


if __name__ == "__main__":
    unittest.main()


class BusyMachineTest(unittest.TestCase):
    def test_retries_stop_after_a_streak_of_noisy_runs_and_resume_after_a_quiet_one(self):
        import io
        from weftbench import measure, runner
        settings = runner.Settings(retries=3)
        progress = runner.Progress(total=1, stream=io.StringIO())
        busy = runner.BusyMachine(streak=3)
        noisy, quiet = measure.Run("ok", noisy=True), measure.Run("ok")
        given = []
        for run in [noisy, noisy, measure.Run("failed"), noisy, noisy, quiet, noisy]:
            given.append(busy.retries(settings))
            busy.saw(run, progress, "s")
        # a failed run neither extends nor breaks the streak
        self.assertEqual(given, [3, 3, 3, 3, 0, 0, 3])
        self.assertIn("not repeating noisy runs", progress.stream.getvalue())
        self.assertIn("repeated again", progress.stream.getvalue())


class ScenarioRetriesTest(unittest.TestCase):
    def test_a_counting_row_is_never_repeated(self):
        import io
        from unittest import mock
        from weftbench import measure, runner
        from weftbench.suite import Metric, Scenario, Suite, System
        suite = Suite("t", "t", None, (System("weft", "/bin/true"),), {"m": Metric("x")},
                      (Scenario("timed", {}, ("m",)), Scenario("counted", {}, ("m",), retries=0)),
                      rounds={"quick": 1, "full": 1})
        given = {}

        def fake(argv, timeout, threshold, retries, **server):
            given[argv[1]] = retries
            return measure.Run("ok", metrics=[{"metric": "m", "unit": "x", "value": 1.0}])

        settings = runner.Settings(retries=3)
        with mock.patch.object(runner.measure, "measure", fake):
            runner.run_suite(suite, settings, runner.Progress(total=2, stream=io.StringIO()))
        self.assertEqual(given, {"timed": 3, "counted": 0})


class ScenarioRoundsTest(unittest.TestCase):
    def test_a_short_row_runs_more_rounds_than_the_suite(self):
        import io
        from unittest import mock
        from weftbench import measure, runner
        from weftbench.suite import Metric, Scenario, Suite, System
        suite = Suite("t", "t", None, (System("weft", "/bin/true"), System("go", "/bin/true")),
                      {"m": Metric("x")},
                      (Scenario("long", {}, ("m",)),
                       Scenario("short", {}, ("m",), rounds={"quick": 5})),
                      rounds={"quick": 2, "full": 2})
        runs = []

        def fake(argv, timeout, threshold, retries, **server):
            runs.append(argv[1])
            return measure.Run("ok", metrics=[{"metric": "m", "unit": "x", "value": 1.0}])

        settings = runner.Settings(retries=0, command="weft-bench --suite t")
        self.assertEqual(runner.planned_runs(suite, settings), 2 * 2 + 5 * 2)
        with mock.patch.object(runner.measure, "measure", fake):
            result = runner.run_suite(suite, settings,
                                      runner.Progress(total=14, stream=io.StringIO()))
        self.assertEqual(runs.count("long"), 4)
        self.assertEqual(runs.count("short"), 10)
        self.assertEqual(result["rounds"], 5)
        self.assertEqual(result["command"], "weft-bench --suite t")  # for the Markdown page
        short = next(r for r in result["rows"] if r["scenario"] == "short")
        self.assertEqual(short["runs"], 5)
        # --rounds overrides every scenario's
        self.assertEqual(runner.planned_runs(suite, runner.Settings(rounds=1)), 4)


class BuildFlagsTest(unittest.TestCase):
    def test_read_from_the_peers_dir_or_said_unknown(self):
        import json
        import tempfile
        from pathlib import Path
        from weftbench import runner
        with tempfile.TemporaryDirectory() as d:
            self.assertIn("unknown", runner.build_flags(Path(d))["peers"])
            (Path(d) / "BUILD-FLAGS.json").write_text(json.dumps({"go": "go1.26"}))
            self.assertEqual(runner.build_flags(Path(d)), {"go": "go1.26"})


class HttpSuiteFeaturesTest(unittest.TestCase):
    """Invalid runs, scenarios per mode, server variants and replaced servers."""

    def setUp(self):
        import io
        import tempfile
        from pathlib import Path
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        self.progress_stream = io.StringIO()

    def tearDown(self):
        self.tmp.cleanup()

    def program(self, body: str) -> str:
        path = self.dir / "prog"
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
        return str(path)

    def run_suite(self, suite, mode="quick"):
        from weftbench import runner
        # no retries: a noisy machine must not run the counting program twice in a round
        settings = runner.Settings(mode=mode, bin_dir=self.dir, peers_dir=self.dir,
                                   noise_threshold=1000.0, retries=0)
        progress = runner.Progress(total=runner.planned_runs(suite, settings),
                                   stream=self.progress_stream)
        return runner.run_suite(suite, settings, progress)

    def test_invalid_runs_are_left_out_and_the_next_rounds_run(self):
        from weftbench.suite import Metric, Scenario, Suite, System
        # rounds 1 and 3 are clean (value 10, 30), round 2 saw errors (exit 3, value 999)
        counter = self.dir / "n"
        prog = self.program(
            f'n=$(( $(cat {counter} 2>/dev/null || echo 0) + 1 )); echo $n > {counter}\n'
            'if [ $n -eq 2 ]; then echo \'{"metric": "m", "unit": "x", "value": 999}\'; '
            'echo "2 errors" >&2; exit 3; fi\n'
            'echo "{\\"metric\\": \\"m\\", \\"unit\\": \\"x\\", \\"value\\": ${n}0}"\n')
        suite = Suite("t", "t", None, (System("weft", prog),), {"m": Metric("x")},
                      (Scenario("s", {}, ("m",)),), rounds={"quick": 3, "full": 3})
        result = self.run_suite(suite)
        row = next(r for r in result["rows"] if r["metric"] == "m")
        self.assertEqual(row["values"], [10.0, 30.0])
        self.assertEqual(row["invalid_runs"], 1)
        self.assertEqual(result["failures"], [])
        self.assertEqual([(i["round"], i["error"]) for i in result["invalid"]], [(2, "2 errors")])
        self.assertIn("INVALID", self.progress_stream.getvalue())

    def test_scenarios_run_only_in_their_modes(self):
        from weftbench import runner
        from weftbench.suite import Metric, Scenario, Suite, System
        suite = Suite("t", "t", None, (System("weft", "sh"),), {"m": Metric("x")},
                      (Scenario("both", {}, ("m",)),
                       Scenario("full_only", {}, ("m",), modes=("full",))))
        self.assertEqual([s.name for s in runner.scenarios_for(suite, "quick")], ["both"])
        self.assertEqual([s.name for s in runner.scenarios_for(suite, "full")],
                         ["both", "full_only"])

    def test_server_variants(self):
        from pathlib import Path
        from weftbench import runner
        from weftbench.suite import Scenario, Server, System
        system = System("weft", "client", server=Server(("{bin}/srv", "--port", "{port}")))
        settings = runner.Settings(bin_dir=Path("/b"))
        plain = Scenario("wrk", {"c": 1}, ())
        variant = Scenario("wrk", {"c": 1}, (), server_args=("--per-core",),
                           server_env={"WEFT_IO_BACKEND": "epoll"})
        other = Scenario("wrk", {"arch": "B"}, (), server=("{bin}/archs", "--arch", "{arch}",
                                                           "--port", "{port}"))
        self.assertEqual(runner.server_for(system, plain, {"c": 1}, settings, 9),
                         (["/b/srv", "--port", "9"], None))
        self.assertEqual(runner.server_for(system, variant, {"c": 1}, settings, 9),
                         (["/b/srv", "--port", "9", "--per-core"], {"WEFT_IO_BACKEND": "epoll"}))
        self.assertEqual(runner.server_for(system, other, {"arch": "B"}, settings, 9),
                         (["/b/archs", "--arch", "B", "--port", "9"], None))

    def test_a_replaced_server_not_built_skips_its_rows_only(self):
        from weftbench.suite import Metric, Scenario, Server, Suite, System
        prog = self.program('echo \'{"metric": "m", "unit": "x", "value": 1}\'\n')
        # the server pair's client needs a server: use a plain system for the runnable row and
        # check that the replaced one is reported, not failed
        suite = Suite("t", "t", None, (System("weft", prog, server=None),),
                      {"m": Metric("x")},
                      (Scenario("s", {}, ("m",)),
                       Scenario("s", {"arch": "A"}, ("m",), server=("{bin}/missing",))),
                      rounds={"quick": 1, "full": 1})
        result = self.run_suite(suite)
        self.assertEqual(result["failures"], [])
        self.assertEqual([(s["params"], s["reason"]) for s in result["skipped"]],
                         [({"arch": "A"}, f"{self.dir}/missing not built")])
        self.assertEqual([r["params"] for r in result["rows"]], [{}])


class SessionTest(unittest.TestCase):
    """A suite's background processes (brokers) run over all its runs; their CPU is charged to
    the scenarios named after them, and they are stopped afterwards."""

    setUp = HttpSuiteFeaturesTest.setUp
    tearDown = HttpSuiteFeaturesTest.tearDown
    program = HttpSuiteFeaturesTest.program
    run_suite = HttpSuiteFeaturesTest.run_suite

    def test_background_cpu_is_charged_to_its_scenarios_and_the_session_ends(self):
        import contextlib
        import subprocess
        import sys
        from weftbench.suite import Metric, Scenario, Suite, System
        events = []

        @contextlib.contextmanager
        def session(mode):
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            events.append(("start", mode))
            try:
                yield {"bus": busy.pid}
            finally:
                busy.kill()
                busy.wait()
                events.append(("stop", busy.pid))

        prog = self.program('sleep 0.5\n'
                            'echo \'{"metric": "m", "unit": "x", "value": 1}\'\n'
                            'echo \'{"metric": "ops", "unit": "", "value": 1000}\'\n')
        suite = Suite("t", "t", None, (System("weft", prog),), {"m": Metric("x")},
                      (Scenario("bus_pub", {}, ("m",)), Scenario("memory_pub", {}, ("m",))),
                      rounds={"quick": 1, "full": 1}, session=session)
        result = self.run_suite(suite)
        pid = result["background"]["bus"]
        self.assertEqual(events, [("start", "quick"), ("stop", pid)])
        charged = {r["scenario"]: r["value"] for r in result["rows"]
                   if r["metric"] == "broker_cpu_s_per_m"}
        self.assertEqual(list(charged), ["bus_pub"])  # memory_pub names no background process
        self.assertGreater(charged["bus_pub"], 0)

    def test_no_session_no_background_key(self):
        from weftbench.suite import Metric, Scenario, Suite, System
        prog = self.program('echo \'{"metric": "m", "unit": "x", "value": 1}\'\n')
        suite = Suite("t", "t", None, (System("weft", prog),), {"m": Metric("x")},
                      (Scenario("s", {}, ("m",)),), rounds={"quick": 1, "full": 1})
        self.assertNotIn("background", self.run_suite(suite))
