"""clients/http-idle over TLS: every connection handshakes, is answered and stays held."""
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import unittest
from pathlib import Path

from weftbench import http_systems

CLIENT = Path(__file__).resolve().parent.parent / "clients" / "http-idle"
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!"


class TlsHelloServer:
    """A TLS 1.3 server on a free port that answers each connection's GET / and then holds the
    connection open until stopped (it never closes one itself)."""

    def __init__(self, cert: str, key: str):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self.listener.getsockname()[1]
        self.held = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            try:
                conn = self.ctx.wrap_socket(raw, server_side=True)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                conn.sendall(RESPONSE)
                self.held.append(conn)
            except OSError:
                raw.close()

    def close(self):
        self.listener.close()
        for c in self.held:
            c.close()


class IdleTlsTest(unittest.TestCase):
    def run_client(self, port: int, *extra: str) -> tuple[int, dict]:
        # The client sums the memory of this test's session: it only needs a process to read.
        env = {**os.environ, "WEFT_BENCH_SERVER_SESSION": str(os.getsid(0))}
        proc = subprocess.run([sys.executable, str(CLIENT), "idle", "conns=20", "settle=0.1",
                               f"port={port}", *extra], capture_output=True, text=True,
                              env=env, timeout=60)
        figures = {m["metric"]: m["value"] for m in map(json.loads, proc.stdout.splitlines())}
        return proc.returncode, figures

    def test_every_tls_connection_is_answered_and_held(self):
        with http_systems.tls_certificate("quick"):
            server = TlsHelloServer(http_systems.TLS_CERT, http_systems.TLS_KEY)
            try:
                code, figures = self.run_client(server.port, "tls=1")
            finally:
                server.close()
        self.assertEqual(code, 0)
        self.assertEqual(figures["errors"], 0)
        self.assertEqual(figures["ops"], 20)

    def test_plain_requests_to_a_tls_server_are_errors(self):
        with http_systems.tls_certificate("quick"):
            server = TlsHelloServer(http_systems.TLS_CERT, http_systems.TLS_KEY)
            try:
                code, figures = self.run_client(server.port)
            finally:
                server.close()
        self.assertEqual(code, 3)  # invalid
        # each connection counted twice: no answer, then found closed by the server
        self.assertEqual(figures["errors"], 40)


if __name__ == "__main__":
    unittest.main()
