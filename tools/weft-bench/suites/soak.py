"""soak: weft under a long mixed load (echo, HTTP keep-alive and new connections,
channels, timers, file IO, random cancellations; bench/soak/soak.cpp), one process per backend.
The table gives the drift after warm-up of what the process holds; the plot shows the samples
(one a second) of RSS, open descriptors and live tasks over the whole run.

Run alone: `weft-bench --suite soak --full` (10 minutes per backend). The samples of the last run
of each scenario are in /tmp/weft-soak-<backend>.json; `python3 suites/soak.py FILE... OUT.png`
plots files without the harness.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

if __name__ == "__main__":  # standalone plotting: make weftbench importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from weftbench.suite import Metric, Scenario, Suite, System, Target  # noqa: E402

BACKENDS = ("io_uring", "epoll")


def samples_path(backend: str) -> str:
    return f"/tmp/weft-soak-{backend}.json"


SUITE = Suite(
    name="soak",
    title="Soak: mixed load for minutes, RSS / descriptors / live tasks sampled every second",
    seed_file=None,
    notes="One weft-soak process per backend, 2 workers: 4 echo clients (1 B..64 KiB, a new "
          "connection for 1 exchange in 4), an HTTP keep-alive client and one connecting per "
          "request (GET / and POST /echo, bodies checked), 2 channel producer/consumer pairs, 4 "
          "timer tasks spawning children, random 16 KiB file writes read back; 1 operation in 8 "
          "runs under a random 0..3 ms deadline and is cancelled. Drift = mean of the last 5 "
          "samples minus mean of the first 5 after warm-up (a fifth of the run, at most 60 s). "
          "Live tasks are the soak's own tasks (clients, echo handlers, children), not the HTTP "
          "server's connection tasks. frames_left / fds_left: coroutine frames and descriptors "
          "still held after the runtime was destroyed (0 expected; otherwise the run is invalid).",
    rounds={"quick": 1, "full": 1},
    timeout=900.0,
    systems=(System("weft", "{bin}/weft-soak",
                    build="cmake --build build/release --target weft-soak"),),
    metrics={
        "rss_drift_kib": Metric("KiB"),
        "fds_drift": Metric("count"),
        "tasks_drift": Metric("count"),
        "rss_kib_after_warmup": Metric("KiB"),
        "ops_per_s": Metric("op/s"),
        "cancelled": Metric("count"),
        "errors": Metric("count"),
        "frames_left": Metric("count"),
        "fds_left": Metric("count"),
        "seconds": Metric("s"),
    },
    unplotted=("rss_kib_after_warmup", "ops_per_s", "cancelled", "errors", "frames_left",
               "fds_left", "seconds", "rss_drift_kib", "fds_drift", "tasks_drift"),
    scenarios=tuple(
        Scenario("mixed", {"backend": b, "seconds": 600, "samples": samples_path(b)},
                 ("rss_drift_kib", "fds_drift", "tasks_drift", "rss_kib_after_warmup",
                  "ops_per_s", "cancelled", "errors", "frames_left", "fds_left"),
                 quick={"seconds": 30},
                 # a soak's drift and leftovers are counts: repeating a noisy 30-s run (90 s
                 # of the main job once) would not change them
                 retries=0,
                 targets={"errors": Target(at_most=0), "frames_left": Target(at_most=0),
                          "fds_left": Target(at_most=0)})
        for b in BACKENDS),
)


def plot_samples(paths: list[Path], out: Path) -> bool:
    """RSS, descriptors and live tasks against time, one line per samples file; the warm-up
    shaded. False if matplotlib or every file is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    runs = []
    for p in paths:
        try:
            runs.append((p, json.loads(Path(p).read_text(encoding="utf-8"))))
        except (OSError, ValueError):
            continue
    if not runs:
        return False
    fig, axes = plt.subplots(3, 1, figsize=(8, 7), dpi=100, sharex=True)
    for p, run in runs:
        label = Path(p).stem.removeprefix("weft-soak-")
        t = [s["t"] for s in run["samples"]]
        for ax, field, name in zip(axes, ("rss_kib", "fds", "tasks"),
                                   ("RSS (KiB)", "open descriptors", "live tasks")):
            ax.plot(t, [s[field] for s in run["samples"]], label=label, linewidth=1)
            ax.set_ylabel(name)
            ax.axvspan(0, run.get("warmup_s", 0), color="#eeeeee")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    axes[-1].set_xlabel("seconds (grey: warm-up)")
    axes[0].set_title("soak: what the process holds, sampled every second", fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return True


def _install_plot() -> None:
    """Adds the samples plot to this suite's section of the HTML report: the report draws one
    bar chart per metric, which cannot show a time series, so its plot_suite is wrapped (for
    this suite only; every other suite's plots are unchanged)."""
    try:
        from weftbench import report
    except ImportError:
        return
    if getattr(report.plot_suite, "soak_wrapped", False):
        return
    original = report.plot_suite

    def plot_suite(suite, result, out_dir):
        names = original(suite, result, out_dir)
        if suite.name == SUITE.name:
            name = "soak-samples.png"
            if plot_samples([Path(samples_path(b)) for b in BACKENDS], Path(out_dir) / name):
                names = [*names, name]
        return names

    plot_suite.soak_wrapped = True
    report.plot_suite = plot_suite


_install_plot()

if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: soak.py SAMPLES.json... OUT.png")
    sys.exit(0 if plot_samples([Path(a) for a in sys.argv[1:-1]], Path(sys.argv[-1])) else 1)
