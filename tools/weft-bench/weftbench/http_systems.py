"""The HTTP servers the HTTP suites compare (zco-http, http-pipeline, sake-http): weft's
examples/hello_http and the peers of bench/peers, each on 2 threads/workers, all loaded by
clients/http-load (ab or wrk; it checks the responses and marks a run with errors invalid)."""
from __future__ import annotations

from pathlib import Path

from .suite import Server, System

PEER_BUILD = "bash bench/peers/build.sh {peers}"
CLIENT = str(Path(__file__).resolve().parent.parent / "clients" / "http-load")
HELLO_HTTP = "{bin}/../examples/hello_http"
WEFT_BUILD = "cmake --build build/release --target hello_http"

SERVERS_NOTE = ("Servers: 2 threads/workers each (weft: hello_http --workers 2, io_uring, work "
                "stealing; go: net/http, GOMAXPROCS 2; nginx: Debian's nginx-light, 2 worker "
                "processes, access log off, keepalive_requests 1000000; hyper: hyper 1.x on 2 "
                "tokio workers, pipeline_flush on; asio: minimal HTTP/1.1 framing, an "
                "io_context and a SO_REUSEPORT acceptor per thread; beast: Boost.Beast, one "
                "io_context run by 2 threads, a 30 s timeout per read and write).")


def http_system(name: str, command: tuple[str, ...], build: str = PEER_BUILD) -> System:
    return System(name, CLIENT, extra=("port={port}",), server=Server(command), build=build)


WEFT = http_system("weft", (HELLO_HTTP, "--port", "{port}", "--workers", "2"), WEFT_BUILD)
PEERS = (
    http_system("go", ("{peers}/go-httphello", "-p", "{port}", "-t", "2")),
    http_system("nginx", ("{peers}/nginx-hello", "-p", "{port}", "-t", "2")),
    http_system("hyper", ("{peers}/tokio-hyper", "-p", "{port}", "-t", "2")),
    http_system("asio", ("{peers}/asio-http", "-p", "{port}", "-t", "2", "--per-core")),
    http_system("beast", ("{peers}/beast-http", "-p", "{port}", "-t", "2")),
)
PEER_NAMES = tuple(p.name for p in PEERS)
# The pipelining ceiling, for http-pipeline only: may_minihttp answers HTTP/1.1 keep-alive and
# nothing else (an HTTP/1.0 or Connection: close client waits forever), so ab cannot load it.
CEILING = http_system("minihttp", ("{peers}/minihttp", "-p", "{port}", "-t", "2"))

# weft's other configurations, as rows of weft alone (Scenario keyword arguments plus the
# param that names the row): the epoll backend, thread-per-core (no stealing, a SO_REUSEPORT
# listener per worker) on io_uring, and both.
WEFT_VARIANTS = (
    ({"weft": "epoll"}, {"server_env": {"WEFT_IO_BACKEND": "epoll"}}),
    ({"weft": "per-core"}, {"server_args": ("--per-core",)}),
    ({"weft": "epoll+per-core"}, {"server_env": {"WEFT_IO_BACKEND": "epoll"},
                                  "server_args": ("--per-core",)}),
)
