"""Pure functions over measured figures: summaries, comparisons, targets, derived rows."""
from __future__ import annotations

import statistics
from typing import Iterable, Mapping

from .suite import HIGHER, SUBJECT, Derived, Target


def summarize(values: list[float]) -> dict:
    """Median, min, max and count of the runs of one row."""
    if not values:
        return {"value": None, "min": None, "max": None, "runs": 0}
    return {"value": statistics.median(values), "min": min(values), "max": max(values),
            "runs": len(values)}


def median(values: list[float]) -> float:
    return statistics.median(values)


def better(a: float, b: float, direction: str) -> bool:
    """Whether figure a is strictly better than figure b."""
    return a > b if direction == HIGHER else a < b


def best_of(figures: Mapping[str, float], direction: str) -> tuple[str, float] | None:
    """The (system, figure) that is best in the metric's direction, or None when empty."""
    if not figures:
        return None
    pick = max if direction == HIGHER else min
    name = pick(figures, key=lambda k: figures[k])
    return name, figures[name]


def ratio(subject: float | None, other: float | None) -> float | None:
    """subject / other, None when either is missing or the division means nothing."""
    if subject is None or other is None or other == 0:
        return None
    return subject / other


def per_round_ratio(subject: Mapping | None, other: Mapping | None) -> float | None:
    """The median over the rounds of subject / other, from two rows' `values` (one figure per
    round, in round order), or None when the rounds cannot be paired (fewer than 2, a count
    that differs, a run left out as invalid, a zero). The systems of a round run one after
    another, so a round's figures share the machine's state (on a shared host that state
    changes between rounds, and the medians of two rows can come from different rounds)."""
    if not subject or not other:
        return None
    a, b = subject.get("values") or [], other.get("values") or []
    if len(a) < 2 or len(a) != len(b) or subject.get("invalid_runs") or other.get("invalid_runs"):
        return None
    if any(y == 0 for y in b):
        return None
    return statistics.median(x / y for x, y in zip(a, b))


def check_target(target: Target, subject: float | None, peers: Mapping[str, float],
                 direction: str) -> tuple[bool | None, str]:
    """(met, reason): met is None when a needed figure is missing."""
    if subject is None:
        return None, "weft has no figure"
    failed, unknown = [], []
    if target.at_most is not None and subject > target.at_most:
        failed.append(f"{fmt(subject)} > {fmt(target.at_most)}")
    if target.at_least is not None and subject < target.at_least:
        failed.append(f"{fmt(subject)} < {fmt(target.at_least)}")
    for peer in target.beats:
        if peer not in peers:
            unknown.append(f"{peer} has no figure")
        elif not better(subject, peers[peer], direction):
            failed.append(f"not better than {peer}")
    for r in target.ratios:
        best = best_of({p: peers[p] for p in r.peers if p in peers}, direction)
        if best is None:
            unknown.append(f"{', '.join(r.peers)}: no figure")
            continue
        limit = r.factor * best[1]
        within = subject >= limit if direction == HIGHER else subject <= limit
        if not within:
            failed.append(f"{fmt(subject)} is {subject / best[1]:.3g}x {best[0]}'s "
                          f"{fmt(best[1])}, not {'≥' if direction == HIGHER else '≤'} "
                          f"{r.factor:g}x")
    if failed:
        return False, "; ".join(failed)
    if unknown:
        return None, "; ".join(unknown)
    return True, ""


def describe_target(target: Target, unit: str) -> str:
    parts = []
    if target.at_most is not None:
        parts.append(f"≤ {fmt(target.at_most)} {unit}".rstrip())
    if target.at_least is not None:
        parts.append(f"≥ {fmt(target.at_least)} {unit}".rstrip())
    if target.beats:
        parts.append("beats " + ", ".join(target.beats))
    for r in target.ratios:
        parts.append(f"within {r.factor:g}× of the best of {', '.join(r.peers)}")
    return " and ".join(parts)


def params_contain(params: Mapping[str, object], subset: Mapping[str, object]) -> bool:
    return all(str(params.get(k)) == str(v) for k, v in subset.items())


def derive(derived: Derived, rows: Iterable[dict]) -> list[dict]:
    """One row per system that has a median for every input of `derived`.

    Noisy when any input is; runs = the fewest runs among the inputs; min/max are not
    meaningful for a formula of medians and stay None.
    """
    found: dict[str, dict[str, dict]] = {}
    for row in rows:
        if row.get("value") is None or row["system"] == "seed":
            continue
        for key, want in derived.inputs.items():
            if (row["scenario"] == want.scenario and row["metric"] == want.metric
                    and params_contain(row["params"], want.params)):
                found.setdefault(row["system"], {})[key] = row
    out = []
    for system, inputs in found.items():
        if len(inputs) != len(derived.inputs):
            continue
        value = derived.formula({k: r["value"] for k, r in inputs.items()})
        out.append({
            "scenario": derived.scenario, "params": dict(derived.params),
            "system": system, "metric": derived.metric, "value": value,
            "min": None, "max": None, "runs": min(r["runs"] for r in inputs.values()),
            "other_cpu_percent": [], "noisy": any(r.get("noisy") for r in inputs.values()),
            "derived_from": {k: r["scenario"] + " " + format_params(r["params"])
                             for k, r in inputs.items()},
        })
    return sorted(out, key=lambda r: r["system"] != SUBJECT)


def format_params(params: Mapping[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def fmt(x: float | None) -> str:
    """A figure with three significant digits, thousands grouped: 4,670 / 12.3 / 0.0421."""
    if x is None:
        return "–"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"
