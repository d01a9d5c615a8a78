"""Static files: wrk -t2 -c100 GETs of a 4 KiB and a 1 MiB file, weft's examples/file_server
(sendfile(2) per response) against nginx (sendfile on) and Go's http.FileServer."""
from weftbench.http_systems import FILE_SERVER, http_system, static_root
from weftbench.suite import (HIGHER, PAIR_CPU_METRICS, PAIR_CPU_ROWS, Metric, Ratio, Scenario,
                             Suite, Target)

ROOT = static_root()
ROWS = ("requests_per_s", *PAIR_CPU_ROWS, "p99_ms", "errors")
SYSTEMS = (
    http_system("weft", (FILE_SERVER, "--root", ROOT, "--port", "{port}", "--workers", "2"),
                "cmake --build build/release --target file_server"),
    http_system("nginx", ("{peers}/nginx-hello", "-p", "{port}", "-t", "2", "-r", ROOT)),
    http_system("go", ("{peers}/go-fileserver", "-p", "{port}", "-t", "2", "-r", ROOT)),
)
PEERS = tuple(s.name for s in SYSTEMS if s.name != "weft")


def wrk(name, size, quick_d=1):
    return Scenario("wrk", {"t": 2, "c": 100, "d": 5, "path": f"/{name}", "size": size}, ROWS,
                    quick={"d": quick_d},
                    targets={"requests_per_s": Target(ratios=(Ratio(PEERS, 0.9),)),
                             "total_cpu_ns_per_op": Target(ratios=(Ratio(PEERS, 1.0),)),
                             "errors": Target(at_most=0)})


SUITE = Suite(
    name="http-static",
    title="HTTP static files: 4 KiB and 1 MiB at 100 connections (wrk)",
    seed_file=None,
    notes="No seed has this table. wrk -t2 -c100 -d5s (quick: -d1s for 4 KiB, -d3s for 1 MiB, "
          "whose first second catches nginx's window-limited start) GETs one file over "
          "keep-alive connections; the files (byte i = i % 256) are written to " + ROOT +
          " and every server serves that directory; http-load checks one GET's status and "
          "every byte before the load, wrk counts non-2xx. Servers, 2 threads/workers each: "
          "weft's examples/file_server (realpath, open and fstat per request, the body sent "
          "with sendfile(2)); nginx (Debian's nginx-light, bench/peers/nginx/static.conf: "
          "sendfile on, tcp_nopush on, open_file_cache off, access log off); Go's "
          "http.FileServer (bench/peers/go/cmd/fileserver; net/http sends an *os.File with "
          "sendfile). The 1 MiB rows are bound by copying the file into loopback socket "
          "buffers, which the kernel charges to whichever side triggers it. Targets: weft "
          ">= 0.9x the best peer's requests/s at no more CPU per request, server plus "
          "client (total_cpu_ns_per_op), than any peer. A run whose "
          "responses had any error is left out of the medians.",
    systems=SYSTEMS,
    metrics={
        "requests_per_s": Metric("req/s", HIGHER),
        "mean_latency_ms": Metric("ms"),
        "p99_ms": Metric("ms"),
        **PAIR_CPU_METRICS,
        "errors": Metric("count"),
        "server_rss_kib": Metric("KiB"),
    },
    # 1 MiB in quick mode runs 3 s, not 1: in its first second nginx's connections are
    # window-limited (TCP pacing on lo: the data waits for the client's ACKs, which wrk's
    # process pays for), so a 1 s run reads nginx's server CPU per response at its lowest
    # (115 µs at 1 s, 219 at 3 s, 254 at 6 s) while weft's stays at 150-167.
    scenarios=(wrk("4k.bin", 4096), wrk("1m.bin", 1 << 20, quick_d=3)),
    rounds={"quick": 3, "full": 5},
    unplotted=("ops", "errors"),
    timeout=120.0,
)
