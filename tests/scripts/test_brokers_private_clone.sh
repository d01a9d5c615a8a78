#!/usr/bin/env bash
# scripts/brokers.sh starts and stops PostgreSQL from a checkout under a directory that only its
# owner may enter (0700, as /root is). As root the server runs as the system user
# weft-postgres, which must never need to enter the checkout. After `stop` the postmaster is
# gone and so is the directory that held its data.
# Usage: tests/scripts/test_brokers_private_clone.sh PORT (a port no other server uses)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
port=${1:?usage: test_brokers_private_clone.sh PORT}
export WEFT_PG_PORT=$port
unset WEFT_BROKERS_DIR WEFT_BROKERS_BIN

private=$(mktemp -d)
chmod 0700 "$private"
clone=$private/weft
brokers=$clone/scripts/brokers.sh
trap '"$brokers" stop postgres >/dev/null 2>&1 || true; rm -rf "$private"' EXIT
mkdir "$clone"
cp -r "$src/scripts" "$clone/"

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

"$brokers" start postgres || fail "start postgres from a clone under a 0700 directory"
state=$clone/.cache/brokers/postgres-$port
pid=$(cat "$state/postgres.pid")
run=$(cat "$state/run-dir")
kill -0 "$pid" || fail "the postmaster ($pid) does not run"
"${WEFT_PG_BIN:-/usr/lib/postgresql/15/bin}/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres ||
    fail "the server does not accept connections on 127.0.0.1:$port"

"$brokers" stop postgres || fail "stop postgres"
! kill -0 "$pid" 2>/dev/null || fail "the postmaster ($pid) still runs after stop"
[ ! -e "$run" ] || fail "stop left the server's directory $run"
[ ! -e "$state/postgres.pid" ] || fail "stop left the PID file"
echo "ok: started, answered and stopped from a clone under a 0700 directory"
