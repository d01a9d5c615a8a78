"""HTTPS: keep-alive hello over TLS 1.3 at 100 and 1,000 connections, a TLS handshake per request,
memory per idle TLS connection and a 1 MiB file over TLS; weft's bench/http/tls_hello against
nginx (ssl), Go's crypto/tls, hyper with tokio-rustls and Asio's ssl::stream."""
from weftbench.http_systems import TLS_CERT, TLS_KEY, http_system, static_root, tls_certificate
from weftbench.suite import (HIGHER, PAIR_CPU_METRICS, PAIR_CPU_ROWS, Limit, Metric, Ratio,
                             Scenario, Suite, Target)

TLS = ("--cert", TLS_CERT, "--key", TLS_KEY)
ROOT = static_root()
SYSTEMS = (
    http_system("weft", ("{bin}/tls_hello", "--port", "{port}", "--workers", "2", *TLS),
                "cmake --build build/release --target tls_hello"),
    http_system("nginx", ("{peers}/nginx-hello", "-p", "{port}", "-t", "2", "-c", TLS_CERT,
                          "-k", TLS_KEY)),
    http_system("go", ("{peers}/go-httphello", "-p", "{port}", "-t", "2", "-cert", TLS_CERT,
                       "-key", TLS_KEY)),
    http_system("hyper", ("{peers}/tokio-hyper", "-p", "{port}", "-t", "2", *TLS)),
    http_system("asio", ("{peers}/asio-http", "-p", "{port}", "-t", "2", "--per-core", *TLS)),
)
PEERS = tuple(s.name for s in SYSTEMS if s.name != "weft")
ROWS = ("requests_per_s", "mean_latency_ms", "p99_ms", *PAIR_CPU_ROWS, "errors")
IDLE_ROWS = ("rss_per_conn_bytes", "rss_per_conn_total_bytes", "rss_held_kib", *PAIR_CPU_ROWS,
             "errors")
AT_LEAST_BEST = Target(ratios=(Ratio(PEERS, 1.0),))
AT_MOST_BEST = Target(ratios=(Ratio(PEERS, 1.0),))
NO_ERRORS = Target(at_most=0)


def keep_alive(c, quick_d):
    return Scenario("wrk", {"t": 2, "c": c, "d": 5, "tls": 1}, ROWS, quick={"d": quick_d},
                    targets={"server_cpu_ns_per_op": AT_MOST_BEST,
                             "total_cpu_ns_per_op": AT_MOST_BEST, "errors": NO_ERRORS})


SUITE = Suite(
    name="https",
    title="HTTPS: keep-alive hello over TLS 1.3 (100 / 1,000 connections), a handshake per "
          "request, idle TLS connections, 1 MiB over TLS",
    seed_file=None,
    notes="No seed has this table. Every server serves TLS with the same self-signed ECDSA "
          "P-256 certificate, made with the openssl CLI for the run; every client negotiates "
          "TLS 1.3 from OpenSSL's default client offer (wrk, Python's ssl: AES-256-GCM first, "
          "X25519) and none verifies the certificate. Servers, 2 threads/workers each: "
          "weft's bench/http/tls_hello (io_uring, work stealing, weft's tls_context defaults: "
          "TLS 1.2 minimum, session tickets, ALPN http/1.1); nginx (Debian's nginx-light, "
          "`listen ... ssl`, ssl_protocols TLSv1.2 TLSv1.3, every other ssl_* directive at its "
          "default, 2 worker processes); Go's net/http ServeTLS (crypto/tls at its defaults, "
          "GOMAXPROCS 2); hyper 1.x with tokio-rustls 0.26 (rustls's default provider, ALPN "
          "http/1.1) on 2 tokio workers; Asio's ssl::stream (OpenSSL, an io_context and a "
          "SO_REUSEPORT acceptor per thread, clang 16). Rows: wrk -t2 keep-alive GET / at "
          "c=100 and c=1000 (-d5s; quick: -d1s, -d2s at c=1000, where the 1,000 handshakes "
          "take part of the first second); `wrk ... close=1`: wrk -t2 -c100 with "
          "`Connection: close` on every request, so every request opens a new connection and "
          "makes a full TLS 1.3 handshake (wrk keeps no session to resume): requests_per_s is "
          "new TLS connections a second and the CPU rows are per handshake; `idle`: "
          "clients/http-idle over TLS 1.3 (10,000 connections; quick 1,000), the memory per "
          "idle TLS connection summed over the server's cgroup; the 1 MiB file (wrk -t2 -c100 "
          "GET /1m.bin, -d5s, quick -d3s) from weft's tls_hello --root (the file opened per "
          "request, read and encrypted: no kTLS here; its -r ROOT) and nginx (-r ROOT: static.conf, sendfile on, "
          "which TLS without kTLS turns into reads). CPU: the server's (its cgroup), the "
          "client's (wrk's own) and their total per request. Targets: server and total CPU "
          "per request and per handshake at most the best peer's; handshakes a second at "
          "least the best peer's (nginx's among them); idle TLS memory at most half of "
          "hyper's and at most every peer's; 1 MiB: requests/s at least 0.9x nginx's at no "
          "more total CPU.",
    systems=SYSTEMS,
    metrics={
        "requests_per_s": Metric("req/s", HIGHER),
        "mean_latency_ms": Metric("ms"),
        "p99_ms": Metric("ms"),
        **PAIR_CPU_METRICS,
        "rss_per_conn_bytes": Metric("B"),
        "rss_per_conn_total_bytes": Metric("B"),
        "rss_held_kib": Metric("KiB"),
        "errors": Metric("count"),
        "server_rss_kib": Metric("KiB"),
        "ephemeral_ports": Metric("ports"),
        "tcp_tw_reuse": Metric(""),
        "time_wait_sockets": Metric("sockets"),
    },
    scenarios=(
        keep_alive(100, 1),
        keep_alive(1000, 2),
        Scenario("wrk", {"t": 2, "c": 100, "d": 5, "tls": 1, "close": 1}, ROWS, quick={"d": 1},
                 targets={"requests_per_s": AT_LEAST_BEST, "server_cpu_ns_per_op": AT_MOST_BEST,
                          "total_cpu_ns_per_op": AT_MOST_BEST, "errors": NO_ERRORS}),
        Scenario("idle", {"conns": 10000, "settle": 1, "tls": 1}, IDLE_ROWS,
                 quick={"conns": 1000, "settle": 0.5},
                 targets={"rss_per_conn_bytes": Target(ratios=(Ratio(("hyper",), 0.5),
                                                               Ratio(PEERS, 1.0))),
                          "errors": NO_ERRORS}),
        # weft's tls_hello and nginx-hello both take -r ROOT: serve ROOT's files instead
        Scenario("wrk", {"t": 2, "c": 100, "d": 5, "tls": 1, "path": "/1m.bin", "size": 1 << 20},
                 ROWS, quick={"d": 3}, only=("weft", "nginx"), server_args=("-r", ROOT),
                 targets={"requests_per_s": Target(ratios=(Ratio(("nginx",), 0.9),)),
                          "total_cpu_ns_per_op": Target(ratios=(Ratio(("nginx",), 1.0),)),
                          "errors": NO_ERRORS}),
    ),
    rounds={"quick": 2, "full": 5},
    timeout=180.0,
    session=tls_certificate,
    unplotted=("ops", "errors", "ephemeral_ports", "tcp_tw_reuse", "time_wait_sockets",
               "server_rss_kib"),
    # what bounds the handshake rows (docs/guide/tls.md, "What a handshake costs")
    limits=tuple(
        Limit("wrk", metric, "OpenSSL 3.0: of the server's 2.8 million instructions a full "
              "TLS 1.3 handshake, 86% are libcrypto's and 8.7% the libc calls it makes, weft's "
              "0.65% (callgrind); nginx on the same OpenSSL is level with weft, hyper on rustls "
              "at about two thirds", params={"close": 1})
        for metric in ("server_cpu_ns_per_op", "total_cpu_ns_per_op")),
)
