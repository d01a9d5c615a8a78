"""WebSocket echo: a 64-byte text message and its echo, over and over, on 100 and 1,000
connections; weft's bench/http/ws_echo against tokio-tungstenite and Go's gorilla/websocket,
every server loaded by the same client (bench/peers/go/cmd/wsload)."""
from weftbench.suite import (HIGHER, PAIR_CPU_METRICS, PAIR_CPU_ROWS, Metric, Ratio, Scenario,
                             Server, Suite, System, Target)

PEER_BUILD = "bash bench/peers/build.sh {peers}"
CLIENT = "{peers}/go-wsload"
PEER_NAMES = ("tungstenite", "gorilla")


def system(name, cmd, build=PEER_BUILD):
    return System(name, CLIENT, extra=("port={port}",), server=Server(tuple(cmd)), build=build)


SUITE = Suite(
    name="websocket",
    title="WebSocket echo: 64-byte messages at 100 / 1,000 connections",
    seed_file=None,
    notes="No seed has this table. go-wsload (gorilla/websocket, a goroutine per connection) "
          "opens C connections to /echo, then each sends a 64-byte text message (masked, as "
          "every client's) and waits for its echo, for d seconds; messages_per_s counts echoes, "
          "and the harness adds the server's CPU per message. Servers on 2 threads/workers: "
          "weft's bench/http/ws_echo (io_uring, work stealing), tokio-tungstenite 0.24 on 2 "
          "tokio workers, gorilla/websocket 1.5 on net/http with GOMAXPROCS 2. Target: weft's "
          "server CPU per message at most the best peer's.",
    rounds={"quick": 3, "full": 5},
    systems=(
        system("weft", ("{bin}/ws_echo", "--port", "{port}", "--workers", "2"),
               build="cmake --build build/release --target ws_echo"),
        system("tungstenite", ("{peers}/tungstenite-echo", "-p", "{port}")),
        system("gorilla", ("{peers}/go-wsecho", "-p", "{port}")),
    ),
    metrics={
        "messages_per_s": Metric("msg/s", HIGHER),
        **PAIR_CPU_METRICS,
        "p99_us": Metric("us"),
        "errors": Metric("count"),
        "server_rss_kib": Metric("KiB"),
    },
    scenarios=tuple(
        Scenario("echo", {"c": c, "s": 64, "d": 5}, ("messages_per_s", *PAIR_CPU_ROWS, "p99_us",
                                                     "errors"),
                 quick={"d": 1},
                 targets={"server_cpu_ns_per_op": Target(ratios=(Ratio(PEER_NAMES, 1.0),)),
                          "errors": Target(at_most=0)})
        for c in (100, 1000)),
    unplotted=("ops", "errors", "server_rss_kib"),
)
