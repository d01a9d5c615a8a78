"""Seed 002 (ZCO, Zig + io_uring): HTTP hello against Go net/http with ApacheBench, the seed's
exact command `ab -n 10000 -c {10,100,500,1000}` (HTTP/1.0, a connection per request), then the
same with keep-alive (-k), then `wrk -t2 -c{100,1000} --latency` for the tail, on weft and every
HTTP peer (weftbench/http_systems.py)."""
from weftbench.http_systems import PEER_NAMES, PEERS, SERVERS_NOTE, WEFT, WEFT_VARIANTS
from weftbench.suite import (HIGHER, PAIR_CPU_METRICS, PAIR_CPU_ROWS, Limit, Metric, Ratio,
                             Scenario, Seed, Suite, Target)

ROWS = ("requests_per_s", "mean_latency_ms", "p99_ms", *PAIR_CPU_ROWS, "errors")
# The seed's figures after its optimisations (req/s, ms), and Go net/http's req/s beside them.
ZCO = {10: (48_000, 0.208, 39_359), 100: (52_000, 1.923, 50_996),
       500: (45_000, 11.111, 42_724), 1000: (39_425, 25.364, 37_567)}
ALL = ("quick", "full")
# The targets (ratios to the best peer measured in the same run).
CPU_NO_KEEPALIVE = Target(ratios=(Ratio(PEER_NAMES, 0.9), Ratio(("go",), 0.5)))
CPU_KEEPALIVE = Target(ratios=(Ratio(("asio", "hyper", "nginx", "beast"), 0.8),
                               Ratio(("go",), 0.5)))
AT_LEAST_BEST = Target(ratios=(Ratio(PEER_NAMES, 1.0),))
# Quick mode's ab without keep-alive: 5,000 requests (~0.5 s here); the server's CPU is read
# from its cgroup in µs (where no cgroup can be made, 10 ms ticks: ~2 µs steps a request).
QUICK_N = 5000
# Keep-alive ab rows send 100,000 requests in both modes: 10,000 take about 50 ms at the rates
# measured here, too short for a verdict decided by a few percent (about 0.5 s instead).
KEEPALIVE_N = 100_000


def ab(c, keep_alive, quick_n=None, modes=ALL):
    seed = {}
    if not keep_alive:
        rps, ms, go = ZCO[c]
        seed = {"requests_per_s": Seed(rps, f"ZCO ~{rps:,} req/s (ab -c {c}), the seed's Go "
                                            "net/http beside", also={"seed's go": go}),
                "mean_latency_ms": Seed(ms, f"ZCO {ms} ms (ab's mean per request)")}
    n = KEEPALIVE_N if keep_alive else 10000
    return Scenario("ab", {"n": n, "c": c, "k": int(keep_alive)}, ROWS,
                    quick={"n": quick_n} if quick_n else {}, seed=seed, modes=modes,
                    targets={"requests_per_s": AT_LEAST_BEST,
                             "total_cpu_ns_per_op": CPU_KEEPALIVE if keep_alive
                             else CPU_NO_KEEPALIVE,
                             "errors": Target(at_most=0)})


def wrk(c):
    return Scenario("wrk", {"t": 2, "c": c, "d": 5}, ROWS, quick={"d": 1},
                    targets={"requests_per_s": AT_LEAST_BEST, "p99_ms": AT_LEAST_BEST,
                             "total_cpu_ns_per_op": CPU_KEEPALIVE,
                             "errors": Target(at_most=0)})


def weft_ab(c, tag, variant, quick_n=None, modes=ALL):
    quick_n = quick_n or QUICK_N
    return Scenario("ab", {"n": 10000, "c": c, "k": 0, **tag}, ROWS, quick={"n": quick_n},
                    modes=modes, only=("weft",), **variant)


def weft_wrk(c, tag, variant, modes=ALL):
    return Scenario("wrk", {"t": 2, "c": c, "d": 5, **tag}, ROWS, quick={"d": 1}, modes=modes,
                    only=("weft",), **variant)


SUITE = Suite(
    name="zco-http",
    title="ZCO (seed 002): HTTP hello with ab (with and without keep-alive) and wrk",
    seed_file="002_5fa6aac29d7c297f.txt",
    notes="The seed ran `ab -n 10000 -c {10,100,500,1000} http://localhost:8080/` against its "
          "Zig server and Go net/http (Linux 6.12, 'multi-core'): the ab rows without -k are "
          "that command (a new connection per request, HTTP/1.0); quick mode runs -n 5000 at "
          "c=100 and c=1000 (and -k at c=100) only, full mode every row with -n 10000; the "
          "keep-alive rows (-k, not the seed's) send -n 100000 in both modes, about 0.5 s. ab's "
          "latency is its mean per request as one client sees it (the seed's 延迟); its "
          "percentiles are whole milliseconds. wrk rows: -t2, -d5s (quick -d1s). "
          + SERVERS_NOTE + " weft's epoll and thread-per-core configurations are rows of weft "
          "alone (param weft=...; quick mode runs them at c=100, and thread-per-core at c=1000 "
          "too). The load tool shares the 2 cores with the server, so "
          "CPU per request is the discriminating figure: the server's, the load client's (ab's "
          "or wrk's own) and their total, on which the CPU targets are judged (on loopback "
          "the kernel charges TCP work to whichever side triggers it). Before every c=1000 run the "
          "client reads the ephemeral port range, net.ipv4.tcp_tw_reuse and the sockets in "
          "TIME_WAIT and reports them (rows ephemeral_ports, tcp_tw_reuse, time_wait_sockets; "
          "tcp_tw_reuse 2 = loopback connections reuse TIME_WAIT ports, so runs of 10,000 new "
          "connections cannot exhaust the range). A run whose responses had any error is left "
          "out of the medians and listed under Invalid runs. Targets: keep-alive "
          "CPU per request (server plus client) within 0.8x "
          "the best of asio, hyper, nginx, beast and 0.5x go; without keep-alive 0.9x the best "
          "peer and 0.5x go; requests/s at least and p99 at most the best peer's.",
    systems=(WEFT, *PEERS),
    metrics={
        "requests_per_s": Metric("req/s", HIGHER),
        "mean_latency_ms": Metric("ms"),
        "p99_ms": Metric("ms"),
        **PAIR_CPU_METRICS,
        "errors": Metric("count"),
        "server_rss_kib": Metric("KiB"),
        "ephemeral_ports": Metric("ports", HIGHER),
        "tcp_tw_reuse": Metric(""),
        "time_wait_sockets": Metric("sockets"),
    },
    scenarios=(
        ab(10, False, modes=("full",)),
        ab(100, False, quick_n=QUICK_N),
        ab(500, False, modes=("full",)),
        ab(1000, False, quick_n=QUICK_N),
        ab(10, True, modes=("full",)),
        ab(100, True),
        ab(500, True, modes=("full",)),
        ab(1000, True, modes=("full",)),
        wrk(100),
        wrk(1000),
        *(weft_ab(100, tag, v) for tag, v in WEFT_VARIANTS),
        *(weft_ab(1000, tag, v, modes=("full",)) for tag, v in WEFT_VARIANTS),
        *(weft_wrk(100, tag, v) for tag, v in WEFT_VARIANTS),
        # thread-per-core at 1,000 connections in quick mode too: the configuration that holds
        # the p99 target there (docs/guide/http.md, "Which runtime mode")
        *(weft_wrk(1000, tag, v, modes=ALL if tag["weft"] == "per-core" else ("full",))
          for tag, v in WEFT_VARIANTS),
    ),
    rounds={"quick": 3, "full": 5},
    timeout=180.0,
    unplotted=("ops", "ephemeral_ports", "tcp_tw_reuse", "time_wait_sockets", "errors"),
    limits=(Limit("ab", "requests_per_s", "ab itself: the rows without keep-alive are bound by "
                  "ab on 2 cores, 12k-19k req/s for every server",
                  params={"k": 0}),
            Limit("wrk", "total_cpu_ns_per_op", "the kernel's TCP work: weft's send and "
                  "receive alone take 5.12 µs a request, 0.8x Asio's whole is 5.15; weft's user "
                  "space is 0.49 µs (bench/http/profile/perf_floor.sh)")),
)
