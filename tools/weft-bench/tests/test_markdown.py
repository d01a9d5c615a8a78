"""weft-bench --markdown: the results' page, one table per suite, written from the JSON."""
import contextlib
import io
import json
import tempfile
import unittest
from pathlib import Path

from weftbench import cli, markdown
from weftbench.suite import Limit, Metric, Scenario, Seed, Suite, System, Target

SUITE = Suite(
    "demo", "Demo suite", "001_x.txt",
    systems=(System("weft", "w"), System("go", "g"), System("tbb", "t")),
    metrics={"ns_per_task": Metric("ns"), "bytes": Metric("B")},
    scenarios=(Scenario("spawn", {"tasks": 10}, ("ns_per_task", "bytes"),
                        seed={"ns_per_task": Seed(513, "~513 ns")},
                        targets={"ns_per_task": Target(beats=("go", "tbb"))}),))


def measured(system, value, values):
    return {"scenario": "spawn", "params": {"tasks": 10}, "system": system,
            "metric": "ns_per_task", "unit": "ns", "value": value, "min": min(values),
            "max": max(values), "runs": len(values), "values": values, "invalid_runs": 0}


RESULT = {
    "suite": "demo", "mode": "quick", "rounds": 3, "elapsed_s": 12.5,
    "command": "weft-bench --quick --suite demo",
    "machine": {"cpu_model": "Test CPU", "cores": 2, "memory": "4.0 GiB", "kernel": "6.1",
                "os": "Debian 12", "date": "2026-01-02T03:04:05+00:00"},
    "systems": [], "failures": [],
    "rows": [{**measured("seed", 513, [513]), "runs": 0, "min": None, "max": None,
              "values": []},
             measured("weft", 50.0, [40.0, 50.0, 90.0]),
             measured("go", 250.0, [100.0, 250.0, 300.0]),
             measured("tbb", 60.0, [30.0, 60.0, 100.0]),
             {**measured("weft", 7.0, [7.0, 7.0, 7.0]), "metric": "bytes", "unit": "B"}],
}


class MarkdownTest(unittest.TestCase):
    def page(self, result=RESULT) -> str:
        with tempfile.TemporaryDirectory() as d:
            return markdown.write_markdown(Path(d) / "docs" / "benchmarks.md", [SUITE],
                                           {"demo": result}).read_text()

    def test_one_table_per_suite_with_command_machine_and_date(self):
        page = self.page()
        self.assertIn("## demo: Demo suite", page)
        self.assertIn("- Command: `weft-bench --quick --suite demo`", page)
        self.assertIn("Test CPU, 2 cores, 4.0 GiB, 6.1, Debian 12", page)
        self.assertIn("run 2026-01-02T03:04:05+00:00", page)
        self.assertIn("| scenario | params | metric | seed | weft | go | tbb | target | met |",
                      page)
        self.assertIn("do not edit by hand", page)

    def test_every_peer_with_weft_s_ratio_to_it(self):
        page = self.page()
        row = next(line for line in page.splitlines() if line.startswith("| spawn "))
        self.assertIn("| 513 | **50** |", row)
        # go: 50 / 250 = 0.2x; per round 0.4, 0.2, 0.3 -> 0.3x
        self.assertIn("250 (0.2×; per round 0.3×)", row)
        # tbb: 50 / 60; per round 1.33, 0.833, 0.9 -> 0.9x; tbb won round 1: a tie
        self.assertIn("60 (0.833×; per round 0.9×)", row)
        self.assertTrue(row.endswith("| beats go, tbb | tie |"), row)

    def test_only_headline_rows_and_a_suite_not_run(self):
        self.assertNotIn("| bytes", self.page())  # no target, no seed figure
        page = self.page({**RESULT, "error": "weft: w not found"})
        self.assertIn("Not run: weft: w not found", page)

    def test_the_command_writes_the_page_from_the_json(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "results"
            out.mkdir()
            result = {**RESULT, "suite": "coflux", "rows": []}
            (out / "coflux.json").write_text(json.dumps(result))
            target = Path(d) / "docs" / "benchmarks.md"
            with contextlib.redirect_stdout(io.StringIO()) as said:
                status = cli.main(["--report-only", "--out", str(out), "--markdown",
                                   str(target)])
            self.assertEqual(status, 0)
            self.assertIn("## coflux:", target.read_text())
            self.assertTrue(said.getvalue().rstrip().splitlines()[-1].startswith("report: "))

    def test_a_missed_target_shows_its_stated_limit_under_the_table(self):
        limited = Suite(SUITE.name, SUITE.title, SUITE.seed_file, systems=SUITE.systems,
                        metrics=SUITE.metrics, scenarios=SUITE.scenarios,
                        limits=(Limit("spawn", "ns_per_task", "the allocator: 400 ns"),))
        slow = {**RESULT, "rows": [measured("weft", 500.0, [500.0, 500.0, 500.0]),
                                   *RESULT["rows"][2:4]]}
        with tempfile.TemporaryDirectory() as d:
            missed = markdown.write_markdown(Path(d) / "a.md", [limited], {"demo": slow})
            tied = markdown.write_markdown(Path(d) / "b.md", [limited], {"demo": RESULT})
            missed, tied = missed.read_text(), tied.read_text()
        self.assertIn("- spawn `tasks=10` ns_per_task: the allocator: 400 ns", missed)
        self.assertNotIn("the allocator", tied)  # a tie is not a miss

    def test_a_suite_not_run_keeps_its_section_and_the_run_one_is_replaced(self):
        other = Suite("other", "Other suite", None, systems=SUITE.systems,
                      metrics=SUITE.metrics, scenarios=SUITE.scenarios)
        faster = {**RESULT, "rows": [measured("weft", 41.0, [41.0, 41.0, 41.0])]}
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "benchmarks.md"
            markdown.write_markdown(path, [SUITE, other],
                                    {"demo": RESULT, "other": {**RESULT, "suite": "other"}})
            first = path.read_text()
            markdown.write_markdown(path, [SUITE, other], {"demo": faster})
            second = path.read_text()
        self.assertEqual(first.split("## other:")[1], second.split("## other:")[1])
        self.assertLess(second.index("## demo:"), second.index("## other:"))
        self.assertIn("**41**", second.split("## other:")[0])
        self.assertNotIn("**50**", second.split("## other:")[0])


class ReadmeSummaryTest(unittest.TestCase):
    def test_one_line_per_target_between_the_markers_only(self):
        with tempfile.TemporaryDirectory() as d:
            readme = Path(d) / "README.md"
            readme.write_text("# weft\nbefore\n" + markdown.README_BEGIN + "\nold table\n"
                              + markdown.README_END + "\nafter\n")
            markdown.write_readme_summary(readme, [SUITE], {"demo": RESULT})
            text = readme.read_text()
        self.assertTrue(text.startswith("# weft\nbefore\n"))
        self.assertTrue(text.endswith(markdown.README_END + "\nafter\n"))
        self.assertNotIn("old table", text)
        lines = [line for line in text.splitlines() if line.startswith("| demo:")]
        # the best peer of the row is tbb (60 ns: lower is better), not go; tbb won a round
        self.assertEqual(lines, ["| demo: spawn `tasks=10`, ns_per_task (ns, lower is better) | "
                                 "50 | tbb 60 | 0.833× | beats go, tbb | tie |"])

    def test_a_suite_not_run_keeps_its_lines(self):
        other = Suite("other", "Other suite", None, systems=SUITE.systems,
                      metrics=SUITE.metrics, scenarios=SUITE.scenarios)
        with tempfile.TemporaryDirectory() as d:
            readme = Path(d) / "README.md"
            readme.write_text(markdown.README_BEGIN + "\n" + markdown.README_END + "\n")
            both = {"demo": RESULT, "other": {**RESULT, "suite": "other"}}
            markdown.write_readme_summary(readme, [SUITE, other], both)
            first = readme.read_text()
            markdown.write_readme_summary(readme, [SUITE, other], {"other": both["other"]})
            second = readme.read_text()
        self.assertEqual(first, second)
        self.assertEqual(len([x for x in second.splitlines() if x.startswith("| demo:")]), 1)
        self.assertEqual(len([x for x in second.splitlines() if x.startswith("| other:")]), 1)

    def test_a_readme_without_markers_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            readme = Path(d) / "README.md"
            readme.write_text("# weft\n")
            with self.assertRaises(ValueError):
                markdown.write_readme_summary(readme, [SUITE], {"demo": RESULT})


if __name__ == "__main__":
    unittest.main()
