"""weft-bench command line: pick suites, run them, write DIR/<suite>.json and DIR/index.html."""
from __future__ import annotations

import argparse
import json
import resource
import shlex
import sys
from pathlib import Path

from . import markdown, report, runner
from .suite import load_suites

SUITES_DIR = Path(__file__).resolve().parent.parent / "suites"


def parse_args(argv: list[str], names: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="weft-bench",
        description="Run the seed scenarios on weft and its peers; write JSON and an HTML report.")
    p.add_argument("--suite", action="append", choices=names, metavar="NAME",
                   help=f"suite to run, repeatable (default: all of {', '.join(names)})")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick",
                      help="fewer rounds and iterations (default)")
    mode.add_argument("--full", dest="mode", action="store_const", const="full",
                      help="the seed's full parameters, more rounds")
    p.add_argument("--out", type=Path, default=Path("results"), help="report directory")
    p.add_argument("--bin", type=Path, default=Path("build/release/bench"),
                   help="directory of weft's scenario binaries")
    p.add_argument("--bin-gxx", type=Path, default=Path("build/release-gxx/bench"),
                   help="directory of weft's scenario binaries built with g++ (weft=g++ rows)")
    p.add_argument("--peers", type=Path, default=Path("build/peers"),
                   help="directory of the peers' binaries")
    p.add_argument("--rounds", type=int, help="rounds per scenario (overrides the suite's)")
    p.add_argument("--list", action="store_true", help="list suites and scenarios, run nothing")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite DIR/index.html from the suites' JSON in DIR, run nothing")
    p.add_argument("--markdown", type=Path, metavar="FILE",
                   help="also write FILE (e.g. docs/benchmarks.md) from the suites' JSON in DIR: "
                        "one table per suite with its command, machine, date and the ratios "
                        "to each peer")
    p.add_argument("--readme", type=Path, metavar="FILE",
                   help="also rewrite the summary table between the weft-bench markers of FILE "
                        "(README.md): one line per target, weft beside the best peer")
    args = p.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        p.error("--rounds must be at least 1")
    args.mode = args.mode or "quick"
    return args


def list_suites(suites, settings: runner.Settings) -> None:
    for suite in suites:
        print(f"{suite.name}: {suite.title} ({settings.rounds_for(suite)} rounds)")
        for scn in runner.scenarios_for(suite, settings.mode):
            print(f"    {scn.name} {runner.stats.format_params(scn.params_for(settings.mode))}")
        for system in suite.systems:
            reason = runner.missing_reason(system, settings)
            print(f"    system {system.name}: " + (f"missing, {reason}" if reason else "ready"))


def main(argv: list[str] | None = None) -> int:
    suites = load_suites(SUITES_DIR)
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv, [s.name for s in suites])
    settings = runner.Settings(mode=args.mode, rounds=args.rounds, bin_dir=args.bin,
                               bin_gxx_dir=args.bin_gxx, peers_dir=args.peers,
                               command=shlex.join(["weft-bench", *argv]))
    chosen = [s for s in suites if not args.suite or s.name in args.suite]
    if args.list:
        list_suites(chosen, settings)
        return 0

    if args.report_only:
        write_reports(args, suites)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    raise_fd_limit()
    progress = runner.Progress(total=sum(runner.planned_runs(s, settings) for s in chosen))
    try:
        run_suites(chosen, settings, progress, args.out)
    except KeyboardInterrupt:
        print("weft-bench: interrupted; suites finished so far are saved", file=sys.stderr)
        return 130
    write_reports(args, suites)
    return 0


def write_reports(args: argparse.Namespace, suites) -> None:
    """DIR/index.html, and the Markdown page when asked, from every suite's JSON in DIR."""
    results = load_results(suites, args.out)
    if args.markdown:
        print(f"markdown: {markdown.write_markdown(args.markdown, suites, results)}")
    if args.readme:
        print(f"readme: {markdown.write_readme_summary(args.readme, suites, results)}")
    print(f"report: {report.write_report(args.out, suites, results)}")


def raise_fd_limit() -> None:
    """Soft RLIMIT_NOFILE up to the hard limit: the servers inherit it, and http-idle holds
    10,000 connections in every one of them (Go raises its own limit, the others do not)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def run_suites(chosen, settings: runner.Settings, progress: runner.Progress, out: Path) -> None:
    for suite in chosen:
        result = runner.run_suite(suite, settings, progress)
        path = out / f"{suite.name}.json"
        path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{suite.name}: wrote {path}", file=sys.stderr)


def load_results(suites, out: Path) -> dict[str, dict]:
    """Every suite's JSON in DIR, so that suites run separately add up in one report; its
    derived rows computed again from its measured rows (runner.with_derived)."""
    results = {}
    for suite in suites:
        path = out / f"{suite.name}.json"
        if path.exists():
            result = json.loads(path.read_text(encoding="utf-8"))
            result["rows"] = runner.with_derived(suite, result["rows"])
            results[suite.name] = result
    return results
