"""Runs a suite: systems interleaved round by round, each run measured, rows summarized."""
from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import measure, stats
from .suite import SUBJECT, Suite, System


@dataclass
class Settings:
    mode: str = "quick"
    rounds: int | None = None  # None: the suite's count for the mode
    bin_dir: Path = Path("build/release/bench")
    # weft's scenario programs built with g++ (the rows beside a peer that is built with g++)
    bin_gxx_dir: Path = Path("build/release-gxx/bench")
    peers_dir: Path = Path("build/peers")
    noise_threshold: float = 10.0  # other-CPU percent above which a run is repeated
    retries: int = 3
    command: str = ""  # the weft-bench command line, recorded in the results

    def rounds_for(self, suite: Suite) -> int:
        """The rounds of the suite's run: the most any of its scenarios has."""
        return max([self.suite_rounds(suite)]
                   + [self.scenario_rounds(suite, scn) for scn in scenarios_for(suite, self.mode)])

    def suite_rounds(self, suite: Suite) -> int:
        return self.rounds or suite.rounds[self.mode]

    def scenario_rounds(self, suite: Suite, scenario) -> int:
        """A scenario's rounds: its own for the mode when it has more, else the suite's."""
        if self.rounds or not scenario.rounds or self.mode not in scenario.rounds:
            return self.suite_rounds(suite)
        return max(self.suite_rounds(suite), scenario.rounds[self.mode])


@dataclass
class Progress:
    """One line per run on stderr: overall count, suite, round, scenario, system, figure."""
    total: int
    done: int = 0
    stream: object = field(default=sys.stderr)

    def line(self, text: str, advance: bool = True) -> None:
        self.done += advance
        width = len(str(self.total))
        print(f"[{self.done:>{width}}/{self.total}] {text}", file=self.stream, flush=True)


def expand(template: str, settings: Settings, **extra) -> str:
    return template.format(bin=settings.bin_dir, bin_gxx=settings.bin_gxx_dir,
                           peers=settings.peers_dir, **extra)


def missing_reason(system: System, settings: Settings) -> str | None:
    """Why `system` cannot run, as one line saying how to build it; None when it can."""
    programs = [expand(system.program, settings)]
    if system.server:
        programs.append(expand(system.server.command[0], settings, port=0, scenario=""))
    for program in programs:
        if not shutil.which(program):  # a path is checked as is, a bare name on PATH
            build = expand(system.build, settings)
            return f"{program} not found" + (f" — run {build}" if build else "")
    return None


def scenarios_for(suite: Suite, mode: str) -> list:
    """The suite's scenarios that run in `mode`, in order."""
    return [scn for scn in suite.scenarios if mode in scn.modes]


def server_missing(scenario, settings: Settings) -> str | None:
    """Why a scenario's replacement server cannot run ("... not built"); None when it can."""
    if not scenario.server:
        return None
    program = expand(scenario.server[0], settings, port=0, scenario=scenario.name,
                     **scenario.params_for(settings.mode))
    return None if shutil.which(program) else f"{program} not built"


def runs_on(scenario, system: System, settings: Settings) -> bool:
    return ((scenario.only is None or system.name in scenario.only)
            and server_missing(scenario, settings) is None)


def planned_runs(suite: Suite, settings: Settings) -> int:
    runnable = [s for s in suite.systems if missing_reason(s, settings) is None]
    if not any(s.name == SUBJECT for s in runnable):
        return 0
    return sum(settings.scenario_rounds(suite, scn)
               * sum(1 for s in runnable if runs_on(scn, s, settings))
               for scn in scenarios_for(suite, settings.mode))


def argv_for(system: System, scenario: str, params: dict, settings: Settings,
             port: int | None) -> list[str]:
    args = [f"{k}={v}" for k, v in params.items()]
    args += [expand(a, settings, port=port, scenario=scenario, **params) for a in system.extra]
    return [expand(system.program, settings), scenario, *args]


def server_for(system: System, scenario, params: dict, settings: Settings,
               port: int) -> tuple[list[str], dict | None]:
    """The server's argv and extra environment for one run: the system's command plus the
    scenario's server_args, or the scenario's own server command; the scenario's server_env."""
    command = scenario.server or system.server.command + scenario.server_args

    def fill(a: str) -> str:
        return expand(a, settings, port=port, scenario=scenario.name, **params)

    env = {k: fill(v) for k, v in scenario.server_env.items()}
    return [fill(a) for a in command], env or None


def run_system(system: System, scenario, params: dict, suite: Suite,
               settings: Settings, background: dict | None = None,
               retries: int | None = None, groups: dict | None = None) -> measure.Run:
    timeout = scenario.timeout or suite.timeout
    server = {}
    port = None
    if system.server:
        port = measure.free_port()
        argv, env = server_for(system, scenario, params, settings, port)
        server = {"server_argv": argv, "port": port,
                  "ready_timeout": system.server.ready_timeout, "server_env": env}
    argv = argv_for(system, scenario.name, params, settings, port)
    if background:
        server["background"] = background
        server["charged"] = next((pid for name, pid in background.items()
                                  if scenario.name.startswith(name)), None)
        server["groups"] = groups
    retries = settings.retries if retries is None else retries
    return measure.measure(argv, timeout, settings.noise_threshold, retries, **server)


def describe(run: measure.Run) -> str:
    if run.status == "unsupported":
        return "not supported (exit 2), skipped"
    if run.status == "invalid":
        return "INVALID, not counted: " + (run.error.splitlines()[-1] if run.error else "")
    if run.status == "failed":
        return "FAILED: " + run.error.splitlines()[0] if run.error else "FAILED"
    figures = ", ".join(f"{m['metric']}={stats.fmt(m['value'])} {m['unit']}".rstrip()
                        for m in run.metrics)
    noise = f"other-CPU {run.other_cpu_percent:.1f}%"
    if run.niced_cpu_percent >= 0.05:
        noise += f" ({run.niced_cpu_percent:.1f}% niced)"
    if run.noisy:
        noise = f"NOISY after {run.attempts} tr{'y' if run.attempts == 1 else 'ies'}, {noise}"
    elif run.attempts > 1:
        noise += f", {run.attempts} tries"
    return f"{figures}  ({run.wall_s:.2f} s, {noise})"


def check_systems(suite: Suite, settings: Settings, result: dict) -> list[System]:
    """The systems whose programs exist; the others are reported once, with how to build them.

    Without weft's own program the suite does not run at all (result["error"])."""
    missing = {s.name: missing_reason(s, settings) for s in suite.systems}
    if missing[SUBJECT]:
        result["error"] = f"{SUBJECT}: {missing[SUBJECT]}"
        print(f"{suite.name}: error, suite not run: {result['error']}", file=sys.stderr)
        missing = {n: why or f"suite not run ({SUBJECT} missing)" for n, why in missing.items()}
    runnable = []
    for system in suite.systems:
        reason = missing[system.name]
        if reason:
            if system.name != SUBJECT and not result.get("error"):
                print(f"{suite.name}: peer {system.name}: {reason}", file=sys.stderr, flush=True)
            result["systems"].append({"name": system.name, "status": "not run", "reason": reason})
        else:
            runnable.append(system)
            result["systems"].append({"name": system.name, "status": "ran"})
    return runnable


def rotated(systems: list, k: int) -> list:
    """The systems in round k+1's order: each round starts one system later (A B C, B C A,
    C A B, ...), so no system always runs first (after the machine idled) or right after the
    same neighbour (whose page cache, sockets in TIME_WAIT or dirty pages it inherits)."""
    if not systems:
        return systems
    k %= len(systems)
    return systems[k:] + systems[:k]


def build_flags(peers_dir: Path) -> dict:
    """What weft and each peer were built with (bench/peers/build.sh writes BUILD-FLAGS.json)."""
    try:
        return json.loads((peers_dir / "BUILD-FLAGS.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"peers": f"unknown: no readable {peers_dir / 'BUILD-FLAGS.json'}"}


def with_derived(suite: Suite, rows: list[dict]) -> list[dict]:
    """`rows` with the suite's derived rows computed afresh from the measured ones (a derived
    row already in `rows`, from a results file, is replaced: a report reads the formulas of
    the suites as they are now), each row with its metric's unit and direction."""
    rows = [r for r in rows if not r.get("derived_from")]
    for d in suite.derived:
        rows += stats.derive(d, rows)
    for row in rows:
        row.setdefault("unit", suite.metric(row["metric"]).unit)
        row["better"] = suite.metric(row["metric"]).better
    return rows


def run_suite(suite: Suite, settings: Settings, progress: Progress) -> dict:
    """Every scenario on every runnable system, interleaved round by round -> the suite's JSON."""
    started = time.monotonic()
    rounds = settings.rounds_for(suite)
    result = {
        "suite": suite.name, "title": suite.title, "mode": settings.mode, "rounds": rounds,
        "command": settings.command,
        "seed_file": suite.seed_file, "machine": measure.machine_facts(),
        "builds": build_flags(settings.peers_dir),
        "method": {"noise_threshold_percent": settings.noise_threshold,
                   "retries": settings.retries, "clock_ticks_per_s": measure.HZ},
        "systems": [], "failures": [], "invalid": [], "skipped": [], "rows": [],
    }
    runnable = check_systems(suite, settings, result)
    samples: dict[tuple[int, str, str], dict] = {}
    invalid: dict[tuple[int, str], int] = {}  # (scenario, system) -> runs marked invalid
    stopped: set[tuple[int, str]] = set()  # (scenario, system) that was unsupported or failed
    plan = [(scn, scn.params_for(settings.mode)) for scn in scenarios_for(suite, settings.mode)]
    for scn, params in plan:
        why = server_missing(scn, settings)
        if why and not result.get("error"):
            for system in runnable:
                if scn.only is None or system.name in scn.only:
                    result["skipped"].append({"scenario": scn.name, "params": params,
                                              "system": system.name, "reason": why})
            print(f"{suite.name}: {scn.name} {stats.format_params(params)}: {why}",
                  file=sys.stderr, flush=True)
    with_session = suite.session and runnable and not result.get("error")
    session = suite.session(settings.mode) if with_session else contextlib.nullcontext({})
    with session as background, measure.background_groups(background) as groups:
        if with_session:
            result["background"] = dict(background)
            result["background_cpu"] = {
                name: measure.METHOD_TEXT[measure.CGROUP_METHOD if groups.get(pid)
                                          else measure.TICKS_METHOD]
                for name, pid in background.items()}
        run_rounds(suite, settings, progress, runnable, plan, rounds, result, samples, invalid,
                   stopped, dict(background), groups)

    rows = seed_rows(suite, plan) + measured_rows(suite, plan, samples, invalid)
    rows += [seed_row(suite, d.scenario, dict(d.params), d.metric, d.seed)
             for d in suite.derived if d.seed]
    result["rows"] = with_derived(suite, rows)
    result["elapsed_s"] = round(time.monotonic() - started, 1)
    return result


@dataclass
class BusyMachine:
    """Retries are for a passing disturbance. After `streak` runs in a row stayed noisy through
    every retry, the machine is taken as busy throughout: runs are no longer repeated (each
    repeat would cost a run's time and find the same load) until one comes out quiet."""
    streak: int = 3
    noisy_in_a_row: int = 0

    def retries(self, settings: Settings) -> int:
        return 0 if self.noisy_in_a_row >= self.streak else settings.retries

    def saw(self, run: measure.Run, progress: Progress, suite: str) -> None:
        if run.status != "ok":
            return
        before = self.noisy_in_a_row
        self.noisy_in_a_row = self.noisy_in_a_row + 1 if run.noisy else 0
        if before < self.streak <= self.noisy_in_a_row:
            print(f"{suite}: {self.streak} runs in a row stayed noisy through every retry: "
                  "not repeating noisy runs until one is quiet", file=progress.stream, flush=True)
        elif before >= self.streak and not self.noisy_in_a_row:
            print(f"{suite}: a quiet run; noisy runs are repeated again", file=progress.stream,
                  flush=True)


def run_rounds(suite: Suite, settings: Settings, progress: Progress, runnable: list, plan: list,
               rounds: int, result: dict, samples: dict, invalid: dict, stopped: set,
               background: dict, groups: dict | None = None) -> None:
    """The interleaved rounds of run_suite, with the suite's background processes running."""
    busy = BusyMachine()
    for r in range(1, rounds + 1):
        for i, (scn, params) in enumerate(plan):
            if r > settings.scenario_rounds(suite, scn):
                continue
            label = f"{suite.name} round {r}/{rounds}  {scn.name} {stats.format_params(params)}"
            for system in rotated(runnable, r - 1):
                if not runs_on(scn, system, settings):
                    continue
                if (i, system.name) in stopped:
                    progress.done += 1
                    continue
                retries = busy.retries(settings)
                if scn.retries is not None:
                    retries = min(retries, scn.retries)
                run = run_system(system, scn, params, suite, settings, background, retries,
                                 groups)
                progress.line(f"{label}  {system.name}: {describe(run)}")
                busy.saw(run, progress, suite.name)
                if run.status in ("unsupported", "failed"):
                    stopped.add((i, system.name))
                if run.status == "failed":
                    result["failures"].append({"scenario": scn.name, "params": params,
                                               "system": system.name, "round": r,
                                               "error": run.error})
                elif run.status == "invalid":
                    invalid[i, system.name] = invalid.get((i, system.name), 0) + 1
                    result["invalid"].append({"scenario": scn.name, "params": params,
                                              "system": system.name, "round": r,
                                              "error": run.error, "metrics": run.metrics})
                elif run.status == "ok":
                    record(samples, i, system.name, run)


def record(samples: dict, i: int, system: str, run: measure.Run) -> None:
    for m in run.metrics:
        s = samples.setdefault((i, system, m["metric"]), {
            "unit": m["unit"], "values": [], "other_cpu_percent": [], "niced_cpu_percent": [],
            "cpu_s": [], "wall_s": [], "attempts": [], "noisy": [], "methods": set()})
        s["values"].append(m["value"])
        if "method" in m:
            s["methods"].add(m["method"])
        s["other_cpu_percent"].append(round(run.other_cpu_percent, 2))
        s["niced_cpu_percent"].append(round(run.niced_cpu_percent, 2))
        s["cpu_s"].append(round(run.cpu_s, 4))
        s["wall_s"].append(round(run.wall_s, 4))
        s["attempts"].append(run.attempts)
        s["noisy"].append(run.noisy)


def measured_rows(suite: Suite, plan: list, samples: dict,
                  invalid: dict | None = None) -> list[dict]:
    """One row per (scenario, system, metric) with valid runs; `invalid_runs` counts the runs
    of that scenario and system left out because they were invalid."""
    invalid = invalid or {}
    rows = []
    for (i, system, metric), s in samples.items():
        scn, params = plan[i]
        declared = suite.metrics.get(metric)
        printed = {"unit_printed": s["unit"]} if declared and s["unit"] != declared.unit else {}
        rows.append({
            "scenario": scn.name, "params": params, "system": system, "metric": metric,
            "unit": declared.unit if declared else s["unit"], **stats.summarize(s["values"]),
            "other_cpu_percent": s["other_cpu_percent"],
            "niced_cpu_percent": s["niced_cpu_percent"], "noisy": any(s["noisy"]),
            "noisy_runs": sum(s["noisy"]), "values": s["values"], "cpu_s": s["cpu_s"],
            "wall_s": s["wall_s"], "attempts": s["attempts"],
            "invalid_runs": invalid.get((i, system), 0), **printed,
            **cpu_method(s.get("methods")),
        })
    return rows


def cpu_method(methods: set | None) -> dict:
    """{"cpu_method": ...} for a row whose figure is a server's or broker's CPU: how it was
    read (cgroup v2 in microseconds, or /proc in ticks; both when runs differed)."""
    if not methods:
        return {}
    return {"cpu_method": " + ".join(sorted(methods))}


def seed_row(suite: Suite, scenario: str, params: dict, metric: str, seed) -> dict:
    row = {"scenario": scenario, "params": params, "system": "seed", "metric": metric,
           "unit": suite.metric(metric).unit, "value": seed.value, "runs": 0,
           "min": None, "max": None, "other_cpu_percent": [], "noisy": False,
           "seed_file": suite.seed_file, "seed_note": seed.note}
    if seed.also:
        row["seed_also"] = dict(seed.also)
    return row


def seed_rows(suite: Suite, plan: list) -> list[dict]:
    return [seed_row(suite, scn.name, params, metric, seed)
            for scn, params in plan for metric, seed in scn.seed.items()]
