"""weft's HTTP/1.1 request parser on three request shapes, each scan path: the Google Benchmark
bench/http/bm_parser run through clients/gbench-parse."""
from pathlib import Path

from weftbench.suite import HIGHER, Metric, Scenario, Suite, System

CLIENT = str(Path(__file__).resolve().parent.parent / "clients" / "gbench-parse")
SHAPES = ("wrk", "browser", "cookie_4k")
PATHS = ("avx2", "sse2", "scalar")

SUITE = Suite(
    name="http-parse",
    title="HTTP request parsing: ns per request and GB/s (Google Benchmark, bm_parser)",
    seed_file=None,
    notes="No seed has this table and no peer is measured here. bench/http/bm_parser parses "
          "the request shapes of tests/http/sample_requests.hpp over and over: wrk (the "
          "40-byte GET wrk sends), browser (a ~700-byte browser GET) and cookie_4k (a 4 KiB "
          "request heavy with cookies), on each scan path of the field scanner (avx2, sse2, "
          "scalar: 8 bytes at a time in a word). ns_per_request is CPU time per parse, "
          "gb_per_s request bytes per CPU second (10^9 B). --benchmark_min_time 0.5 s "
          "(quick 0.1 s) per run.",
    systems=(System("weft", CLIENT, extra=("bin={bin}",),
                    build="cmake --build build/release --target bm_parser"),),
    metrics={"ns_per_request": Metric("ns"), "gb_per_s": Metric("GB/s", HIGHER),
             "request_bytes": Metric("B")},
    scenarios=tuple(Scenario("parse", {"shape": shape, "path": path, "min_time": 0.5},
                             ("ns_per_request", "gb_per_s"), quick={"min_time": 0.1})
                    for shape in SHAPES for path in PATHS),
    rounds={"quick": 3, "full": 5},
    unplotted=("request_bytes",),
    timeout=60.0,
)
