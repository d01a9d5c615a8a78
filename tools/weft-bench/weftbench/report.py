"""The HTML report: per suite, the seed's table beside weft's and the peers' medians, and plots."""
from __future__ import annotations

import html
import re
from pathlib import Path

from . import stats
from .suite import HIGHER, SUBJECT, Suite

METHOD = """Each scenario program runs one measurement per invocation and prints its figures.
Systems are interleaved: in every round each scenario runs once on every system in turn
(A B C, A B C, ...), so a slow drift of the machine hits all systems alike. Cells show the
median over the rounds, with min–max and the number of runs n. During each run the harness
reads the machine's busy time from /proc/stat and subtracts the measured processes' own CPU
(rusage of the child, a server's or broker's cgroup): when the rest of the machine at normal
priority used more than {threshold:g}% of the CPU (beyond the one-tick-per-CPU resolution of
/proc/stat), the run is repeated up to {retries} times and, if it never gets quiet, the least
disturbed run is kept and marked ⚠ noisy; after 3 runs in a row stayed noisy through every
retry, runs are not repeated until one is quiet. Niced processes (builds under nice -n 19) get
the cores only when the measured ones leave them idle: their CPU is recorded and shown per
suite, not counted as noise. weft / best peer compares medians; under it, "per round" is the
median of the ratios taken within each round, where the systems ran one after another in the
same state of the machine. A target is judged on the medians and against every peer of its
row; a verdict the rounds' spread does not settle (weft's runs on both sides of a bound, or the
per-round ratios to a peer on both sides of the factor) is a tie, neither met nor missed. CPU
targets of server pairs are judged on the total per request, server plus load client: on
loopback the kernel charges TCP work to whichever side triggers it, and the client is the same
program for every server. Whether lower or higher is better is
declared per metric. Seed figures are the ones printed in the seed report, measured on other hardware:
they place the order of magnitude, the peers measured here are the real comparison. A server's
CPU per request and a broker's CPU per message come from a cgroup v2 directory made for that
process tree (cpu.stat usage_usec: microseconds, threads and processes that exited included);
where none could be made, from /proc/PID/stat in whole 10 ms ticks. Each such cell says which
("CPU: cgroup µs" or "CPU: ticks")."""

# Fonts: the seed notes are Chinese; Noto Sans CJK (Debian's fonts-noto-cjk, installed by
# scripts/setup.sh) renders them where the system font has no CJK glyphs.
CSS = """
body{font:14px/1.4 system-ui,"Noto Sans CJK SC","Noto Sans CJK JP",sans-serif;margin:2em auto;
max-width:1200px;color:#222;padding:0 1em}.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;
vertical-align:top}th{background:#f3f3f3}td.num{text-align:right;white-space:nowrap}
small{color:#666}.yes{color:#070;font-weight:bold}.no{color:#b00;font-weight:bold}
.unknown{color:#a60}.win{color:#070}.lose{color:#b00}.err{background:#fee;border:1px solid #d99;
padding:.5em 1em}.warn{color:#a60}.tie{color:#a60;font-weight:bold}pre{background:#f6f6f6;padding:.5em;white-space:pre-wrap}
img{max-width:560px;margin:4px;border:1px solid #eee}dl.facts dt{float:left;width:9em;
font-weight:bold}dl.facts dd{margin-left:10em}
"""


def esc(x: object) -> str:
    return html.escape(str(x))


def row_key(row: dict) -> tuple[str, str, str]:
    return row["scenario"], stats.format_params(row["params"]), row["metric"]


def table_keys(suite: Suite, result: dict) -> list[tuple]:
    """Rows of the table in the suite's order: declared metrics, then anything else printed."""
    present = list(dict.fromkeys(row_key(r) for r in result["rows"]))
    keys = []
    for scn in (s for s in suite.scenarios if result["mode"] in s.modes):
        p = stats.format_params(scn.params_for(result["mode"]))
        keys += [(scn.name, p, m) for m in scn.metrics]
        keys += [k for k in present if k[:2] == (scn.name, p) and k[2] not in scn.metrics]
    # a derived row whose inputs did not run in this mode (the full mode's sizes) is left out:
    # it would only add a target that cannot be decided
    keys += [k for k in ((d.scenario, stats.format_params(d.params), d.metric)
                         for d in suite.derived) if k in present]
    keys += [k for k in present if k not in keys]
    return list(dict.fromkeys(keys))


def targets_by_key(suite: Suite, mode: str) -> dict:
    out = {}
    for scn in (s for s in suite.scenarios if mode in s.modes):
        p = stats.format_params(scn.params_for(mode))
        for metric, target in scn.targets.items():
            out[scn.name, p, metric] = target
    for d in suite.derived:
        if d.target:
            out[d.scenario, stats.format_params(d.params), d.metric] = d.target
    return out


def figure_cell(row: dict | None, status: str = "", why: str = "") -> str:
    if row is None:
        return f'<td class="num" title="{esc(why)}"><small>{esc(status or "–")}</small></td>'
    spread = ""
    if row.get("min") is not None:
        spread = (f"<br><small>{stats.fmt(row['min'])}–{stats.fmt(row['max'])}"
                  f" · n={row['runs']}</small>")
    elif row.get("derived_from"):
        spread = "<br><small>from medians</small>"
    noisy = ""
    if row.get("noisy"):
        why = f"{row['noisy_runs']} noisy run(s)" if "noisy_runs" in row else "a noisy input"
        noisy = f' <span class="warn" title="{why}">⚠ noisy</span>'
    if row.get("invalid_runs"):
        spread += (f'<br><small class="warn" title="runs with errors, left out">'
                   f'+{row["invalid_runs"]} invalid</small>')
    if row.get("cpu_method"):
        spread += "<br>" + cpu_method_note(row["cpu_method"])
    return f'<td class="num"><b>{stats.fmt(row["value"])}</b>{noisy}{spread}</td>'

CPU_METHOD_SHORT = {"cgroup": ("CPU: cgroup µs", "cgroup v2 cpu.stat usage_usec: microseconds, "
                               "threads and processes that exited during the run included"),
                    "ticks": ("CPU: ticks", "/proc/PID/stat utime+stime: whole 10 ms clock "
                              "ticks (no cgroup v2 directory could be made)")}


def cpu_method_note(method: str) -> str:
    """How a server's or broker's CPU was read, as the cell's last line (a row whose runs
    differed names both: "cgroup + ticks")."""
    parts = [CPU_METHOD_SHORT.get(m, (m, m)) for m in method.split(" + ")]
    text = " + ".join(short.removeprefix("CPU: ") for short, _ in parts)
    cls = ' class="warn"' if "ticks" in method else ""
    return (f'<small{cls} title="{esc("; ".join(long for _, long in parts))}">'
            f"CPU: {esc(text)}</small>")


def seed_cell(row: dict | None) -> str:
    if row is None:
        return '<td class="num"><small>–</small></td>'
    note = esc(row.get("seed_note", ""))
    also = "".join(f"<br>{esc(name)}: {stats.fmt(v)}"
                   for name, v in row.get("seed_also", {}).items())
    return f'<td class="num">{stats.fmt(row["value"])}{also}<br><small>{note}</small></td>'


VERDICT = {True: ("yes", "yes"), False: ("no", "no"), stats.TIE: ("tie", "tie"),
           None: ("?", "unknown")}


def target_cells(target, weft: dict | None, peer_figs: dict, unit: str,
                 direction: str, peer_rows: dict | None = None) -> tuple[str, bool | str | None]:
    """The target and its verdict: yes, no, tie (the rounds' spread does not decide it) or ?
    (a figure is missing), judged with the rows' per-round figures (stats.check_target)."""
    met, why = stats.check_target(target, weft and weft["value"], peer_figs, direction,
                                  weft, peer_rows)
    word, cls = VERDICT[met]
    why = f"<br><small>{esc(why)}</small>" if why else ""
    return (f"<td>{esc(stats.describe_target(target, unit))}</td>"
            f'<td class="{cls}">{word}{why}</td>'), met


def section_header(suite: Suite, result: dict) -> list[str]:
    parts = [f'<h2 id="{esc(suite.name)}">{esc(suite.title)}</h2>',
             f"<p>Suite <code>{esc(suite.name)}</code> · seed "
             f"<code>{esc(result.get('seed_file'))}</code> · mode {esc(result['mode'])}, "
             f"{result['rounds']} rounds · run {esc(result['machine']['date'])}"
             f" · took {result.get('elapsed_s', '?')} s</p>"]
    load = load_line(result)
    if load:
        parts.append(f"<p><small>{load}</small></p>")
    if result.get("background_cpu"):
        parts.append("<p><small>Background processes' CPU (broker_cpu_s_per_m) read from: "
                     + esc("; ".join(f"{name}: {how}" for name, how in
                                     result["background_cpu"].items())) + "</small></p>")
    if suite.notes:
        parts.append(f"<p>{esc(suite.notes)}</p>")
    if result.get("error"):
        parts.append(f'<p class="err">Suite not run: {esc(result["error"])}</p>')
    for s in result["systems"]:
        if s["status"] == "not run" and not (s["name"] == SUBJECT and result.get("error")):
            parts.append(f'<p class="warn">{esc(s["name"])} not run: {esc(s["reason"])}</p>')
    return parts


def load_line(result: dict) -> str:
    """What the rest of the machine used during the suite's kept runs: the other CPU and its
    niced part, averaged over the runs weighted by their wall time (a run of a few ticks reads
    0% or 150%: /proc/stat counts whole ticks), and how many cells have a noisy run."""
    first = {}  # a run prints several metrics: count each run once, by its first metric's row
    for r in result["rows"]:
        if r["system"] != "seed" and r.get("other_cpu_percent") and r.get("wall_s"):
            first.setdefault((r["scenario"], stats.format_params(r["params"]), r["system"]), r)
    runs = [(w, o, n) for r in first.values()
            for w, o, n in zip(r["wall_s"], r["other_cpu_percent"],
                               r.get("niced_cpu_percent") or [None] * len(r["wall_s"]))]
    wall = sum(w for w, _, _ in runs)
    if not runs or wall <= 0:
        return ""
    text = (f"Other processes used {sum(w * o for w, o, _ in runs) / wall:.0f}% of the CPU "
            f"during its {len(runs)} kept runs ({wall:.0f} s in all; mean weighted by wall time)")
    if all(n is not None for _, _, n in runs):
        text += f", niced {sum(w * n for w, _, n in runs) / wall:.0f}%"
    noisy = sum(1 for r in first.values() if r.get("noisy"))
    return esc(text + f"; {noisy} of {len(first)} scenario × system cells have a noisy run.")


def suite_section(suite: Suite, result: dict, out_dir: Path) -> str:
    rows = {(row_key(r), r["system"]): r for r in result["rows"]}
    status = {s["name"]: s for s in result["systems"]}
    peers = [s.name for s in suite.systems if s.name != SUBJECT]
    failed = {(f["scenario"], stats.format_params(f["params"]), f["system"]): f["error"]
              for f in result["failures"]}
    skipped = {(f["scenario"], stats.format_params(f["params"]), f["system"]): f["reason"]
               for f in result.get("skipped", [])}
    invalid = {(f["scenario"], stats.format_params(f["params"]), f["system"]): f["error"]
               for f in result.get("invalid", [])}
    targets = targets_by_key(suite, result["mode"])

    def cell(key, system) -> str:
        if (key, system) in rows:
            return figure_cell(rows[key, system])
        if status.get(system, {}).get("status") == "not run":
            return figure_cell(None, "not run", status[system]["reason"])
        if (key[0], key[1], system) in failed:
            return figure_cell(None, "failed", failed[key[0], key[1], system])
        if (key[0], key[1], system) in skipped:
            return figure_cell(None, "not built", skipped[key[0], key[1], system])
        if (key[0], key[1], system) in invalid:
            return figure_cell(None, "invalid", invalid[key[0], key[1], system])
        return figure_cell(None, "–", "no figure (not supported)")

    parts = section_header(suite, result)
    verdicts, table_at = [], len(parts)
    head = "".join(f"<th>{esc(p)}</th>" for p in peers)
    parts.append('<div class="scroll"><table><tr><th>scenario</th><th>params</th><th>metric</th>'
                 "<th>seed</th>"
                 f"<th>weft</th>{head}<th>weft / best peer</th><th>target</th><th>met</th></tr>")
    for key in table_keys(suite, result):
        metric = suite.metric(key[2])
        unit = next((r["unit"] for (k, _), r in rows.items() if k == key), metric.unit)
        direction = "higher is better" if metric.better == HIGHER else "lower is better"
        weft = rows.get((key, SUBJECT))
        peer_figs = {p: rows[key, p]["value"] for p in peers if (key, p) in rows}
        cells = [f"<td>{esc(key[0])}</td><td><code>{esc(key[1])}</code></td>",
                 f"<td>{esc(key[2])}<br><small>{esc(unit)}, {direction}</small></td>",
                 seed_cell(rows.get((key, "seed"))), cell(key, SUBJECT),
                 *(cell(key, p) for p in peers),
                 ratio_cell(weft, peer_figs, metric.better,
                            {p: rows[key, p] for p in peers if (key, p) in rows})]
        if key in targets:
            html_, met = target_cells(targets[key], weft, peer_figs, unit, metric.better,
                                      {p: rows[key, p] for p in peers if (key, p) in rows})
            cells.append(html_)
            verdicts.append(met)
        else:
            cells.append("<td><small>report only</small></td><td></td>")
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</table></div>")
    if verdicts:
        parts.insert(table_at, f"<p><b>Targets: weft meets {verdicts.count(True)} of "
                     f"{len(verdicts)}</b> ({verdicts.count(False)} missed, "
                     f"{verdicts.count(stats.TIE)} tied within the rounds' spread, "
                     f"{verdicts.count(None)} not decidable).</p>")

    if result["failures"]:
        parts.append("<h3>Failures</h3>")
        for f in result["failures"]:
            parts.append(f"<p><b>{esc(f['system'])}</b> on {esc(f['scenario'])} "
                         f"<code>{esc(stats.format_params(f['params']))}</code>"
                         f" (round {f['round']}):</p><pre>{esc(f['error'])}</pre>")
    if result.get("invalid"):
        parts.append("<h3>Invalid runs</h3><p><small>Runs whose load saw errors (non-2xx "
                     "responses, socket errors, failed or wrong-length responses): left out of "
                     "every median.</small></p>")
        for f in result["invalid"]:
            parts.append(f"<p><b>{esc(f['system'])}</b> on {esc(f['scenario'])} "
                         f"<code>{esc(stats.format_params(f['params']))}</code>"
                         f" (round {f['round']}):</p><pre>{esc(f['error'])}</pre>")
    if result.get("skipped"):
        reasons = sorted({(f["scenario"], stats.format_params(f["params"]), f["reason"])
                          for f in result["skipped"]})
        parts.append("<h3>Not built</h3>" + "".join(
            f"<p>{esc(s)} <code>{esc(p)}</code>: {esc(r)}</p>" for s, p, r in reasons))
    images = plot_suite(suite, result, out_dir)
    if images:
        parts.append("<h3>Plots</h3><p><small>Bars: medians; whiskers: min–max over the rounds; "
                     "grey hatched: the seed's figure; dashed: weft's target.</small></p>")
        parts += [f'<img src="{esc(name)}" alt="{esc(name)}">' for name in images]
    return "\n".join(parts)


def ratio_cell(weft: dict | None, peer_figs: dict, direction: str,
               peer_rows: dict | None = None) -> str:
    """weft's median over the best peer's; under it, when the rounds pair up, the median of the
    ratios taken within each round (stats.per_round_ratio)."""
    best = stats.best_of(peer_figs, direction)
    r = stats.ratio(weft and weft["value"], best and best[1])
    if r is None:
        return '<td class="num"><small>–</small></td>'
    cls = "win" if stats.better(weft["value"], best[1], direction) else "lose"
    paired = stats.per_round_ratio(weft, (peer_rows or {}).get(best[0]))
    rounds = (f'<br><small title="the median of the ratios taken within each round">per round '
              f"{paired:.3g}×</small>" if paired is not None else "")
    return f'<td class="num {cls}">{r:.3g}×<br><small>vs {esc(best[0])}</small>{rounds}</td>'


def use_cjk_fallback(matplotlib) -> None:
    """Plots fall back to Noto Sans CJK for glyphs DejaVu Sans lacks (the seed's Chinese),
    when it is installed (matplotlib >= 3.6 falls back along font.family)."""
    from matplotlib import font_manager

    def cjk_names() -> list[str]:
        return sorted({f.name for f in font_manager.fontManager.ttflist
                       if f.name.startswith("Noto Sans CJK")})

    cjk = cjk_names()
    if not cjk:  # installed after matplotlib cached its font list: add the file itself
        for path in font_manager.findSystemFonts():
            if Path(path).name.startswith("NotoSansCJK-Regular"):
                font_manager.fontManager.addfont(path)
        cjk = cjk_names()
    cjk.sort(key=lambda name: not name.endswith(" SC"))  # Simplified Chinese glyphs first
    matplotlib.rcParams["font.family"] = ["DejaVu Sans", *cjk[:1], "sans-serif"]


def split_params(text: str) -> list[str]:
    """"a=1 b=x y c=2" -> ["a=1", "b=x y", "c=2"]: a value may hold spaces (derived rows'
    "D=20 vs 5"), a new item starts at a word followed by "="."""
    return [p for p in re.split(r" (?=[A-Za-z_][A-Za-z0-9_]*=)", text) if p]


def compact(x: float) -> str:
    """A bar's label, three significant digits: 131k, 1.67M (full figures are in the table;
    "130,529" beside "133,505" overlapped)."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return stats.fmt(x)


def shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def group_labels(params: list[str]) -> tuple[str, list[str]]:
    """(the params every group shares, one label per group with only what differs), each
    label one param a line: the whole params string of every group overlapped its
    neighbours' under the bars."""
    items = [split_params(p) for p in params]
    common = [p for p in items[0] if all(p in i for i in items[1:])] if len(items) > 1 else []
    labels = []
    for i in items:
        rest = [p for p in i if p not in common] or i
        labels.append("\n".join(rest))
    return " ".join(common), labels


def plot_suite(suite: Suite, result: dict, out_dir: Path) -> list[str]:
    """One grouped bar chart per (scenario, metric): groups = params, bars = systems,
    whiskers = min-max, dashed line = weft's target."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    use_cjk_fallback(matplotlib)
    systems = ["seed"] + [s.name for s in suite.systems]
    colors = {"seed": "#bbbbbb", SUBJECT: "#d62728"}
    palette = iter(["#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"])
    for s in systems:
        colors.setdefault(s, next(palette, "#7f7f7f"))

    charts: dict[tuple[str, str], dict] = {}
    for key in table_keys(suite, result):
        charts.setdefault((key[0], key[2]), {})[key[1]] = {}
    for r in result["rows"]:
        if r.get("value") is not None:
            charts[r["scenario"], r["metric"]].setdefault(
                stats.format_params(r["params"]), {})[r["system"]] = r
    targets = targets_by_key(suite, result["mode"])
    names = []
    for (scenario, metric), groups in charts.items():
        if metric in suite.unplotted:
            continue
        present = [s for s in systems if any(s in g for g in groups.values())]
        if not any(s != "seed" for s in present):
            continue
        if all(r["value"] == 0 for g in groups.values() for r in g.values()):
            continue  # a count that should be 0 and is (errors): the table says so
        fig, ax = plt.subplots(figsize=(8, 3.6), dpi=100)
        width = 0.8 / len(present)
        values = []
        for j, system in enumerate(present):
            xs, ys, lo, hi = [], [], [], []
            for x, rowset in enumerate(groups.values()):
                row = rowset.get(system)
                if row is None:
                    continue
                v = row["value"]
                xs.append(x - 0.4 + width * (j + 0.5))
                ys.append(v)
                lo.append(v - row["min"] if row.get("min") is not None else 0)
                hi.append(row["max"] - v if row.get("max") is not None else 0)
                values += [v, row.get("max") or v]
            bars = ax.bar(xs, ys, width, label=system, color=colors[system],
                          hatch="//" if system == "seed" else None,
                          yerr=[lo, hi] if any(lo) or any(hi) else None, capsize=3)
            ax.bar_label(bars, [compact(y) for y in ys], fontsize=7 if len(present) <= 4 else 6,
                         padding=2)
        for x, params in enumerate(groups):
            target = targets.get((scenario, params, metric))
            for limit in (target.at_most, target.at_least) if target else ():
                if limit is not None:
                    ax.hlines(limit, x - 0.45, x + 0.45, colors="black", linestyles="dashed",
                              label="target")
                    values.append(limit)
        if min(values) > 0 and max(values) / min(values) > 10:
            ax.set_yscale("log")  # figures span decades
        elif min(values) >= 0:
            ax.set_ylim(0, max(values) * 1.15 or 1)
        unit = suite.metric(metric).unit
        common, labels = group_labels(list(groups))
        ax.set_xticks(range(len(groups)), labels, fontsize=8)
        ax.set_ylabel(f"{metric} ({unit})" if unit else metric)
        better = "higher" if suite.metric(metric).better == HIGHER else "lower"
        ax.set_title(f"{suite.name}: {scenario} — {metric} ({better} is better)"
                     + (f"\n{shorten(common, 100)}" if common else ""), fontsize=9)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        # beside the axes: inside, it covered the bars of whichever group sat under it
        ax.legend(unique.values(), unique.keys(), fontsize=8, loc="upper left",
                  bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{suite.name}-{scenario}-{metric}") + ".png"
        fig.savefig(out_dir / name)
        plt.close(fig)
        names.append(name)
    return names


def headline_keys(suite: Suite, result: dict) -> list[tuple]:
    """A suite's headline rows: those with a target or a seed figure (not the error counts);
    in a suite with neither, the first metric of every scenario that all systems run."""
    targets = targets_by_key(suite, result["mode"])
    seeded = {row_key(r) for r in result["rows"] if r["system"] == "seed"}
    present = {row_key(r) for r in result["rows"]}
    keys, first_seed = [], set()
    for k in table_keys(suite, result):
        if k[2] == "errors" or k not in present:
            continue
        # of a scenario's seeded metrics only the first (the seed's headline figure, e.g.
        # msg/s; its latency and memory columns stay in the suite's table) unless targeted
        if k in targets or (k in seeded and k[:2] not in first_seed):
            keys.append(k)
        if k in seeded:
            first_seed.add(k[:2])
    if keys:
        return keys
    return [(scn.name, stats.format_params(scn.params_for(result["mode"])), scn.metrics[0])
            for scn in suite.scenarios
            if result["mode"] in scn.modes and scn.only is None and scn.metrics]


def bounded_by_cell(suite: Suite, result: dict, key: tuple) -> str:
    """The stated limit of a missed target (Suite.limits), or empty."""
    params = next((r["params"] for r in result["rows"] if row_key(r) == key), {})
    texts = [lim.text for lim in suite.limits if lim.applies(key[0], params, key[2])]
    return f"<td><small>{esc('; '.join(texts))}</small></td>"


def summary_table(shown: list[Suite], results: dict[str, dict]) -> str:
    """One table of every suite's headline rows: weft, the seed, the best peer, the ratio and
    the target's verdict, each row linking to its suite's section."""
    lines = ['<h2 id="summary">Summary</h2><p><small>Every suite\'s headline rows (those with a '
             "target or a seed figure); the full tables follow, one section per suite. "
             "Medians; the best peer in the metric's direction; \"per round\": the median of "
             "the ratios taken within each round.</small></p>",
             '<div class="scroll"><table><tr><th>suite</th><th>scenario</th><th>params</th>'
             "<th>metric</th><th>seed</th><th>weft</th><th>best peer</th>"
             "<th>weft / best peer</th><th>target</th><th>met</th>"
             '<th title="for a missed target: what bounds it (Suite.limits)">bounded by'
             "</th></tr>"]
    tally = {True: 0, False: 0, stats.TIE: 0, None: 0}
    for suite in shown:
        result = results[suite.name]
        if result.get("error"):
            lines.append(f'<tr><td><a href="#{esc(suite.name)}">{esc(suite.name)}</a></td>'
                         f'<td colspan="10" class="no">not run: {esc(result["error"])}</td></tr>')
            continue
        rows = {(row_key(r), r["system"]): r for r in result["rows"]}
        peers = [s.name for s in suite.systems if s.name != SUBJECT]
        targets = targets_by_key(suite, result["mode"])
        for key in headline_keys(suite, result):
            metric = suite.metric(key[2])
            weft = rows.get((key, SUBJECT))
            peer_figs = {p: rows[key, p]["value"] for p in peers if (key, p) in rows}
            best = stats.best_of(peer_figs, metric.better)
            unit = (weft or {}).get("unit", metric.unit)
            seed = rows.get((key, "seed"))
            best_cell = (f'<td class="num">{stats.fmt(best[1])}<br><small>{esc(best[0])}'
                         "</small></td>" if best else '<td class="num"><small>–</small></td>')
            cells = [f'<td><a href="#{esc(suite.name)}">{esc(suite.name)}</a></td>',
                     f"<td>{esc(key[0])}</td><td><code>{esc(key[1])}</code></td>",
                     f"<td>{esc(key[2])}<br><small>{esc(unit)}</small></td>",
                     f'<td class="num">{stats.fmt(seed["value"]) if seed else "–"}</td>',
                     f'<td class="num"><b>{stats.fmt(weft["value"]) if weft else "–"}</b>'
                     + (' <span class="warn" title="a noisy run: other processes at normal '
                        'priority used more than the threshold">⚠</span>'
                        if weft and weft.get("noisy") else "")
                     + "</td>", best_cell,
                     ratio_cell(weft, peer_figs, metric.better,
                                {p: rows[key, p] for p in peers if (key, p) in rows})]
            if key in targets:
                html_, met = target_cells(targets[key], weft, peer_figs, unit, metric.better,
                                          {p: rows[key, p] for p in peers if (key, p) in rows})
                cells.append(html_)
                tally[met] += 1
                cells.append(bounded_by_cell(suite, result, key) if met is False
                             else "<td></td>")
            else:
                cells.append("<td><small>report only</small></td><td></td><td></td>")
            lines.append("<tr>" + "".join(cells) + "</tr>")
    lines.append("</table></div>")
    lines.insert(1, f"<p><b>Targets met: {tally[True]} of {sum(tally.values())}</b> "
                    f"({tally[False]} missed, {tally[stats.TIE]} tied within the rounds' spread, "
                    f"{tally[None]} not decidable).</p>")
    return "\n".join(lines)


def write_report(out_dir: Path, suites: list[Suite], results: dict[str, dict]) -> Path:
    """index.html over `results` (suite name -> result JSON) in suite order."""
    shown = [s for s in suites if s.name in results]
    first = results[shown[0].name] if shown else {"machine": {}, "method": {}}
    facts = {k: " ".join(map(str, v)) if isinstance(v, list) else v
             for k, v in first["machine"].items()}
    machine = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts.items())
    builds = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>"
                     for k, v in first.get("builds", {}).items())
    method = first.get("method", {})
    text = METHOD.format(threshold=method.get("noise_threshold_percent", 10),
                         retries=method.get("retries", 3))
    toc = " · ".join(f'<a href="#{esc(s.name)}">{esc(s.name)}</a>' for s in shown)
    summary = summary_table(shown, results) if shown else ""
    body = "\n".join(suite_section(s, results[s.name], out_dir) for s in shown)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>weft-bench report</title>
<style>{CSS}</style></head><body>
<h1>weft-bench report</h1>
{summary}
<p>Suites: {toc}</p>
<h3>Machine</h3><dl class="facts">{machine}</dl>
<h3>Builds</h3><dl class="facts">{builds}</dl>
<h3>Method</h3><p>{esc(text)}</p>
{body}
</body></html>
"""
    path = out_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
