"""Idle keep-alive connections: 10,000 connections that each sent one GET / and then idle;
the server's resident memory per connection, on weft's examples/hello_http and every HTTP peer."""
from weftbench.http_systems import IDLE_CLIENT, PEER_NAMES, PEERS, WEFT, with_client
from weftbench.suite import (PAIR_CPU_METRICS, PAIR_CPU_ROWS, Limit, Metric, Ratio, Scenario,
                             Suite, Target)

ROWS = ("rss_per_conn_bytes", "rss_per_conn_total_bytes", "rss_held_kib", *PAIR_CPU_ROWS,
        "errors")

SUITE = Suite(
    name="http-idle",
    title="HTTP idle connections: server memory per idle keep-alive connection (10,000)",
    seed_file=None,
    notes="No seed has this table. clients/http-idle reads the server's resident memory "
          "(VmRSS of every process holding its listening socket, summed: nginx's master and "
          "workers), opens 10,000 connections in batches of 256, sends one GET / on each and "
          "reads its 200 \"Hello, World!\", leaves them idle for `settle` seconds, reads the "
          "memory again and checks the server closed none. rss_per_conn_bytes is what each "
          "further connection adds: (RSS with 10,000 held - RSS with the first 2,000 held) / "
          "8,000, leaving out what a server makes resident once whatever the count (a "
          "receive-buffer pool, a thread's caches); rss_per_conn_total_bytes = (RSS held - "
          "RSS before any connection) / 10,000 includes it. Kernel socket memory is not in "
          "RSS and not counted. "
          "server_cpu_ns_per_op is the server's CPU per connection (accept, one request, the "
          "client's reset). The harness raises RLIMIT_NOFILE to its hard limit for every "
          "server; the client checks that the ephemeral port range holds the connections "
          "(28,232 ports here; it closes with a reset, so no TIME_WAIT is left for the next "
          "run). Servers as in zco-http, 2 threads/workers each (weft: hello_http "
          "--workers 2, io_uring). The memory is every process of the server's cgroup "
          "(nginx-hello: its launcher script, nginx's master and workers), as server_rss_kib. "
          "Targets: weft <= 2 KiB per idle connection, <= 0.5x hyper's and at most every "
          "peer's.",
    systems=tuple(with_client(s, IDLE_CLIENT) for s in (WEFT, *PEERS)),
    metrics={
        "rss_per_conn_bytes": Metric("B"),
        "rss_per_conn_total_bytes": Metric("B"),
        "rss_held_kib": Metric("KiB"),
        **PAIR_CPU_METRICS,
        "errors": Metric("count"),
        "server_rss_kib": Metric("KiB"),
        "ephemeral_ports": Metric("ports"),
    },
    scenarios=(
        Scenario("idle", {"conns": 10000, "settle": 1}, ROWS, quick={"settle": 0.5},
                 targets={"rss_per_conn_bytes": Target(at_most=2048,
                                                       ratios=(Ratio(("hyper",), 0.5),
                                                               Ratio(PEER_NAMES, 1.0))),
                          "errors": Target(at_most=0)}),
    ),
    rounds={"quick": 3, "full": 5},
    unplotted=("ops", "errors", "ephemeral_ports", "server_rss_kib"),
    timeout=120.0,
    limits=(Limit("idle", "rss_per_conn_bytes", "an idle weft connection is a task waiting in a "
                  "receive: three coroutine frames and the multishot receive's queue. With g++ "
                  "12 the connection's task (its stream, state and loop) 768 B, the receive 384, "
                  "the watchdog 192 and the queue 224: 1,568 B (tests/http/test_idle_memory.cpp "
                  "reads 1,571 B per connection); with clang 16 640 + 320 + 128 + 224 = 1,312 B, "
                  "about 1,350 B of RSS per connection with malloc's rounding. nginx keeps an "
                  "idle connection in a record with no stack, which weft matches only with a "
                  "connection that holds no frame while idle (docs/design/http-connection.md, "
                  "\"Idle connections hold little\")"),),
)
