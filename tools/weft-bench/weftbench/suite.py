"""The declarative vocabulary a suite file uses, and the loader that finds suite files.

A suite file (suites/<name>.py) defines one module-level `SUITE = Suite(...)`: the systems to
compare, the scenarios with their parameters, which way each metric is better, the seed report's
figures and weft's targets. It holds no logic beyond the formula of a derived row.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ContextManager, Mapping

LOWER = "lower"
HIGHER = "higher"
SUBJECT = "weft"  # the system under test; every other system is a peer


@dataclass(frozen=True)
class Metric:
    unit: str
    better: str = LOWER


# The CPU rows the harness adds to every server pair's run (weftbench/measure.py, pair_metrics):
# the server's, the load client's, and their total per op, on which CPU targets are judged (on
# loopback the kernel charges TCP work to whichever side triggers it; the client is the same
# program for every server).
PAIR_CPU_ROWS = ("server_cpu_ns_per_op", "client_cpu_ns_per_op", "total_cpu_ns_per_op")
PAIR_CPU_METRICS = {name: Metric("ns") for name in PAIR_CPU_ROWS}


@dataclass(frozen=True)
class Seed:
    """A figure printed in the seed report, with the seed's own words for it.

    `also`: figures the seed printed for other systems on the same row (e.g. ZCO's report
    gives Go net/http's requests/s beside its own), shown in the seed's cell: {"go": 39359}.
    """
    value: float
    note: str = ""
    also: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Ratio:
    """weft within `factor` of the best of `peers`: at most factor x the best (lower is better,
    e.g. CPU per request <= 0.8x the best of Asio, hyper, nginx) or at least factor x the best
    (higher is better, e.g. requests/s >= 0.8x the pipelining ceiling)."""
    peers: tuple[str, ...]
    factor: float


@dataclass(frozen=True)
class Target:
    """What weft must reach on one row. Every given condition must hold."""
    at_most: float | None = None
    at_least: float | None = None
    beats: tuple[str, ...] = ()  # peers whose median weft must beat (in the metric's direction)
    ratios: tuple[Ratio, ...] = ()


@dataclass(frozen=True)
class Scenario:
    """One `PROG name key=value...` measurement. `quick` overrides params in quick mode."""
    name: str
    params: Mapping[str, object]
    metrics: tuple[str, ...]  # the rows the report shows even when nothing ran
    quick: Mapping[str, object] = field(default_factory=dict)
    seed: Mapping[str, Seed] = field(default_factory=dict)  # metric -> seed figure
    targets: Mapping[str, Target] = field(default_factory=dict)  # metric -> target
    timeout: float | None = None  # seconds per run; default Suite.timeout
    # Only these systems run it (None: all). For variants of the subject alone, such as weft's
    # epoll backend, where running the peers again would only repeat their rows.
    only: tuple[str, ...] | None = None
    # The modes that run it (a scenario left out of quick mode keeps the quick run short).
    modes: tuple[str, ...] = ("quick", "full")
    # For a server pair: arguments appended to the system's server command, environment
    # variables set for the server (templates like the command's), or a whole other server
    # command. Meant for variants of the subject (with `only`), e.g. weft's epoll backend:
    # server_env={"WEFT_IO_BACKEND": "epoll"}. A replaced server whose program is missing is
    # reported "not built" on those rows; the rest of the suite runs.
    server_args: tuple[str, ...] = ()
    server_env: Mapping[str, str] = field(default_factory=dict)
    server: tuple[str, ...] | None = None
    # Repeats of a noisy run at most (None: the harness's): 0 for rows that count (calls,
    # bytes, drift over a soak) rather than time, which a busy machine does not change.
    retries: int | None = None
    # Rounds per mode when more than the suite's (a short row whose verdict can be decided by a
    # few percent): the extra rounds run this scenario alone. `--rounds` overrides it too.
    rounds: Mapping[str, int] | None = None

    def params_for(self, mode: str) -> dict:
        return {**self.params, **(self.quick if mode == "quick" else {})}


@dataclass(frozen=True)
class Input:
    """A median a derived row reads: the row of `scenario` whose params contain `params`. A
    key given as None must be absent: {"c": 100, "weft": None} reads the row every system
    ran, not weft's variant of it that adds weft=g++."""
    scenario: str
    params: Mapping[str, object]
    metric: str


@dataclass(frozen=True)
class Derived:
    """A row computed per system from the medians of other rows (e.g. cost per extra stage)."""
    scenario: str  # label of the derived row
    params: Mapping[str, object]
    metric: str
    inputs: Mapping[str, Input]
    formula: Callable[[Mapping[str, float]], float]
    seed: Seed | None = None
    target: Target | None = None


@dataclass(frozen=True)
class Server:
    """A process the harness starts before each run of the client and stops after it.

    The harness substitutes {port} (a free TCP port it picked), {bin}, {peers}, {scenario} and
    the scenario's params in `command`, waits until the port accepts connections, and charges
    the CPU time of the server's whole session (all its processes and threads) to the run: the
    row `server_cpu_ns_per_op` = server CPU / the `ops` metric the client prints.
    """
    command: tuple[str, ...]
    ready_timeout: float = 10.0


@dataclass(frozen=True)
class System:
    """A program speaking the scenario protocol (see README). `program` may use {bin} and {peers}.

    `extra` are further key=value templates appended after the scenario's params (e.g.
    "port={port}" for the client of a server pair). `build` tells the user how to get the
    program when it is missing.
    """
    name: str
    program: str
    build: str = ""
    extra: tuple[str, ...] = ()
    server: Server | None = None


@dataclass(frozen=True)
class Limit:
    """What bounds a target that is missed (shown in the report's summary as
    "bounded by" when the target is missed): `text` states the limit and
    names its section; never a figure made up here. `params`: a subset of the row's params it
    applies to (e.g. {"k": 0}: the rows without keep-alive)."""
    scenario: str
    metric: str
    text: str
    params: Mapping[str, object] = field(default_factory=dict)

    def applies(self, scenario: str, params: Mapping, metric: str) -> bool:
        return (scenario == self.scenario and metric == self.metric
                and all(params.get(k) == v for k, v in self.params.items()))


@dataclass(frozen=True)
class Suite:
    name: str
    title: str
    seed_file: str | None
    systems: tuple[System, ...]
    metrics: Mapping[str, Metric]
    scenarios: tuple[Scenario, ...]
    derived: tuple[Derived, ...] = ()
    rounds: Mapping[str, int] = field(default_factory=lambda: {"quick": 5, "full": 10})
    timeout: float = 120.0
    notes: str = ""
    unplotted: tuple[str, ...] = ()  # metrics shown in the table only (e.g. facts of the run)
    # Processes kept running over all the suite's runs (message brokers): called with the mode,
    # returns a context manager that starts them, yields {name: pid} of those that run, and
    # stops them on exit. Their CPU during a run is not "other" CPU; a run of a scenario whose
    # name starts with one of the names gets the row `broker_cpu_s_per_m`: that process's CPU
    # seconds per million of the `ops` the program printed.
    session: Callable[[str], ContextManager[Mapping[str, int]]] | None = None
    limits: tuple[Limit, ...] = ()  # the stated limits of missed targets (Limit)

    def metric(self, name: str) -> Metric:
        """Declared metric, or a lower-is-better one of unknown unit for anything undeclared."""
        return self.metrics.get(name) or Metric(unit="", better=LOWER)


def load_suites(directory: Path) -> list[Suite]:
    """Every suites/*.py defining SUITE, in seed-report order (suites without a seed last)."""
    suites = []
    for path in sorted(directory.glob("*.py")):
        if path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"weftbench_suite_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        suite = getattr(module, "SUITE", None)
        if not isinstance(suite, Suite):
            raise ValueError(f"{path}: defines no SUITE = Suite(...)")
        if not any(s.name == SUBJECT for s in suite.systems):
            raise ValueError(f"{path}: suite {suite.name} has no system named {SUBJECT!r}")
        suites.append(suite)
    return sorted(suites, key=lambda s: (s.seed_file is None, s.seed_file or "", s.name))
