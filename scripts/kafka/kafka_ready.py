#!/usr/bin/env python3
"""Exit 0 when the Kafka broker at HOST:PORT answers a Metadata request listing itself.

Usage: kafka_ready.py HOST PORT [NODE_ID]

Speaks the wire protocol directly (ApiVersions v0, then Metadata v4), so scripts/brokers.sh
needs neither a JVM start nor a client library to tell that the broker is up: an accepted
connection alone is not enough (the socket opens before the broker has its metadata).
"""
import socket
import struct
import sys


def request(sock, api_key, version, corr, body):
    client = b"weft-brokers"
    head = struct.pack(">hhih", api_key, version, corr, len(client)) + client
    msg = head + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    resp = recv_exact(sock, size)
    if struct.unpack(">i", resp[:4])[0] != corr:
        raise RuntimeError("correlation id mismatch")
    return resp[4:]


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise RuntimeError("connection closed")
        buf += chunk
    return buf


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    node_id = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    with socket.create_connection((host, port), timeout=2) as sock:
        sock.settimeout(2)
        # ApiVersions v0: error_code, [api_key, min_version, max_version]
        r = request(sock, 18, 0, 1, b"")
        err, n = struct.unpack(">hi", r[:6])
        if err != 0:
            raise RuntimeError(f"ApiVersions error {err}")
        versions = {}
        for i in range(n):
            k, lo, hi = struct.unpack(">hhh", r[6 + 6 * i:12 + 6 * i])
            versions[k] = (lo, hi)
        lo, hi = versions.get(3, (99, -1))
        if not lo <= 4 <= hi:
            raise RuntimeError(f"Metadata v4 not offered ({lo}..{hi})")
        # Metadata v4: topics = [] (none), allow_auto_topic_creation = false
        r = request(sock, 3, 4, 2, struct.pack(">ib", 0, 0))
        _throttle, brokers = struct.unpack(">ii", r[:8])
        pos = 8
        ids = []
        for _ in range(brokers):
            nid, hlen = struct.unpack(">ih", r[pos:pos + 6])
            pos += 6 + hlen + 4
            rlen = struct.unpack(">h", r[pos:pos + 2])[0]
            pos += 2 + max(rlen, 0)
            ids.append(nid)
        if node_id not in ids:
            raise RuntimeError(f"broker {node_id} not in metadata ({ids})")


if __name__ == "__main__":
    try:
        main()
    except (OSError, RuntimeError, struct.error) as e:
        print(f"kafka_ready: {e}", file=sys.stderr)
        sys.exit(1)
