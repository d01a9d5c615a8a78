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
    """subject / other, None when either is missing or the division means nothing: a zero or
    negative divisor, or a negative subject (a derived row's signed figure, such as a drop
    that is a gain for one system: 29 % against -2 % is no multiple)."""
    if subject is None or other is None or other <= 0 or subject < 0:
        return None
    return subject / other


def round_ratios(subject: Mapping | None, other: Mapping | None) -> list[float] | None:
    """subject / other within each round, from two rows' `values` (one figure per round, in
    round order), or None when the rounds cannot be paired (fewer than 2, a count that
    differs, a run left out as invalid, a zero). The systems of a round run one after
    another, so a round's figures share the machine's state (on a shared host that state
    changes between rounds, and the medians of two rows can come from different rounds)."""
    if not subject or not other:
        return None
    a, b = subject.get("values") or [], other.get("values") or []
    if len(a) < 2 or len(a) != len(b) or subject.get("invalid_runs") or other.get("invalid_runs"):
        return None
    if any(y <= 0 for y in b) or any(x < 0 for x in a):  # signed figures: no multiple (ratio)
        return None
    return [x / y for x, y in zip(a, b)]


def per_round_ratio(subject: Mapping | None, other: Mapping | None) -> float | None:
    """The median over the rounds of subject / other (round_ratios), or None when the rounds
    cannot be paired."""
    ratios = round_ratios(subject, other)
    return statistics.median(ratios) if ratios else None


def spread(row: Mapping | None) -> tuple[float, float] | None:
    """(min, max) of a row's runs, None for a row of one run or none (a derived row)."""
    if not row or row.get("min") is None or row.get("max") is None or row.get("runs", 0) < 2:
        return None
    return row["min"], row["max"]


def straddles(values: Iterable[float], holds) -> bool:
    """Whether some of `values` satisfy `holds` and some do not."""
    seen = {bool(holds(v)) for v in values}
    return len(seen) == 2


def within_spread(subject_row: Mapping | None, other_row: Mapping | None, factor: float,
                  holds) -> bool | None:
    """Whether the condition `holds(subject / (factor x other))` is decided by the rounds'
    spread rather than by the systems: the per-round ratios fall on both sides of `factor`, or
    (rounds that cannot be paired) the two rows' min-max ranges overlap once the other's is
    scaled by `factor`. None when neither can be read (no per-run figures)."""
    ratios = round_ratios(subject_row, other_row)
    if ratios is not None:
        return straddles((r / factor for r in ratios), holds)
    a, b = spread(subject_row), spread(other_row)
    if a is None or b is None:
        return None
    return a[0] <= factor * b[1] and factor * b[0] <= a[1]


TIE = "tie"  # a verdict the rounds' spread cannot decide (check_target)


def check_target(target: Target, subject: float | None, peers: Mapping[str, float],
                 direction: str, subject_row: Mapping | None = None,
                 peer_rows: Mapping[str, Mapping] | None = None) -> tuple[bool | str | None, str]:
    """(met, reason): met is True, False, TIE or None (a needed figure is missing).

    Each condition is judged on the medians. With the rows (`subject_row`, `peer_rows`: their
    per-run `values`, min, max) a condition whose answer the rounds' spread does not settle is
    a tie: weft's runs on both sides of an absolute bound, or the per-round ratios to a peer on
    both sides of the factor (rounds that cannot be paired: the two ranges overlapping). A
    clear miss of any condition makes the target missed; else a tie of any makes it a tie."""
    if subject is None:
        return None, "weft has no figure"
    peer_rows = peer_rows or {}
    failed, unknown, ties = [], [], []
    lower = direction != HIGHER

    def judge(ok: bool, miss: str, what: str, tied: bool | None) -> None:
        if tied:
            ties.append(f"{what} {'holds' if ok else 'fails'} on the medians, not in every "
                        "round")
        elif not ok:
            failed.append(miss)

    values = (subject_row or {}).get("values") or []
    runs = values if len(values) >= 2 and not (subject_row or {}).get("invalid_runs") else []
    if not runs and spread(subject_row):
        runs = list(spread(subject_row))
    if target.at_most is not None:
        judge(subject <= target.at_most, f"{fmt(subject)} > {fmt(target.at_most)}",
              f"≤ {fmt(target.at_most)}", straddles(runs, lambda v: v <= target.at_most))
    if target.at_least is not None:
        judge(subject >= target.at_least, f"{fmt(subject)} < {fmt(target.at_least)}",
              f"≥ {fmt(target.at_least)}", straddles(runs, lambda v: v >= target.at_least))
    for peer in target.beats:
        if peer not in peers:
            unknown.append(f"{peer} has no figure")
            continue
        tied = within_spread(subject_row, peer_rows.get(peer), 1.0,
                             lambda x: x < 1.0 if lower else x > 1.0)
        judge(better(subject, peers[peer], direction), f"not better than {peer}",
              f"better than {peer}", tied)
    for r in target.ratios:
        best = best_of({p: peers[p] for p in r.peers if p in peers}, direction)
        if best is None:
            unknown.append(f"{', '.join(r.peers)}: no figure")
            continue
        limit = r.factor * best[1]
        within = subject <= limit if lower else subject >= limit
        sign = "≤" if lower else "≥"
        tied = within_spread(subject_row, peer_rows.get(best[0]), r.factor,
                             lambda x: x <= 1.0 if lower else x >= 1.0)
        times = ratio(subject, best[1])
        judge(within, (f"{fmt(subject)} is {times:.3g}x {best[0]}'s " if times is not None
                       else f"{fmt(subject)} against {best[0]}'s ") +
              f"{fmt(best[1])}, not {sign} {r.factor:g}x",
              f"{sign} {r.factor:g}x {best[0]}", tied)
    if failed:
        return False, "; ".join(failed)
    if ties:
        return TIE, "within the rounds' spread: " + "; ".join(ties)
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
    """Whether `params` has every key of `subset` with the same value, compared as text; a key
    whose value is None must be absent (the main row, not a variant that adds the key)."""
    return all(k not in params if v is None else str(params.get(k)) == str(v)
               for k, v in subset.items())


def derive(derived: Derived, rows: Iterable[dict]) -> list[dict]:
    """One row per system that has a median for every input of `derived`.

    `value` is the formula over the inputs' medians. When the inputs' rounds pair (as many
    valid runs each, at least 2: the rounds of one suite run), `values` is the formula within
    each round and min/max their range, so a verdict on the row sees the rounds' spread as
    any measured row's does (a drop from 100 to 1,000 connections is decided round by round,
    not by two medians that may come from different rounds). Else min/max stay None.
    Noisy when any input is; runs = the fewest runs among the inputs.
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
        rounds = derived_rounds(derived, inputs)
        out.append({
            "scenario": derived.scenario, "params": dict(derived.params),
            "system": system, "metric": derived.metric, "value": value,
            **({"values": rounds, "min": min(rounds), "max": max(rounds), "invalid_runs": 0}
               if rounds else {"min": None, "max": None}),
            "runs": min(r["runs"] for r in inputs.values()),
            "other_cpu_percent": [], "noisy": any(r.get("noisy") for r in inputs.values()),
            "derived_from": {k: r["scenario"] + " " + format_params(r["params"])
                             for k, r in inputs.items()},
        })
    return sorted(out, key=lambda r: r["system"] != SUBJECT)


def derived_rounds(derived: Derived, inputs: Mapping[str, Mapping]) -> list[float] | None:
    """The formula of `derived` within each round of its inputs, or None when their rounds do
    not pair (round_ratios' rule: as many runs each, at least 2, none left out as invalid)."""
    runs = [r.get("values") or [] for r in inputs.values()]
    if (len(runs[0]) < 2 or any(len(v) != len(runs[0]) for v in runs)
            or any(r.get("invalid_runs") for r in inputs.values())):
        return None
    return [derived.formula({k: r["values"][i] for k, r in inputs.items()})
            for i in range(len(runs[0]))]


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
