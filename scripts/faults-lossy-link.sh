#!/usr/bin/env bash
# weft's echo and HTTP servers over a lossy link: two network namespaces made for this run (a
# server's and a client's, unique names) joined by a veth pair, each dropping 5% of the packets
# it receives (iptables statistic; netem is not available here). Losses make TCP retransmit and
# deliver segments out of order (a later segment before the resent one): the transfers must
# still complete byte-exact. Both IO backends. Nothing leaves the two namespaces; both are
# deleted on exit, whatever happens.
#
#   scripts/faults-lossy-link.sh BENCH_SERVER HELLO_HTTP
#
# BENCH_SERVER: bench/io/bench_server (echo), HELLO_HTTP: examples/hello_http (GET /, POST /echo).
# Exit 0: every transfer arrived intact, and the link did lose packets (the drop rules counted
# some, TCP retransmitted, the receivers queued out-of-order segments). Exit 77 (skipped, with
# the reason on stderr): not root, or no ip / iptables / statistic match, or the kernel refuses
# namespaces. Anything else: a failure, named on stderr.
# WEFT_LOSS (default 0.05): the drop probability per packet and direction.
set -euo pipefail

bench_server=${1:?usage: faults-lossy-link.sh BENCH_SERVER HELLO_HTTP}
hello_http=${2:?usage: faults-lossy-link.sh BENCH_SERVER HELLO_HTTP}
loss=${WEFT_LOSS:-0.05}

skip() {
    echo "faults-lossy-link: SKIPPED: $*" >&2
    exit 77
}
fail() {
    echo "faults-lossy-link: FAILED: $*" >&2
    exit 1
}

[[ $(id -u) == 0 ]] || skip "needs root (network namespaces, iptables)"
command -v ip >/dev/null || skip "no ip (iproute2)"
command -v iptables >/dev/null || skip "no iptables (apt-get install iptables)"
command -v curl >/dev/null || skip "no curl"
py=$(command -v python3) || skip "no python3"
[[ -x $bench_server && -x $hello_http ]] || fail "not built: $bench_server $hello_http"

id=$$-$RANDOM
srv=weft-loss-srv-$id
cli=weft-loss-cli-$id
work=$(mktemp -d /tmp/weft-lossy-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    ip netns del "$srv" 2>/dev/null || true
    ip netns del "$cli" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$srv" 2>"$work/err" || skip "the kernel refuses network namespaces: $(cat "$work/err")"
ip netns add "$cli" 2>"$work/err" || skip "the kernel refuses network namespaces: $(cat "$work/err")"
# The veth's ends are created inside the namespaces: no interface ever appears in the host's.
ip -n "$srv" link add eth0 type veth peer name eth0 netns "$cli" 2>"$work/err" ||
    skip "no veth: $(cat "$work/err")"
ip -n "$srv" addr add 10.77.0.1/24 dev eth0
ip -n "$cli" addr add 10.77.0.2/24 dev eth0
for ns in "$srv" "$cli"; do
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    ip netns exec "$ns" iptables -A INPUT -i eth0 -m statistic --mode random \
        --probability "$loss" -j DROP 2>"$work/err" ||
        skip "iptables statistic match refused: $(cat "$work/err")"
done

# Counters of one namespace: packets its drop rule took, and TCP's retransmissions and
# out-of-order segments queued (from /proc/net/{snmp,netstat} as seen from inside it).
dropped() { ip netns exec "$1" iptables -L INPUT -v -x -n | awk '/DROP/ {print $1}'; }
netstat_field() {  # NS FILE PREFIX FIELD
    ip netns exec "$1" cat "/proc/net/$2" | awk -v p="$3:" -v f="$4" '
        $1 == p && !h { for (i = 2; i <= NF; i++) idx[$i] = i; h = 1; next }
        $1 == p && h { print $idx[f]; exit }'
}

# Waits until something in namespace $1 listens on TCP port $2.
wait_listening() {
    for _ in $(seq 1 100); do
        if ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q .; then
            return 0
        fi
        sleep 0.1
    done
    fail "nothing listens on port $2 in $1"
}

# The echo check: 4 connections at once, each sending 2 MiB of random bytes while it reads the
# echo back; the bytes back must be the bytes sent.
cat >"$work/echo_client.py" <<'EOF'
import hashlib, os, socket, sys, threading
host, port, size, conns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
failures = []
def one(k):
    data = os.urandom(size)
    s = socket.create_connection((host, port), timeout=120)
    def send():
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=send)
    t.start()
    got = bytearray()
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    t.join()
    s.close()
    if hashlib.sha256(got).digest() != hashlib.sha256(data).digest():
        failures.append(f"connection {k}: {len(got)} bytes back of {size}, contents differ")
ts = [threading.Thread(target=one, args=(k,)) for k in range(conns)]
for t in ts: t.start()
for t in ts: t.join()
for f in failures: print(f, file=sys.stderr)
print(f"echo: {conns} x {size} bytes, {len(failures)} failed")
sys.exit(1 if failures else 0)
EOF

echo_round() {  # BACKEND PORT
    local backend=$1 port=$2
    ip netns exec "$srv" "$bench_server" -h 10.77.0.1 -p "$port" -t 2 -b "$backend" \
        >"$work/echo-$backend.log" 2>&1 &
    pids+=($!)
    local server=$!
    wait_listening "$srv" "$port"
    timeout 300 ip netns exec "$cli" "$py" "$work/echo_client.py" 10.77.0.1 "$port" \
        $((2 << 20)) 4 || fail "echo ($backend): transfer failed or incomplete"
    kill "$server"
    wait "$server" 2>/dev/null || true
}

http_round() {  # BACKEND PORT
    local backend=$1 port=$2
    WEFT_IO_BACKEND=$backend ip netns exec "$srv" "$hello_http" --port "$port" --workers 2 \
        >"$work/http-$backend.log" 2>&1 &
    pids+=($!)
    local server=$!
    wait_listening "$srv" "$port"
    local url=http://10.77.0.1:$port
    # POST /echo of 900 KiB bodies (the server's body limit is 1 MiB): 4 on one keep-alive
    # connection (curl --next reuses it), 4 on new connections.
    head -c $((900 << 10)) /dev/urandom >"$work/body"
    local args=()
    for k in 1 2 3 4; do
        args+=(--data-binary "@$work/body" -o "$work/ka-$k" "$url/echo" --next)
    done
    timeout 300 ip netns exec "$cli" curl -sS --fail --max-time 240 "${args[@]}" \
        -o "$work/ka-get" "$url/" || fail "http ($backend): keep-alive requests failed"
    for k in 1 2 3 4; do
        cmp -s "$work/body" "$work/ka-$k" || fail "http ($backend): keep-alive echo $k differs"
        timeout 300 ip netns exec "$cli" curl -sS --fail --max-time 240 \
            --data-binary "@$work/body" -o "$work/new-$k" "$url/echo" ||
            fail "http ($backend): request $k on a new connection failed"
        cmp -s "$work/body" "$work/new-$k" || fail "http ($backend): echo $k differs"
    done
    [[ $(cat "$work/ka-get") == "Hello, World!" ]] || fail "http ($backend): GET / body"
    echo "http: 8 x 900 KiB POST /echo (4 keep-alive, 4 new connections) and GET /, intact"
    kill "$server"
    wait "$server" 2>/dev/null || true
}

port=7000
for backend in io_uring epoll; do
    echo "== $backend"
    echo_round "$backend" $((port++))
    http_round "$backend" $((port++))
done

drops=$(($(dropped "$srv") + $(dropped "$cli")))
retrans=$(($(netstat_field "$srv" snmp Tcp RetransSegs) + $(netstat_field "$cli" snmp Tcp RetransSegs)))
ofo=$(($(netstat_field "$srv" netstat TcpExt TCPOFOQueue) + $(netstat_field "$cli" netstat TcpExt TCPOFOQueue)))
echo "link: $drops packets dropped (p=$loss each way), $retrans segments retransmitted," \
    "$ofo segments queued out of order"
((drops > 0)) || fail "no packet was dropped: the link was not lossy"
((retrans > 0)) || fail "no retransmission: the losses were not exercised"
((ofo > 0)) || fail "no out-of-order segment: reordering was not exercised"
echo "faults-lossy-link: passed (io_uring and epoll, echo and HTTP)"
