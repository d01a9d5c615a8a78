#!/usr/bin/env bash
# The Autobahn|Testsuite conformance run of weft's WebSocket (RFC 6455):
#   1. its fuzzing client against weft's server (`ws_autobahn server PORT`, an echo server);
#   2. its fuzzing server against weft's client (`ws_autobahn client PORT` runs every case).
# Every case must end OK, NON-STRICT or INFORMATIONAL (behaviour and close behaviour); the
# reports (HTML and index.json) stay in OUT_DIR/server and OUT_DIR/client.
#
#   autobahn.sh WS_AUTOBAHN_BINARY OUT_DIR
#
# The suite is Python 2.7 code (autobahntestsuite on PyPI, Twisted 19): scripts/setup.sh
# installs it under $WEFT_AUTOBAHN_DIR (default ~/.cache/weft/autobahn) for a python2.7 it
# finds or builds with pyenv, and writes that interpreter's path to $WEFT_AUTOBAHN_DIR/python.
# permessage-deflate (RFC 7692): cases 12.* and 13.* send 1,000 messages each, up to 128 KiB,
# through the suite's Python 2 (216 cases: far past the CI budget), so a subset runs ($deflate):
# every test data set of 12.* (JSON, a bitmap, German text, HTML, a PDF) at 4 KiB, and 12.1.11
# (8 KiB messages in 256-byte fragments); every negotiation of 13.* (takeover or not, windows
# of 9 and 15 bits, the fallback offer list) at 16 B, and at 4 KiB those where the message
# outgrows the window: the default offer and the 9-bit windows, with and without takeover.
# 9.*'s 16 MiB messages (9.1.6, 9.2.6) are left out: the 8 MiB ones take the same paths, and
# 9.1.6 alone took 9.5 s of the two runs (Python 2 masking and checking 16 MiB).
# Processes are started here and stopped by their PIDs; ports are free ones the kernel picks.
set -euo pipefail

bin=$1
out=$2
dir=${WEFT_AUTOBAHN_DIR:-$HOME/.cache/weft/autobahn}
if [ ! -f "$dir/python" ]; then
    echo "autobahn.sh: no Autobahn|Testsuite under $dir (run scripts/setup.sh)" >&2
    exit 1
fi
py=$(cat "$dir/python")
site=$("$py" -c "import sys; print('$dir/lib/python%d.%d/site-packages' % sys.version_info[:2])")

wstest=("$py" -c "import site, sys; site.addsitedir('$site'); sys.argv = ['wstest'] + sys.argv[1:]
from autobahntestsuite.wstest import run
run()")

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_for_port() {
    for _ in $(seq 1 300); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    echo "autobahn.sh: nothing listens on port $1" >&2
    return 1
}

pids=()
cleanup() {
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
}
trap cleanup EXIT

cases='"1.*", "2.*", "3.*", "4.*", "5.*", "6.*", "7.*", "9.*", "10.*"'
deflate='"12.1.5", "12.2.5", "12.3.5", "12.4.5", "12.5.5", "12.1.11"'
for i in 1 2 3 4 5 6 7; do  # a pattern with * matches as a prefix ("13.*.1" takes 13.1.1x)
    deflate+=", \"13.$i.1\""
done
deflate+=', "13.1.5", "13.3.5", "13.5.5"'
excluded='"9.1.6", "9.2.6"'

rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

# 1. The fuzzing client against the server.
port=$(free_port)
"$bin" server "$port" >"$out/server.log" 2>&1 &
pids+=($!)
wait_for_port "$port"
cat >"$out/fuzzingclient.json" <<EOF
{"outdir": "$out/server",
 "servers": [{"agent": "weft", "url": "ws://127.0.0.1:$port"}],
 "cases": [$cases, $deflate], "exclude-cases": [$excluded], "exclude-agent-cases": {}}
EOF
(cd "$out" && exec "${wstest[@]}" -m fuzzingclient -s "$out/fuzzingclient.json") >"$out/fuzzingclient.log" 2>&1
cleanup
pids=()

# 2. The fuzzing server against the client.
port=$(free_port)
cat >"$out/fuzzingserver.json" <<EOF
{"url": "ws://127.0.0.1:$port", "outdir": "$out/client",
 "cases": [$cases, $deflate], "exclude-cases": [$excluded], "exclude-agent-cases": {}}
EOF
(cd "$out" && exec "${wstest[@]}" -m fuzzingserver -s "$out/fuzzingserver.json" -u 0) >"$out/fuzzingserver.log" 2>&1 &
pids+=($!)
wait_for_port "$port"
"$bin" client "$port" >"$out/client.log" 2>&1
cleanup
pids=()

# Every case of both reports: OK, NON-STRICT or INFORMATIONAL.
python3 - "$out" <<'EOF'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
passing = {"OK", "NON-STRICT", "INFORMATIONAL"}
failed = 0
for side in ("server", "client"):
    index = out / side / "index.json"
    if not index.exists():
        print(f"autobahn: no report for the {side} ({index})")
        failed += 1
        continue
    cases = json.loads(index.read_text())["weft"]
    bad = {c: r for c, r in cases.items()
           if r["behavior"] not in passing or r["behaviorClose"] not in passing}
    print(f"autobahn {side}: {len(cases)} cases, {len(bad)} failing")
    for c, r in sorted(bad.items()):
        print(f"  {c}: {r['behavior']} / {r['behaviorClose']}")
    failed += len(bad) + (len(cases) == 0)
sys.exit(1 if failed else 0)
EOF
