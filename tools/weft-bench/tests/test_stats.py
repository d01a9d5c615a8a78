import unittest

from weftbench import stats
from weftbench.suite import HIGHER, LOWER, Derived, Input, Target


def row(system, scenario, params, metric, value, runs=5, noisy=False):
    return {"system": system, "scenario": scenario, "params": params, "metric": metric,
            "value": value, "runs": runs, "noisy": noisy}


class SummaryTest(unittest.TestCase):
    def test_median_min_max_runs(self):
        self.assertEqual(stats.summarize([5, 1, 3]), {"value": 3, "min": 1, "max": 5, "runs": 3})
        self.assertEqual(stats.summarize([4, 1, 3, 2])["value"], 2.5)

    def test_no_runs(self):
        self.assertEqual(stats.summarize([]), {"value": None, "min": None, "max": None, "runs": 0})


class CompareTest(unittest.TestCase):
    def test_best_follows_direction(self):
        figures = {"go": 250.0, "tokio": 60.0}
        self.assertEqual(stats.best_of(figures, LOWER), ("tokio", 60.0))
        self.assertEqual(stats.best_of(figures, HIGHER), ("go", 250.0))
        self.assertIsNone(stats.best_of({}, LOWER))

    def test_ratio(self):
        self.assertAlmostEqual(stats.ratio(30.0, 60.0), 0.5)
        self.assertIsNone(stats.ratio(None, 60.0))
        self.assertEqual(stats.ratio(0.0, 60.0), 0.0)
        self.assertIsNone(stats.ratio(30.0, 0.0))
        self.assertIsNone(stats.ratio(29.0, -1.9))  # signed figures: no multiple
        self.assertIsNone(stats.ratio(-1.9, 29.0))
        self.assertIsNone(stats.ratio(30.0, None))
        self.assertIsNone(stats.ratio(30.0, 0.0))

    def test_per_round_ratio_pairs_the_rounds(self):
        # medians 150 / 150 (1.0x) though weft was behind in two rounds of three
        weft = {"values": [100.0, 150.0, 200.0], "invalid_runs": 0}
        peer = {"values": [110.0, 160.0, 150.0], "invalid_runs": 0}
        self.assertAlmostEqual(stats.per_round_ratio(weft, peer), 150.0 / 160.0)
        self.assertIsNone(stats.per_round_ratio(weft, {"values": [1.0, 2.0]}))  # unpaired
        self.assertIsNone(stats.per_round_ratio(weft, {**peer, "invalid_runs": 1}))
        self.assertIsNone(stats.per_round_ratio({"values": [1.0]}, {"values": [2.0]}))
        self.assertIsNone(stats.per_round_ratio(weft, {"values": [1.0, 0.0, 2.0]}))
        self.assertIsNone(stats.per_round_ratio(None, peer))

    def test_better(self):
        self.assertTrue(stats.better(1, 2, LOWER))
        self.assertTrue(stats.better(2, 1, HIGHER))
        self.assertFalse(stats.better(2, 2, LOWER))


class TargetTest(unittest.TestCase):
    def test_bound_and_peers(self):
        t = Target(at_most=60, beats=("tokio", "go"))
        self.assertEqual(stats.check_target(t, 50, {"tokio": 55, "go": 250}, LOWER), (True, ""))
        met, why = stats.check_target(t, 70, {"tokio": 55, "go": 250}, LOWER)
        self.assertFalse(met)
        self.assertIn("70 > 60", why)
        self.assertIn("tokio", why)

    def test_missing_peer_is_unknown_not_met(self):
        met, why = stats.check_target(Target(beats=("tbb",)), 9, {}, LOWER)
        self.assertIsNone(met)
        self.assertIn("tbb", why)

    def test_failure_wins_over_unknown(self):
        met, _ = stats.check_target(Target(at_most=1, beats=("tbb",)), 2, {}, LOWER)
        self.assertFalse(met)

    def test_higher_is_better(self):
        t = Target(at_least=1000, beats=("go",))
        self.assertTrue(stats.check_target(t, 2000, {"go": 1500}, HIGHER)[0])
        self.assertFalse(stats.check_target(t, 1200, {"go": 1500}, HIGHER)[0])

    def test_no_figure(self):
        self.assertIsNone(stats.check_target(Target(at_most=1), None, {}, LOWER)[0])

    def test_describe(self):
        self.assertEqual(stats.describe_target(Target(at_most=60, beats=("tokio", "go")), "ns"),
                         "≤ 60 ns and beats tokio, go")
        self.assertEqual(stats.describe_target(Target(at_most=0), "allocs"), "≤ 0 allocs")


class DerivedTest(unittest.TestCase):
    handoff = Derived(
        "pipeline", {"C": 8, "D": "20 vs 5"}, "stage_handoff_ns",
        inputs={"d5": Input("pipeline", {"C": 8, "D": 5}, "ns_per_pipeline"),
                "d20": Input("pipeline", {"C": 8, "D": 20}, "ns_per_pipeline")},
        formula=lambda m: (m["d20"] - m["d5"]) / 15)

    def test_per_system_from_medians(self):
        p5 = {"C": 8, "D": 5, "iters": 500}
        p20 = {"C": 8, "D": 20, "iters": 500}
        rows = [row("weft", "pipeline", p5, "ns_per_pipeline", 1000, runs=5),
                row("weft", "pipeline", p20, "ns_per_pipeline", 2500, runs=4, noisy=True),
                row("go", "pipeline", p5, "ns_per_pipeline", 4000),
                row("go", "pipeline", p20, "ns_per_pipeline", 8500),
                row("tokio", "pipeline", p5, "ns_per_pipeline", 2000),  # no D=20: no row
                row("seed", "pipeline", p5, "ns_per_pipeline", 4670),
                row("weft", "fork", {"forks": 10}, "ns_per_fork", 8)]
        out = {r["system"]: r for r in stats.derive(self.handoff, rows)}
        self.assertEqual(sorted(out), ["go", "weft"])
        self.assertAlmostEqual(out["weft"]["value"], 100.0)
        self.assertAlmostEqual(out["go"]["value"], 300.0)
        self.assertEqual(out["weft"]["runs"], 4)
        self.assertTrue(out["weft"]["noisy"])
        self.assertFalse(out["go"]["noisy"])
        self.assertEqual(out["weft"]["params"], {"C": 8, "D": "20 vs 5"})

    def test_rounds_that_pair_give_per_round_figures(self):
        p5, p20 = {"C": 8, "D": 5}, {"C": 8, "D": 20}
        rows = [{**row("weft", "pipeline", p5, "ns_per_pipeline", 1000, runs=3),
                 "values": [1000.0, 900.0, 1100.0], "invalid_runs": 0},
                {**row("weft", "pipeline", p20, "ns_per_pipeline", 2500, runs=3),
                 "values": [2500.0, 2400.0, 3200.0], "invalid_runs": 0},
                {**row("go", "pipeline", p5, "ns_per_pipeline", 1000, runs=3),
                 "values": [1000.0, 900.0, 1100.0], "invalid_runs": 1},
                {**row("go", "pipeline", p20, "ns_per_pipeline", 2500, runs=3),
                 "values": [2500.0, 2400.0, 3200.0], "invalid_runs": 0}]
        out = {r["system"]: r for r in stats.derive(self.handoff, rows)}
        self.assertAlmostEqual(out["weft"]["value"], 100.0)  # the medians' formula
        self.assertEqual(out["weft"]["values"], [100.0, 100.0, 140.0])
        self.assertEqual((out["weft"]["min"], out["weft"]["max"]), (100.0, 140.0))
        self.assertNotIn("values", out["go"])  # a run left out: the rounds do not pair
        self.assertIsNone(out["go"]["min"])

    def test_a_derived_miss_within_the_rounds_spread_is_a_tie(self):
        """The QPS drop from 100 to 1,000 connections (galay-net-ext): weft's median drop above
        the peer's, but below it in some rounds."""
        from weftbench.suite import Ratio
        t = Target(ratios=(Ratio(("asio",), 1.0),))
        weft = {"values": [29.0, 10.0, 16.0, 20.0], "min": 10.0, "max": 29.0, "runs": 4,
                "invalid_runs": 0}
        asio = {"values": [9.0, 12.0, 8.0, 9.0], "min": 8.0, "max": 12.0, "runs": 4,
                "invalid_runs": 0}
        met, why = stats.check_target(t, 18.0, {"asio": 9.0}, LOWER, weft, {"asio": asio})
        self.assertEqual(met, stats.TIE)
        self.assertIn("not in every round", why)
        asio["values"] = [5.0, 6.0, 5.0, 4.0]  # below weft's in every round: a miss
        self.assertFalse(stats.check_target(t, 18.0, {"asio": 5.0}, LOWER, weft,
                                            {"asio": asio})[0])
        # a round where a peer gains (a negative drop): no per-round multiple, the ranges decide
        asio["values"], asio["min"] = [9.0, -2.0, 8.0, 9.0], -2.0
        self.assertEqual(stats.check_target(t, 18.0, {"asio": 8.5}, LOWER, weft,
                                            {"asio": asio})[0], stats.TIE)

    def test_params_match_as_text(self):
        self.assertTrue(stats.params_contain({"D": "5", "C": 8}, {"D": 5}))
        self.assertFalse(stats.params_contain({"D": 20}, {"D": 5}))

    def test_a_key_given_as_none_must_be_absent(self):
        self.assertTrue(stats.params_contain({"c": 100, "s": 256}, {"c": 100, "weft": None}))
        self.assertFalse(stats.params_contain({"c": 100, "weft": "g++"},
                                              {"c": 100, "weft": None}))

    def test_a_signed_figure_against_the_best_peer(self):
        """A drop in percent (galay-net's qps_drop_percent): a peer that gains has a negative
        drop, which a Ratio of 1.0 still compares, with no multiple in its reason."""
        from weftbench.suite import Ratio
        t = Target(ratios=(Ratio(("go", "tokio"), 1.0),))
        met, why = stats.check_target(t, 29.0, {"go": 24.0, "tokio": -1.9}, LOWER)
        self.assertFalse(met)
        self.assertIn("29 against tokio's -1.9, not ≤ 1x", why)
        self.assertTrue(stats.check_target(t, -3.0, {"go": 24.0, "tokio": -1.9}, LOWER)[0])
        self.assertTrue(stats.check_target(t, 20.0, {"go": 24.0, "tokio": 37.0}, LOWER)[0])


class FormatTest(unittest.TestCase):
    def test_fmt(self):
        self.assertEqual(stats.fmt(4670.4), "4,670")
        self.assertEqual(stats.fmt(12.345), "12.3")
        self.assertEqual(stats.fmt(0), "0")
        self.assertEqual(stats.fmt(None), "–")
        self.assertEqual(stats.format_params({"C": 8, "D": 5}), "C=8 D=5")



class RatioTargetTest(unittest.TestCase):
    def test_lower_is_better_at_most_factor_of_the_best(self):
        from weftbench.suite import Ratio
        t = Target(ratios=(Ratio(("asio", "hyper"), 0.8), Ratio(("go",), 0.5)))
        peers = {"asio": 6000, "hyper": 7000, "go": 14000}
        self.assertEqual(stats.check_target(t, 4800, peers, LOWER), (True, ""))
        met, why = stats.check_target(t, 5000, peers, LOWER)
        self.assertFalse(met)
        self.assertIn("0.833x asio", why)
        self.assertIn("within 0.8× of the best of asio, hyper", stats.describe_target(t, "ns"))

    def test_higher_is_better_at_least_factor(self):
        from weftbench.suite import Ratio
        t = Target(ratios=(Ratio(("minihttp",), 0.8),))
        self.assertTrue(stats.check_target(t, 800, {"minihttp": 1000}, HIGHER)[0])
        self.assertFalse(stats.check_target(t, 799, {"minihttp": 1000}, HIGHER)[0])
        self.assertIsNone(stats.check_target(t, 799, {}, HIGHER)[0])


def runs_row(values, invalid=0):
    return {"values": values, "min": min(values), "max": max(values), "runs": len(values),
            "invalid_runs": invalid}


class TieTest(unittest.TestCase):
    """A verdict the rounds' spread does not settle is a tie, neither met nor missed."""

    def test_per_round_ratios_on_both_sides_of_the_factor(self):
        from weftbench.suite import Ratio
        t = Target(ratios=(Ratio(("asio",), 1.0),))
        # medians 100 vs 102: met on the medians, but weft lost round 2 (110 vs 100)
        weft, asio = runs_row([100.0, 110.0, 90.0]), runs_row([102.0, 100.0, 104.0])
        met, why = stats.check_target(t, 100.0, {"asio": 102.0}, LOWER, weft, {"asio": asio})
        self.assertEqual(met, stats.TIE)
        self.assertIn("≤ 1x asio holds on the medians, not in every round", why)
        # without the rows the medians decide, as before
        self.assertEqual(stats.check_target(t, 100.0, {"asio": 102.0}, LOWER)[0], True)

    def test_every_round_on_one_side_decides(self):
        t = Target(beats=("go",))
        weft, go = runs_row([100.0, 110.0, 90.0]), runs_row([120.0, 130.0, 100.0])
        self.assertEqual(stats.check_target(t, 100.0, {"go": 120.0}, LOWER, weft,
                                            {"go": go}), (True, ""))
        self.assertFalse(stats.check_target(t, 120.0, {"go": 100.0}, LOWER, go,
                                            {"go": weft})[0])

    def test_a_miss_on_the_medians_within_the_spread_is_a_tie_too(self):
        t = Target(beats=("go",))
        weft, go = runs_row([1000.0, 1300.0, 900.0]), runs_row([1100.0, 1000.0, 1200.0])
        met, why = stats.check_target(t, 1000.0, {"go": 1100.0}, HIGHER, weft, {"go": go})
        self.assertEqual(met, stats.TIE)
        self.assertIn("better than go fails on the medians", why)

    def test_a_clear_miss_wins_over_a_tie(self):
        t = Target(at_most=50, beats=("go",))
        weft, go = runs_row([100.0, 110.0, 90.0]), runs_row([102.0, 100.0, 104.0])
        met, why = stats.check_target(t, 100.0, {"go": 102.0}, LOWER, weft, {"go": go})
        self.assertFalse(met)
        self.assertIn("100 > 50", why)

    def test_an_absolute_bound_inside_weft_s_runs(self):
        met, _ = stats.check_target(Target(at_most=10), 9.9, {}, LOWER,
                                    runs_row([9.9, 10.3, 9.7]))
        self.assertEqual(met, stats.TIE)
        self.assertTrue(stats.check_target(Target(at_most=10), 9.9, {}, LOWER,
                                           runs_row([9.9, 9.95, 9.7]))[0])

    def test_unpaired_rounds_fall_back_to_overlapping_ranges(self):
        t = Target(beats=("go",))
        weft = runs_row([100.0, 110.0, 90.0], invalid=1)  # rounds cannot be paired
        self.assertEqual(stats.check_target(t, 100.0, {"go": 105.0}, LOWER, weft,
                                            {"go": runs_row([105.0, 95.0, 120.0])})[0],
                         stats.TIE)
        self.assertTrue(stats.check_target(t, 100.0, {"go": 130.0}, LOWER, weft,
                                           {"go": runs_row([130.0, 125.0, 140.0])})[0])

    def test_round_ratios(self):
        self.assertEqual(stats.round_ratios(runs_row([2.0, 6.0]), runs_row([1.0, 3.0])),
                         [2.0, 2.0])
        self.assertIsNone(stats.round_ratios(runs_row([2.0]), runs_row([1.0])))


if __name__ == "__main__":
    unittest.main()
