#!/usr/bin/env bash
# Installs everything weft's build, tests and benchmarks need. Idempotent: packages already
# present are left alone, so a second run takes seconds.
#   apt:   g++ 12, clang 16 (+ its sanitizer runtimes and clang-format), cmake, ninja,
#          liburing, GoogleTest, Google Benchmark, oneTBB (the fork-join peer),
#          fio (the galay-file peer), libnats-dev (cnats 3.4: the NATS JetStream backend),
#          libsqlite3-dev (the SQLite outbox and inbox), librdkafka-dev (2.0: the Kafka
#          backend), maven and a JDK 17 (the Kafka broker the integration tests start),
#          postgresql-15 + libpq-dev (the PostgreSQL outbox and the server its tests start),
#          wrk + apache2-utils (ab) + nginx-light (the HTTP suites' load tools and nginx
#          peer), libboost-dev (Boost.Beast, the Beast HTTP peer), strace (http-pipeline's
#          responses per write), fonts-noto-cjk (the seeds' Chinese in the report and plots),
#          iptables and iproute2 (the lossy-link fault test's namespaces and drops), valgrind
#          (scripts/memcheck.sh; its header lets io_uring completions annotate kernel writes),
#          libssl-dev (OpenSSL 3: weft::tls), libc-ares-dev (c-ares: weft::resolve), openssl
#          (the CLI: s_client in the TLS tests, the brokers' test certificates in brokers.sh,
#          tests/http/h2spec.sh's certificate, weft-bench's https certificate), libnghttp2-dev
#          (HTTP/2 in weft::http), zlib1g-dev (WebSocket permessage-deflate in weft::http) and
#          nghttp2-client (h2load and nghttp: weft-bench's http2 suite)
#   pip:   matplotlib (plots in the weft-bench report; its tests render one), prometheus_client
#          (its parsers read weft's metrics exposition in the metrics_parse test)
#   autobahn: Autobahn|Testsuite (the WebSocket conformance run, scripts/autobahn.sh). It is
#          Python 2.7 code and Debian 12 has no python2: a python2.7 on PATH or in pyenv is
#          used (pyenv builds 2.7.18 where it has none), and the suite goes under
#          $WEFT_AUTOBAHN_DIR (default ~/.cache/weft/autobahn) with its pinned dependencies.
#   go:    h2spec (HTTP/2 conformance); the OpenTelemetry Collector of the end-to-end trace
#          test (built by the OpenTelemetry Collector Builder: the otlp receiver, the file
#          exporter)
#   brokers: nats-server and Kafka's jars (`scripts/brokers.sh install`, into .cache/)
#   peers: Go and Rust toolchains are expected on the machine; their modules/crates are
#          fetched by `go build` / `cargo build` through the normal registries.
set -euo pipefail

apt_pkgs=(g++ cmake ninja-build pkg-config clang-16 clang-format-16 libclang-rt-16-dev
          liburing-dev libgtest-dev libbenchmark-dev libtbb-dev libasio-dev python3 fio
          libnats-dev wrk apache2-utils nginx-light libboost-dev libsqlite3-dev librdkafka-dev curl
          libssl-dev libc-ares-dev openssl libnghttp2-dev zlib1g-dev nghttp2-client
          maven openjdk-17-jre-headless postgresql-15 libpq-dev strace fonts-noto-cjk
          iptables iproute2 valgrind kcat)
missing=()
for p in "${apt_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    # Installing nginx must not start a system nginx (on port 80, left running): while apt runs,
    # a policy-rc.d that answers 101 ("action forbidden") stops every service start; it is
    # removed afterwards, also on failure. One that was already there is left as it was.
    guard=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        guard=/usr/sbin/policy-rc.d
        trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$guard" >/dev/null
        $SUDO chmod 755 "$guard"
    fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if [ -n "$guard" ]; then
        $SUDO rm -f "$guard"
        trap - EXIT
    fi
fi

python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install -q matplotlib
python3 -c 'import prometheus_client' 2>/dev/null || python3 -m pip install -q prometheus_client

autobahn_dir=${WEFT_AUTOBAHN_DIR:-$HOME/.cache/weft/autobahn}
if [ ! -f "$autobahn_dir/python" ]; then
    py2=$(python2.7 -c 'import sys; print(sys.executable)' 2>/dev/null || true)
    if [ -z "$py2" ] && command -v pyenv >/dev/null; then
        v=$(pyenv versions --bare | grep '^2\.7' | tail -1 || true)
        if [ -z "$v" ]; then
            pyenv install -s 2.7.18
            v=2.7.18
        fi
        py2="$(pyenv root)/versions/$v/bin/python2.7"
    fi
    if [ -z "$py2" ]; then
        echo "setup: no python2.7 (nor pyenv to build one) for the Autobahn|Testsuite" >&2
        exit 1
    fi
    site="$autobahn_dir/lib/python2.7/site-packages"
    PYTHONPATH="$site" "$py2" -m pip install -q --prefix "$autobahn_dir" "setuptools<45" wheel
    PYTHONPATH="$site" "$py2" -m pip install -q --prefix "$autobahn_dir" autobahntestsuite
    echo "$py2" >"$autobahn_dir/python"
fi

# h2spec (HTTP/2 conformance: tests/http/h2spec.sh), a Go program, into $(go env GOPATH)/bin.
if ! command -v h2spec >/dev/null && [ ! -x "$(go env GOPATH)/bin/h2spec" ]; then
    GOFLAGS=-buildvcs=false go install "github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible"
fi

# The OpenTelemetry Collector test_trace_e2e exports to (scripts/otelcol.sh runs it), into
# $(go env GOPATH)/bin/weft-otelcol-<version>: the OpenTelemetry Collector Builder (go install,
# pinned) builds scripts/otelcol-builder.yaml, a collector of the otlp receiver and the file
# exporter only, in $WEFT_OTELCOL_BUILD_DIR (default ~/.cache/weft/otelcol-<version>).
otelcol_version=0.161.0
otelcol_bin="$(go env GOPATH)/bin/weft-otelcol-$otelcol_version"
if [ ! -x "$otelcol_bin" ]; then
    otelcol_dir=${WEFT_OTELCOL_BUILD_DIR:-$HOME/.cache/weft/otelcol-$otelcol_version}
    otelcol_manifest="$(cd "$(dirname "$0")" && pwd)/otelcol-builder.yaml"
    mkdir -p "$otelcol_dir"
    GOBIN="$otelcol_dir" GOFLAGS=-buildvcs=false \
        go install "go.opentelemetry.io/collector/cmd/builder@v$otelcol_version"
    (cd "$otelcol_dir" && GOFLAGS=-buildvcs=false ./builder --config "$otelcol_manifest")
    install -m 755 "$otelcol_dir/dist/weft-otelcol" "$otelcol_bin"
fi

# What scripts/brokers.sh fetches before a broker's first start (nats-server, Kafka's jars),
# fetched here once rather than by whichever test fixture starts first.
bash "$(dirname "$0")/brokers.sh" install
