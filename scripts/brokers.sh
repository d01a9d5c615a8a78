#!/usr/bin/env bash
# Starts, stops and reports the message brokers weft::bus's integration tests run against.
# Usage: scripts/brokers.sh start|stop|status [nats|kafka|all]      (default: all)
#
# nats: nats-server (pinned below) installed by `go install` into .cache/bin (idempotent), run
#   with JetStream on 127.0.0.1:$WEFT_NATS_PORT (default 14222), its store in
#   $WEFT_BROKERS_DIR/nats/store (default .cache/brokers), log and PID file beside it, memory
#   bounded by GOMEMLIMIT and the JetStream limits below. `start` returns once the server
#   accepts connections and its JetStream answers (its /healthz on the monitoring port).
#   Stopped by its PID, never by name.
# kafka: not yet (a KRaft broker from Maven Central jars comes with the Kafka backend).
#
# Exit status: 0 when every component asked for did what was asked; non-zero with a message
# (and the broker's log) when one could not start. A second `start` of a running broker is a
# no-op.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

nats_version=v2.15.2
bin_dir=${WEFT_BROKERS_BIN:-$root/.cache/bin}
state_dir=${WEFT_BROKERS_DIR:-$root/.cache/brokers}
nats_port=${WEFT_NATS_PORT:-14222}
nats_http_port=${WEFT_NATS_HTTP_PORT:-$((nats_port + 1))}
nats_dir=$state_dir/nats-$nats_port
nats_pid=$nats_dir/nats-server.pid
nats_log=$nats_dir/nats-server.log

die() {
    echo "brokers: $*" >&2
    exit 1
}

pid_alive() {  # pid file -> 0 if that process runs
    [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

nats_install() {
    local bin=$bin_dir/nats-server
    if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -q "${nats_version#v}"; then
        return 0
    fi
    command -v go >/dev/null || die "nats: go is not installed (needed to install nats-server $nats_version)"
    echo "brokers: installing nats-server $nats_version into $bin_dir"
    mkdir -p "$bin_dir"
    GOBIN=$bin_dir go install "github.com/nats-io/nats-server/v2@$nats_version" ||
        die "nats: go install of nats-server $nats_version failed"
}

nats_healthy() {
    # JetStream enabled and ready; curl when present, else bash's /dev/tcp for the port only.
    if command -v curl >/dev/null; then
        curl -fs "http://127.0.0.1:$nats_http_port/healthz?js-enabled-only=true" >/dev/null 2>&1
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$nats_port") 2>/dev/null
    fi
}

nats_start() {
    if pid_alive "$nats_pid"; then
        echo "brokers: nats already running (pid $(cat "$nats_pid"), port $nats_port)"
        return 0
    fi
    nats_install
    mkdir -p "$nats_dir/store"
    rm -f "$nats_pid"
    [ -f "$nats_log" ] && mv -f "$nats_log" "$nats_log.prev"  # the tail on failure: this run's
    # Bounded: the Go heap by GOMEMLIMIT, JetStream's memory and file storage by its limits
    # (settable only in a configuration file; the flags after -c override the rest of it).
    printf 'jetstream {\n    max_memory_store: 256MB\n    max_file_store: 2GB\n}\n' \
        >"$nats_dir/nats-server.conf"
    GOMEMLIMIT=${WEFT_NATS_MEMLIMIT:-512MiB} setsid "$bin_dir/nats-server" \
        -c "$nats_dir/nats-server.conf" \
        -js -sd "$nats_dir/store" -p "$nats_port" -a 127.0.0.1 -m "$nats_http_port" \
        -P "$nats_pid" -l "$nats_log" </dev/null >/dev/null 2>&1 &
    local launched=$!
    for _ in $(seq 1 100); do
        if ! kill -0 "$launched" 2>/dev/null; then
            echo "brokers: nats-server exited at start; its log ($nats_log):" >&2
            tail -n 30 "$nats_log" >&2 2>/dev/null || true
            exit 1
        fi
        if [ -f "$nats_pid" ] && nats_healthy; then
            echo "brokers: nats started (pid $(cat "$nats_pid"), nats://127.0.0.1:$nats_port, store $nats_dir/store)"
            return 0
        fi
        sleep 0.1
    done
    echo "brokers: nats-server did not accept connections on port $nats_port within 10 s; its log:" >&2
    tail -n 30 "$nats_log" >&2 2>/dev/null || true
    kill "$launched" 2>/dev/null || true
    exit 1
}

nats_stop() {
    if ! pid_alive "$nats_pid"; then
        rm -f "$nats_pid"
        echo "brokers: nats not running"
        return 0
    fi
    local pid
    pid=$(cat "$nats_pid")
    kill -TERM "$pid"
    for _ in $(seq 1 100); do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$nats_pid"
            echo "brokers: nats stopped (pid $pid)"
            return 0
        fi
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$nats_pid"
    echo "brokers: nats killed after 10 s (pid $pid)"
}

nats_status() {
    if pid_alive "$nats_pid"; then
        echo "nats: running (pid $(cat "$nats_pid"), nats://127.0.0.1:$nats_port)"
    else
        echo "nats: stopped"
        return 3
    fi
}

kafka_not_yet() {
    echo "brokers: kafka: not yet (the Kafka backend is not built; nothing to $1)" >&2
    return 2
}

action=${1:-}
which=${2:-all}
case "$which" in nats | kafka | all) ;; *) die "unknown broker '$which' (nats|kafka|all)" ;; esac
case "$action" in
    start)
        [ "$which" = kafka ] && { kafka_not_yet start; exit 2; }
        nats_start
        if [ "$which" = all ]; then
            echo "brokers: kafka: not yet (skipped)"
        fi
        ;;
    stop)
        [ "$which" = kafka ] && { kafka_not_yet stop; exit 2; }
        nats_stop
        ;;
    status)
        [ "$which" = kafka ] && { kafka_not_yet report; exit 2; }
        nats_status
        ;;
    *)
        echo "usage: scripts/brokers.sh start|stop|status [nats|kafka|all]" >&2
        exit 64
        ;;
esac
