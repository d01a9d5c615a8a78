"""Every shipped suite is consistent, and the harness builds the protocol's command lines."""
import ssl
import unittest
from pathlib import Path

from weftbench import http_systems, runner, stats
from weftbench.suite import SUBJECT, Scenario, System, load_suites

SUITES = load_suites(Path(__file__).resolve().parent.parent / "suites")


class SuiteFilesTest(unittest.TestCase):
    def test_coflux_is_shipped(self):
        self.assertIn("coflux", [s.name for s in SUITES])

    def test_limits_name_a_targeted_row(self):
        for suite in SUITES:
            for lim in suite.limits:
                self.assertTrue(any(lim.applies(scn.name, scn.params, lim.metric)
                                    and lim.metric in scn.targets for scn in suite.scenarios)
                                or any(lim.applies(d.scenario, d.params, d.metric) and d.target
                                       for d in suite.derived),
                                f"{suite.name}: {lim.scenario} {lim.metric}")

    def test_declarations_refer_to_known_names(self):
        for suite in SUITES:
            systems = {s.name for s in suite.systems}
            self.assertIn(SUBJECT, systems)
            scenarios = {s.name for s in suite.scenarios}
            targets = [t for s in suite.scenarios for t in s.targets.values()]
            targets += [d.target for d in suite.derived if d.target]
            for t in targets:
                self.assertLessEqual(set(t.beats), systems - {SUBJECT}, suite.name)
            for scn in suite.scenarios:
                for metric in (*scn.metrics, *scn.seed, *scn.targets):
                    self.assertIn(metric, suite.metrics, f"{suite.name}/{scn.name}")
            for d in suite.derived:
                self.assertIn(d.metric, suite.metrics)
                for i in d.inputs.values():
                    self.assertIn(i.scenario, scenarios)

    def test_a_target_compares_against_every_peer_of_its_row(self):
        for suite in SUITES:
            peers = {s.name for s in suite.systems} - {SUBJECT}
            for scn in suite.scenarios:
                row = (set(scn.only) if scn.only is not None else peers) - {SUBJECT}
                for metric, t in scn.targets.items():
                    named = set(t.beats) | {p for r in t.ratios for p in r.peers}
                    if named:
                        self.assertEqual(named, row, f"{suite.name}/{scn.name} "
                                         f"{scn.params} {metric}")
            for d in suite.derived:
                if d.target:
                    named = set(d.target.beats) | {p for r in d.target.ratios for p in r.peers}
                    self.assertIn(named, (set(), peers), f"{suite.name}/{d.scenario}")

    def test_the_echo_drop_is_judged_against_every_peer(self):
        """galay-net and galay-net-ext: weft's QPS may drop from 100 to 1,000 connections by
        at most the best peer's drop, read from the rows every system ran (galay-net's weft=g++
        variant of the echo rows is weft's too, and must not stand in for them)."""
        by_name = {s.name: s for s in SUITES}
        for name in ("galay-net", "galay-net-ext"):
            suite = by_name[name]
            drop = next(d for d in suite.derived if d.metric == "qps_drop_percent")
            self.assertEqual((drop.scenario, dict(drop.params)), ("echo", {"c": "1000 vs 100"}))
            peers = {s.name for s in suite.systems} - {SUBJECT}
            self.assertEqual([set(r.peers) for r in drop.target.ratios], [peers])
            self.assertEqual([r.factor for r in drop.target.ratios], [1.0])
            self.assertEqual(suite.metric("qps_drop_percent").better, "lower")

            def row(system, c, qps, **extra):
                return {"system": system, "scenario": "echo", "metric": "qps", "value": qps,
                        "runs": 3, "params": {"c": c, "s": 256, "d": 1, **extra}}
            rows = [row("weft", 100, 90_000), row("weft", 1000, 63_000),
                    row("weft", 100, 70_000, weft="g++"), row("weft", 1000, 70_000, weft="g++"),
                    row("tokio", 100, 60_000), row("tokio", 1000, 61_200)]
            out = {r["system"]: r for r in stats.derive(drop, rows)}
            self.assertAlmostEqual(out["weft"]["value"], 30.0, msg=name)
            self.assertAlmostEqual(out["tokio"]["value"], -2.0, msg=name)
            met, why = stats.check_target(drop.target, out["weft"]["value"],
                                          {"tokio": out["tokio"]["value"]}, "lower")
            self.assertIsNot(met, True, name)

    def test_the_seed_multiple_is_context_not_a_target(self):
        for suite in SUITES:
            for d in suite.derived:
                if d.metric == "x_seed":
                    self.assertIsNone(d.target, f"{suite.name}/{d.scenario}")

    def test_the_tls_certificate_is_made_for_the_run_and_removed_after(self):
        with http_systems.tls_certificate("quick") as background:
            self.assertEqual(background, {})  # no process to measure
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(http_systems.TLS_CERT, http_systems.TLS_KEY)  # a matching pair
        self.assertFalse(http_systems.TLS_DIR.exists())

    def test_quick_overrides(self):
        scn = Scenario("pipeline", {"C": 8, "iters": 2000}, ("m",), quick={"iters": 500})
        self.assertEqual(scn.params_for("quick"), {"C": 8, "iters": 500})
        self.assertEqual(scn.params_for("full"), {"C": 8, "iters": 2000})


class CommandLineTest(unittest.TestCase):
    settings = runner.Settings(bin_dir=Path("/b"), peers_dir=Path("/p"))

    def test_argv(self):
        system = System("go", "{peers}/go-coflux", extra=("port={port}",))
        self.assertEqual(runner.argv_for(system, "spawn", {"tasks": 10, "workers": 0},
                                         self.settings, 8080),
                         ["/p/go-coflux", "spawn", "tasks=10", "workers=0", "port=8080"])

    def test_missing_program_says_how_to_build(self):
        system = System("go", "{peers}/go-coflux", build="bash bench/peers/build.sh {peers}")
        self.assertEqual(runner.missing_reason(system, self.settings),
                         "/p/go-coflux not found — run bash bench/peers/build.sh /p")
        self.assertIsNone(runner.missing_reason(System("sh", "sh"), self.settings))


if __name__ == "__main__":
    unittest.main()
