#!/usr/bin/env bash
# Starts, stops and reports the Jaeger collector the trace test (test_trace_e2e) exports to.
# Usage: scripts/jaeger.sh start|stop|status
#
# Jaeger (pinned below; `jaeger` from github.com/jaegertracing/jaeger, built by
# scripts/setup.sh into $(go env GOPATH)/bin/jaeger-<version>, or $WEFT_JAEGER_BIN) runs with
# in-memory storage and only what the test needs, all on 127.0.0.1: the OTLP/HTTP receiver on
# $WEFT_JAEGER_PORT (default 14318; POST /v1/traces), the query HTTP API on the next port
# (GET /api/traces/<trace id>), its gRPC query port on the one after, the health check on the
# one after that. Its configuration, log and PID file go in $WEFT_BROKERS_DIR/jaeger-<port>
# (default .cache/brokers). `start` returns once the health check answers and the query API
# serves; a collector that does not is a failure (its log printed). Stopped by its PID, never
# by name. A second `start` of a running collector is a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

jaeger_version=1.76.0
state_dir=${WEFT_BROKERS_DIR:-$root/.cache/brokers}
port=${WEFT_JAEGER_PORT:-14318}
query_port=$((port + 1))
query_grpc_port=$((port + 2))
health_port=$((port + 3))
dir=$state_dir/jaeger-$port
pid_file=$dir/jaeger.pid
log=$dir/jaeger.log

die() {
    echo "jaeger: $*" >&2
    exit 1
}

alive() { [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null; }

binary() {
    if [ -n "${WEFT_JAEGER_BIN:-}" ]; then
        echo "$WEFT_JAEGER_BIN"
    else
        echo "$(go env GOPATH)/bin/jaeger-$jaeger_version"
    fi
}

start() {
    if alive; then
        return 0
    fi
    local bin
    bin=$(binary)
    [ -x "$bin" ] || die "no Jaeger $jaeger_version at $bin (scripts/setup.sh builds it)"
    mkdir -p "$dir"
    cat >"$dir/config.yaml" <<YAML
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: []
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:$query_port
    grpc:
      endpoint: 127.0.0.1:$query_grpc_port
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:$health_port
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$port
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
YAML
    GOMEMLIMIT=${WEFT_JAEGER_MEMLIMIT:-256MiB} nohup "$bin" --config "$dir/config.yaml" \
        >"$log" 2>&1 &
    local launched=$!
    echo "$launched" >"$pid_file"
    for _ in $(seq 1 300); do
        if ! kill -0 "$launched" 2>/dev/null; then
            cat "$log" >&2
            rm -f "$pid_file"
            die "exited during start"
        fi
        if curl -fsS "http://127.0.0.1:$health_port/status" >/dev/null 2>&1 &&
            curl -fsS "http://127.0.0.1:$query_port/api/services" >/dev/null 2>&1; then
            echo "jaeger: OTLP/HTTP on 127.0.0.1:$port, query API on 127.0.0.1:$query_port"
            return 0
        fi
        sleep 0.2
    done
    cat "$log" >&2
    stop
    die "not ready after 60 s"
}

stop() {
    alive || { rm -f "$pid_file"; return 0; }
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
    status) if alive; then echo "jaeger: running (pid $(cat "$pid_file"))"; else echo "jaeger: stopped"; fi ;;
    *) die "usage: $0 start|stop|status" ;;
esac
