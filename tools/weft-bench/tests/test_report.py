"""The report reproduces the seed's rows, compares weft with the best peer, and marks gaps."""
import dataclasses
import tempfile
import unittest
from pathlib import Path

from weftbench import report
from weftbench.suite import Limit, Metric, Scenario, Seed, Suite, System, Target

SUITE = Suite(
    "demo", "Demo suite", "001_x.txt",
    systems=(System("weft", "w"), System("go", "g"), System("tbb", "t")),
    metrics={"ns_per_task": Metric("ns")},
    scenarios=(Scenario("spawn", {"tasks": 10}, ("ns_per_task",),
                        seed={"ns_per_task": Seed(513, "~513 纳秒")},
                        targets={"ns_per_task": Target(at_most=60, beats=("go",))}),))


def measured(system, value):
    return {"scenario": "spawn", "params": {"tasks": 10}, "system": system,
            "metric": "ns_per_task", "unit": "ns", "value": value, "min": value * 0.9,
            "max": value * 1.1, "runs": 5, "other_cpu_percent": [0.0] * 5, "noisy": False}


RESULT = {
    "suite": "demo", "mode": "quick", "rounds": 5, "seed_file": "001_x.txt", "elapsed_s": 1.0,
    "machine": {"cpu_model": "test cpu", "date": "today"},
    "builds": {"asio, tbb (C++)": "g++ 12; Release (-O3 -DNDEBUG)"},
    "method": {"noise_threshold_percent": 10, "retries": 3},
    "systems": [{"name": "weft", "status": "ran"}, {"name": "go", "status": "ran"},
                {"name": "tbb", "status": "not run", "reason": "t not found — run make"}],
    "failures": [],
    "rows": [{**measured("seed", 513), "runs": 0, "min": None, "max": None,
              "seed_note": "~513 纳秒"}, measured("weft", 50), measured("go", 250)],
}


class ReportTest(unittest.TestCase):
    def test_table(self):
        with tempfile.TemporaryDirectory() as d:
            page = report.write_report(Path(d), [SUITE], {"demo": RESULT}).read_text()
            plots = list(Path(d).glob("*.png"))
        self.assertIn("~513 纳秒", page)
        self.assertIn("0.2×", page)  # weft 50 / go 250
        self.assertIn("≤ 60 ns and beats go", page)
        self.assertIn('class="yes"', page)
        self.assertIn("tbb not run: t not found — run make", page)
        self.assertIn("test cpu", page)
        self.assertIn("g++ 12; Release (-O3 -DNDEBUG)", page)  # the peers' build flags
        if plots:  # matplotlib present
            self.assertIn('<img src="demo-spawn-ns_per_task.png"', page)

    def test_the_ratio_cell_adds_the_median_of_the_per_round_ratios(self):
        paired = {**RESULT, "rows": [
            {**measured("weft", 50), "values": [40.0, 50.0, 90.0], "invalid_runs": 0},
            {**measured("go", 250), "values": [100.0, 250.0, 300.0], "invalid_runs": 0}]}
        with tempfile.TemporaryDirectory() as d:
            page = report.write_report(Path(d), [SUITE], {"demo": paired}).read_text()
            plain = report.write_report(Path(d), [SUITE], {"demo": RESULT}).read_text()
        self.assertIn("0.2×", page)  # medians: 50 / 250
        self.assertIn("per round 0.3×", page)  # rounds: 0.4, 0.2, 0.3
        self.assertNotIn("per round 0", plain)  # rows without per-round values

    def test_summary_opens_the_page_with_the_headline_rows(self):
        with tempfile.TemporaryDirectory() as d:
            page = report.write_report(Path(d), [SUITE], {"demo": RESULT}).read_text()
        summary = page[page.index('id="summary"'):page.index("<h3>Machine</h3>")]
        self.assertLess(page.index('id="summary"'), page.index('id="demo"'))
        self.assertIn('<a href="#demo">demo</a>', summary)
        self.assertIn("Targets met: 1 of 1", summary)
        self.assertIn("513", summary)  # the seed's figure
        self.assertIn("<b>50</b>", summary)  # weft's median
        self.assertIn("250<br><small>go</small>", summary)  # the best peer, named
        self.assertIn("0.2×", summary)
        self.assertIn('<div class="scroll"><table>', page)  # wide tables scroll

    def test_a_missed_target_shows_the_stated_limit(self):
        suite = dataclasses.replace(SUITE, limits=(
            Limit("spawn", "ns_per_task", "the allocator (README, Spawn)", params={"tasks": 10}),
            Limit("spawn", "ns_per_task", "never shown", params={"tasks": 99})))
        missed = {**RESULT, "rows": [RESULT["rows"][0], measured("weft", 70),
                                     measured("go", 250)]}
        with tempfile.TemporaryDirectory() as d:
            page = report.write_report(Path(d), [suite], {"demo": missed}).read_text()
            met = report.write_report(Path(d), [suite], {"demo": RESULT}).read_text()
        self.assertIn("bounded by", page)
        self.assertIn("Targets met: 0 of 1", page)
        self.assertIn("<small>the allocator (README, Spawn)</small>", page)
        self.assertNotIn("never shown", page)
        self.assertNotIn("the allocator", met)  # a target that holds shows no limit

    def test_invalid_runs_not_built_rows_and_the_seeds_other_figures(self):
        seed = {**measured("seed", 513), "runs": 0, "min": None, "max": None,
                "seed_note": "ZCO", "seed_also": {"seed's go": 39359}}
        weft = {**measured("weft", 50), "invalid_runs": 2}
        result = {**RESULT, "rows": [seed, weft],
                  "invalid": [{"scenario": "spawn", "params": {"tasks": 10}, "system": "go",
                               "round": 1, "error": "http-load: invalid run: 3 errors"}],
                  "skipped": [{"scenario": "spawn", "params": {"tasks": 10}, "system": "tbb",
                               "reason": "/b/archs not built"}]}
        with tempfile.TemporaryDirectory() as d:
            page = report.write_report(Path(d), [SUITE], {"demo": result}).read_text()
        self.assertIn("seed&#x27;s go: 39,359", page)
        self.assertIn("+2 invalid", page)
        self.assertIn("<small>invalid</small>", page)  # go: every run invalid
        self.assertIn("http-load: invalid run: 3 errors", page)
        self.assertIn("/b/archs not built", page)


    def test_a_verdict_within_the_rounds_spread_is_a_tie(self):
        # weft's median (50) beats go's (52), but go was ahead in one round of three
        tied = {**RESULT, "rows": [
            {**measured("weft", 50), "values": [50.0, 45.0, 60.0], "invalid_runs": 0},
            {**measured("go", 52), "values": [52.0, 50.0, 55.0], "invalid_runs": 0}]}
        with tempfile.TemporaryDirectory() as d:
            page = report.write_report(Path(d), [SUITE], {"demo": tied}).read_text()
        self.assertIn('<td class="tie">tie', page)
        self.assertIn("Targets met: 0 of 1</b> (0 missed, 1 tied within the rounds' spread",
                      page)


class LoadLineTest(unittest.TestCase):
    def test_other_cpu_is_weighted_by_wall_time_and_each_run_counted_once(self):
        weft = {**measured("weft", 50), "wall_s": [1.0, 3.0], "other_cpu_percent": [80.0, 0.0],
                "niced_cpu_percent": [40.0, 0.0], "noisy": True}
        go = {**measured("go", 250), "wall_s": [0.02], "other_cpu_percent": [150.0],
              "niced_cpu_percent": [0.0]}
        # a second metric of weft's runs: the same runs, not counted again
        weft2 = {**weft, "metric": "allocs"}
        line = report.load_line({**RESULT, "rows": [weft, weft2, go]})
        # (1 * 80 + 3 * 0 + 0.02 * 150) / 4.02 = 20.6 %; niced (1 * 40) / 4.02 = 10 %
        self.assertIn("used 21% of the CPU during its 3 kept runs", line)
        self.assertIn("niced 10%", line)
        self.assertIn("1 of 2 scenario × system cells have a noisy run", line)


class PlotLabelTest(unittest.TestCase):
    def test_groups_are_labelled_by_what_differs(self):
        common, labels = report.group_labels(
            ["qd=1 bs=4096 direct=0 dir=/tmp", "qd=32 bs=4096 direct=0 dir=/tmp",
             "qd=1 bs=4096 direct=1 dir=/tmp"])
        self.assertEqual(common, "bs=4096 dir=/tmp")
        self.assertEqual(labels, ["qd=1\ndirect=0", "qd=32\ndirect=0", "qd=1\ndirect=1"])

    def test_a_value_with_spaces_stays_one_param(self):
        self.assertEqual(report.split_params("C=8 D=20 vs 5"), ["C=8", "D=20 vs 5"])
        self.assertEqual(report.group_labels(["arch=B / A"]), ("", ["arch=B / A"]))

    def test_bar_labels_are_compact(self):
        self.assertEqual(report.compact(130_529), "131k")
        self.assertEqual(report.compact(1_670_000), "1.67M")
        self.assertEqual(report.compact(55.4), "55.4")

    def test_a_count_that_is_zero_everywhere_is_not_plotted(self):
        suite = Suite("z", "z", None, systems=(System("weft", "w"), System("go", "g")),
                      metrics={"errors": Metric("count"), "ns_per_task": Metric("ns")},
                      scenarios=(Scenario("spawn", {"tasks": 10}, ("ns_per_task", "errors")),))
        rows = [measured("weft", 50), measured("go", 250),
                {**measured("weft", 0), "metric": "errors", "unit": "count"},
                {**measured("go", 0), "metric": "errors", "unit": "count"}]
        with tempfile.TemporaryDirectory() as d:
            names = report.plot_suite(suite, {**RESULT, "rows": rows}, Path(d))
        if names:  # matplotlib present
            self.assertEqual(names, ["z-spawn-ns_per_task.png"])


if __name__ == "__main__":
    unittest.main()
