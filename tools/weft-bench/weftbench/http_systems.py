"""The HTTP servers the HTTP suites compare (zco-http, http-pipeline, sake-http, http-idle,
http-static): weft's examples/hello_http (examples/file_server for http-static) and the peers of
bench/peers, each on 2 threads/workers, loaded by clients/http-load (ab or wrk; it checks the
responses and marks a run with errors invalid) or clients/http-idle (idle connections)."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .suite import Server, System

PEER_BUILD = "bash bench/peers/build.sh {peers}"
CLIENTS = Path(__file__).resolve().parent.parent / "clients"
CLIENT = str(CLIENTS / "http-load")
IDLE_CLIENT = str(CLIENTS / "http-idle")
HELLO_HTTP = "{bin}/../examples/hello_http"
FILE_SERVER = "{bin}/../examples/file_server"
WEFT_BUILD = "cmake --build build/release --target hello_http"

# The files http-static serves: NAME -> size, byte i of each being i % 256 (http-load checks
# the body). Every server of the suite serves this directory.
STATIC_FILES = {"4k.bin": 4096, "1m.bin": 1 << 20}
STATIC_ROOT = Path(tempfile.gettempdir()) / "weft-bench-static"


def static_root() -> str:
    """STATIC_ROOT with STATIC_FILES in it (written when missing or of the wrong size)."""
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)
    for name, size in STATIC_FILES.items():
        path = STATIC_ROOT / name
        if not path.exists() or path.stat().st_size != size:
            path.write_bytes((bytes(range(256)) * (size // 256 + 1))[:size])
    return str(STATIC_ROOT)

# The https suite's certificate: self-signed, ECDSA P-256 (the key type Let's Encrypt issues
# by default), for 127.0.0.1 and localhost, made with the openssl CLI in a directory of this run
# (tls_certificate) that every TLS server of the suite reads.
TLS_DIR = Path(tempfile.gettempdir()) / f"weft-bench-tls-{os.getpid()}"
TLS_CERT = str(TLS_DIR / "cert.pem")
TLS_KEY = str(TLS_DIR / "key.pem")
OPENSSL_REQ = ("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
               "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", "/CN=localhost",
               "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1")


@contextlib.contextmanager
def tls_certificate(_mode: str):
    """A suite session (Suite.session): TLS_CERT and TLS_KEY made for the suite's run and
    removed after it. Starts no process (yields {}). When openssl fails it says so on stderr;
    the servers then fail to start and every row says why."""
    TLS_DIR.mkdir(parents=True, exist_ok=True)
    try:
        try:
            subprocess.run([*OPENSSL_REQ, "-keyout", TLS_KEY, "-out", TLS_CERT], check=True,
                           capture_output=True, text=True)
        except (OSError, subprocess.CalledProcessError) as e:
            detail = getattr(e, "stderr", "") or str(e)
            print(f"weft-bench: openssl req failed, no certificate: {detail.strip()[-300:]}",
                  file=sys.stderr)
        yield {}
    finally:
        shutil.rmtree(TLS_DIR, ignore_errors=True)


SERVERS_NOTE = ("Servers: 2 threads/workers each (weft: hello_http --workers 2, io_uring, work "
                "stealing; go: net/http, GOMAXPROCS 2; nginx: Debian's nginx-light, 2 worker "
                "processes, access log off, keepalive_requests 1000000; hyper: hyper 1.x on 2 "
                "tokio workers, pipeline_flush on; asio: minimal HTTP/1.1 framing, an "
                "io_context and a SO_REUSEPORT acceptor per thread; beast: Boost.Beast, one "
                "io_context run by 2 threads, a 30 s timeout per read and write). Every one "
                "sets TCP_DEFER_ACCEPT (1 s) on its listener, weft's default and nginx's "
                "`deferred` (minihttp, the pipelining ceiling, cannot: may_minihttp makes its "
                "listener itself); hyper has no header-read timer (no timer given, its "
                "default); the C++ peers are built with clang 16, as weft.")


def http_system(name: str, command: tuple[str, ...], build: str = PEER_BUILD,
                client: str = CLIENT) -> System:
    return System(name, client, extra=("port={port}",), server=Server(command), build=build)


def with_client(system: System, client: str) -> System:
    """The same server loaded by another client (e.g. clients/http-idle)."""
    return dataclasses.replace(system, program=client)


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
