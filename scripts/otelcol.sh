#!/usr/bin/env bash
# Starts, stops and reports the OpenTelemetry Collector the end-to-end trace test
# (test_trace_e2e) exports to, and that a developer can point weft's exporter at.
# Usage: scripts/otelcol.sh start|stop|status
#
# The collector (weft-otelcol, pinned below: the OpenTelemetry Collector Builder's build of
# scripts/otelcol-builder.yaml, made by scripts/setup.sh into
# $(go env GOPATH)/bin/weft-otelcol-<version>, or $WEFT_OTELCOL_BIN) runs one traces pipeline:
# the otlp receiver, OTLP/HTTP only, on 127.0.0.1:$WEFT_OTELCOL_PORT (default 14318;
# POST /v1/traces), and the file exporter, which appends each batch it receives as one line of
# OTLP JSON to $WEFT_OTELCOL_TRACES (default <dir>/traces.jsonl, emptied at each start). Its own
# telemetry is off, so it listens on no other port. Its configuration, log and PID file go in
# <dir> = $WEFT_BROKERS_DIR/otelcol-<port> (default .cache/brokers). `start` returns once the
# receiver answers an empty export; a collector that does not is a failure (its log printed).
# Stopped by its PID, never by name. A second `start` of a running collector is a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

otelcol_version=0.161.0
state_dir=${WEFT_BROKERS_DIR:-$root/.cache/brokers}
port=${WEFT_OTELCOL_PORT:-14318}
dir=$state_dir/otelcol-$port
traces=${WEFT_OTELCOL_TRACES:-$dir/traces.jsonl}
pid_file=$dir/otelcol.pid
log=$dir/otelcol.log

die() {
    echo "otelcol: $*" >&2
    exit 1
}

alive() { [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null; }

binary() {
    if [ -n "${WEFT_OTELCOL_BIN:-}" ]; then
        echo "$WEFT_OTELCOL_BIN"
    else
        echo "$(go env GOPATH)/bin/weft-otelcol-$otelcol_version"
    fi
}

# An empty OTLP/HTTP export: 200 once the receiver serves (the file exporter writes no span).
ready() {
    curl -fsS -X POST -H 'Content-Type: application/json' -d '{}' \
        "http://127.0.0.1:$port/v1/traces" >/dev/null 2>&1
}

start() {
    if alive; then
        return 0
    fi
    local bin
    bin=$(binary)
    [ -x "$bin" ] || die "no weft-otelcol $otelcol_version at $bin (scripts/setup.sh builds it)"
    mkdir -p "$dir" "$(dirname "$traces")"
    : >"$traces"
    cat >"$dir/config.yaml" <<YAML
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$port
exporters:
  file:
    path: $traces
    flush_interval: 50ms
service:
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
YAML
    GOMEMLIMIT=${WEFT_OTELCOL_MEMLIMIT:-128MiB} nohup "$bin" --config "$dir/config.yaml" \
        >"$log" 2>&1 &
    local launched=$!
    echo "$launched" >"$pid_file"
    for _ in $(seq 1 300); do
        if ! kill -0 "$launched" 2>/dev/null; then
            cat "$log" >&2
            rm -f "$pid_file"
            die "exited during start"
        fi
        if ready; then
            echo "otelcol: OTLP/HTTP on 127.0.0.1:$port, spans in $traces"
            return 0
        fi
        sleep 0.2
    done
    cat "$log" >&2
    stop
    die "not ready after 60 s"
}

stop() {
    alive || {
        rm -f "$pid_file"
        return 0
    }
    local pid
    pid=$(cat "$pid_file")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    rm -f "$pid_file"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) if alive; then echo "otelcol: running (pid $(cat "$pid_file"))"; else echo "otelcol: stopped"; fi ;;
    *) die "usage: $0 start|stop|status" ;;
esac
