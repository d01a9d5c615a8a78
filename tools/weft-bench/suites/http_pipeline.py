"""HTTP pipelining, the TechEmpower plaintext shape: wrk with a Lua script sending 16 pipelined
GET / per write on 256 connections, on weft and every HTTP peer (weftbench/http_systems.py)."""
from weftbench.http_systems import CEILING, PEER_NAMES, PEERS, SERVERS_NOTE, WEFT, WEFT_VARIANTS
from weftbench.suite import (HIGHER, PAIR_CPU_METRICS, PAIR_CPU_ROWS, Limit, Metric, Ratio,
                             Scenario, Suite, Target)

ROWS = ("requests_per_s", "p99_ms", *PAIR_CPU_ROWS, "errors")
PARAMS = {"t": 2, "c": 256, "d": 5, "depth": 16}
# The same load with the server's processes under strace -c: counts only (strace slows the
# server down). weft on io_uring sends without write calls: its row is the epoll backend's.
WRITES = ("responses_per_write", "writes", "io_uring_enters")
AT_LEAST_8 = {"responses_per_write": Target(at_least=8)}
EPOLL = next(v for tag, v in WEFT_VARIANTS if tag["weft"] == "epoll")

SUITE = Suite(
    name="http-pipeline",
    title="HTTP pipelining: wrk, 16 requests per write, 256 connections",
    seed_file=None,
    notes="No seed has this table; it is the shape of TechEmpower's plaintext test (wrk with a "
          "pipelining script, depth 16). wrk -t2 -c256 -d5s (quick -d1s); requests_per_s "
          "counts responses. " + SERVERS_NOTE + " Responses per write (rows writes=1): the "
          "same load, 1 s, with every process holding the server's listening socket traced "
          "by `strace -c -f` (write, writev, send, sendto, sendmsg, sendmmsg, sendfile and "
          "io_uring_enter calls counted); responses_per_write = responses wrk received / "
          "write calls. These runs count calls: strace slows the server, so they give no "
          "speed figure. weft on io_uring sends with io_uring (no write call: its row shows "
          "io_uring_enters only); its responses per write are the epoll backend's "
          "(weft=epoll), which runs the same connection code. minihttp (may_minihttp on 2 "
          "may workers, built for TechEmpower's plaintext test) is the pipelining ceiling; the "
          "targets: weft >= every HTTP peer (go, nginx, hyper, asio, beast) and >= 0.8x "
          "minihttp in requests/s, and at most every peer's CPU per request (server and "
          "client), minihttp's included. A run whose responses had any error is left out of "
          "the medians.",
    systems=(WEFT, *PEERS, CEILING),
    metrics={
        "requests_per_s": Metric("req/s", HIGHER),
        "mean_latency_ms": Metric("ms"),
        "p99_ms": Metric("ms"),
        **PAIR_CPU_METRICS,
        "errors": Metric("count"),
        "server_rss_kib": Metric("KiB"),
        "responses_per_write": Metric("responses", HIGHER),
        "writes": Metric("calls"),
        "io_uring_enters": Metric("calls"),
    },
    scenarios=(
        Scenario("wrk", PARAMS, ROWS, quick={"d": 1},
                 targets={"requests_per_s": Target(ratios=(Ratio(PEER_NAMES, 1.0),
                                                           Ratio(("minihttp",), 0.8))),
                          "total_cpu_ns_per_op": Target(ratios=(Ratio((*PEER_NAMES, "minihttp"),
                                                                      1.0),)),
                          "errors": Target(at_most=0)}),
        *(Scenario("wrk", {**PARAMS, **tag}, ROWS, quick={"d": 1}, only=("weft",), **variant)
          for tag, variant in WEFT_VARIANTS if tag["weft"] == "per-core"),
        # counting rows: not repeated when noisy (strace's own CPU made every one of them
        # noisy, 132 s of a quick run's 255 went to their repeats)
        Scenario("wrk", {**PARAMS, "d": 1, "writes": 1}, WRITES, retries=0),
        Scenario("wrk", {**PARAMS, "d": 1, "writes": 1, "weft": "epoll"}, WRITES,
                 only=("weft",), targets=AT_LEAST_8, retries=0, **EPOLL),
    ),
    rounds={"quick": 3, "full": 5},
    unplotted=("ops", "errors", "writes", "io_uring_enters"),
    timeout=120.0,
    limits=tuple(Limit("wrk", metric, "the server's user space per request: weft runs "
                  "2,400 instructions a pipelined request where Asio's minimal framing runs "
                  "1,170 (bench/http/profile/cg.sh, epoll, 1 worker). Of weft's, the parser "
                  "is about 600 and the response head about 250; the rest is the connection's "
                  "and server's per-request path (serve_request 450, metrics 120, router 125, "
                  "trace span 90, the handler's coroutine). Not its system calls: 1.03 per 16 "
                  "requests (sendmsg 0.98, io_uring_enter 0.06; multishot receives) against "
                  "Asio's 2.97 (recvfrom 1.95: its read loop reads on until a read finds nothing; "
                  "sendto 0.99)",
                  params={"depth": 16})
                 for metric in ("requests_per_s", "total_cpu_ns_per_op")),
)
