#!/usr/bin/env bash
# Starts, stops and reports the message brokers weft::bus's integration tests run against.
# Usage: scripts/brokers.sh start|stop|status [nats|kafka|postgres|nats-cluster|nats-tls|all]
#        (default: all)
#        scripts/brokers.sh install              nats-server and Kafka's jars, as `start` would
#        scripts/brokers.sh kill nats            SIGKILL the server (a crash); `start` restarts it
#        scripts/brokers.sh kill nats-cluster N  SIGKILL node N (0, 1, 2); `start` restarts it
#
# nats: nats-server (pinned below) installed by `go install` into .cache/bin (idempotent), run
#   with JetStream on 127.0.0.1:$WEFT_NATS_PORT (default 14222), its store in
#   $WEFT_BROKERS_DIR/nats-<port>/store (default .cache/brokers), log and PID file beside it, memory
#   bounded by GOMEMLIMIT and the JetStream limits below. `start` returns once the server
#   accepts connections and its JetStream answers (its /healthz on the monitoring port).
#   File storage is synced on every write (`sync_interval: always`; WEFT_NATS_SYNC sets another
#   interval, e.g. 2m, the server's default). A restart keeps the store directory: what the
#   server stored on file survives `kill nats` and `start nats` (WEFT_NATS_FRESH=1: `start`
#   empties the store first). Stopped by its PID, never by name.
# nats-cluster: three nats-server processes forming one cluster ("weft") with JetStream, for R3
#   streams: node i (0..2) listens for clients on 127.0.0.1:$WEFT_NATS_CLUSTER_PORT+i (default
#   14250), for routes on +3+i, for monitoring on +6+i; each has its own configuration, store,
#   log and PID file in $WEFT_BROKERS_DIR/nats-cluster-<port>/node<i>, sync on every write as
#   above. `start` starts the nodes that are not running (all three at first, or the one a
#   `kill` took down, with its store; WEFT_NATS_FRESH=1 empties the stores of nodes not
#   running) and returns once every node's /healthz answers ok.
# nats-tls: one more nats-server as `nats` above, with JetStream (its store in
#   $WEFT_BROKERS_DIR/nats-tls-<port>), whose client port 127.0.0.1:$WEFT_NATS_TLS_PORT (default
#   14232; monitoring on the next) speaks TLS only and requires a client certificate
#   (verify: true), both issued by the test CA below. Only when named: `all` does not start it.
# tls certificates: made once with the openssl CLI into $WEFT_BROKERS_DIR/tls (made again
#   when the server certificate expires within a day): ca.pem (the test CA; its key ca.key),
#   server.pem and server.key (for localhost and 127.0.0.1, with the CA in its chain), and
#   client.pem and client.key (a client certificate from the same CA); P-256 keys, PKCS#8.
#   `scripts/brokers.sh certs` makes them and prints the directory.
# kafka: a single-node KRaft broker (no ZooKeeper) from Maven Central: the jars
#   scripts/kafka/pom.xml names (Kafka 4.1) and their runtime dependencies are fetched once by
#   `mvn dependency:copy-dependencies` into .cache/kafka/lib, storage is formatted by
#   kafka.tools.StorageTool, and kafka.Kafka runs on the machine's JDK 17 (heap bounded by
#   WEFT_KAFKA_HEAP, default 512m) with a generated server.properties: broker and controller
#   in one process, node 1, 127.0.0.1:$WEFT_KAFKA_PORT (default 19092) for clients and the
#   next port for the controller; data, log and PID file in $WEFT_BROKERS_DIR/kafka-<port>.
#   `start` returns once the broker answers a Metadata request listing itself
#   (scripts/kafka/kafka_ready.py); every start begins with empty storage. A second client
#   listener, SSL on the port after the controller's ($WEFT_KAFKA_PORT + 2), presents the test
#   certificates below (PEM key and trust stores) and requires a client certificate. Stopped by its PID,
#   never by name. WEFT_KAFKA_KEEP_DATA=1 makes it a restart: `stop` keeps the data and
#   `start` runs on the storage a stop kept (topics, messages and committed offsets survive),
#   as the conformance suite's broker-outage tests do.
# postgres: PostgreSQL 15 from Debian (/usr/lib/postgresql/15/bin, or $WEFT_PG_BIN), for the
#   PostgreSQL outbox: every `start` runs initdb into a fresh directory made by mktemp under
#   /tmp (trust auth), listening on 127.0.0.1:$WEFT_PG_PORT (default 15432) and on a socket in
#   that directory; `start` returns once it accepts connections (pg_isready). Run as an
#   unprivileged user (initdb refuses root): as root, the system user `weft-postgres` (created
#   once with useradd --system) owns the data and runs the server. The data lives under /tmp,
#   not in the checkout, and the server runs with that directory as its working directory,
#   because the checkout may be anywhere: under a 0700 directory such as /root that user cannot
#   enter. $WEFT_BROKERS_DIR/postgres-<port>/run-dir records where the data is (postgres.pid
#   beside it holds the postmaster's PID while it runs); `stop` stops the
#   postmaster by its PID (pg_ctl stop -m fast, then SIGKILL to that PID), keeps its log as
#   $WEFT_BROKERS_DIR/postgres-<port>/postgres.log and removes the directory. Only when named:
#   `all` means the message brokers.
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

nats_tls_port=${WEFT_NATS_TLS_PORT:-14232}
nats_tls_dir=$state_dir/nats-tls-$nats_tls_port
tls_dir=$state_dir/tls
kafka_version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' scripts/kafka/pom.xml)
kafka_lib=${WEFT_KAFKA_LIB:-$root/.cache/kafka/lib}
kafka_port=${WEFT_KAFKA_PORT:-19092}
kafka_controller_port=$((kafka_port + 1))
kafka_tls_port=$((kafka_port + 2))
kafka_dir=$state_dir/kafka-$kafka_port
kafka_pid=$kafka_dir/kafka.pid
kafka_log=$kafka_dir/kafka.log

die() {
    echo "brokers: $*" >&2
    exit 1
}

pid_alive() {  # pid file -> 0 if that process runs
    [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

# Fixtures start in parallel: one install at a time (two `go install`s of the same server would
# build it twice), the others then find it installed. The lock is released before any server
# starts, so no server inherits it.
install_lock() {
    mkdir -p "$bin_dir"
    exec {install_lock_fd}>"$bin_dir/.install.lock"
    flock "$install_lock_fd"
}
install_unlock() {
    exec {install_lock_fd}>&-
}

nats_install() {
    local bin=$bin_dir/nats-server
    install_lock
    if ! { [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -q "${nats_version#v}"; }; then
        command -v go >/dev/null ||
            die "nats: go is not installed (needed to install nats-server $nats_version)"
        echo "brokers: installing nats-server $nats_version into $bin_dir"
        GOBIN=$bin_dir go install "github.com/nats-io/nats-server/v2@$nats_version" ||
            die "nats: go install of nats-server $nats_version failed"
    fi
    install_unlock
}

nats_healthy() {  # http port [query] -> 0 once that server's /healthz answers ok
    # JetStream enabled and ready; curl when present, else bash's /dev/tcp for the port only.
    if command -v curl >/dev/null; then
        curl -fs "http://127.0.0.1:$1/healthz${2:-}" >/dev/null 2>&1
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
    fi
}

# The jetstream block every server gets. Bounded: JetStream's memory and file storage by its
# limits (settable only in a configuration file; the flags after -c override the rest of it).
# Memory streams: 1 GB (WEFT_NATS_MEM_STORE), room for the eventbus suite's 1,000,000-message
# runs (about 300 bytes a message with its Nats-Msg-Id; each run deletes its stream).
nats_jetstream_conf() {  # store dir
    printf 'jetstream {\n    store_dir: "%s"\n    max_memory_store: %s\n    max_file_store: 2GB\n    sync_interval: %s\n}\n' \
        "$1" "${WEFT_NATS_MEM_STORE:-1GB}" "${WEFT_NATS_SYNC:-always}"
}

nats_launch() {  # conf pid log -> the launched PID in $launched; the server runs detached
    rm -f "$2"
    [ -f "$3" ] && mv -f "$3" "$3.prev"  # the tail on failure: this run's
    # The Go heap is bounded by GOMEMLIMIT (a soft limit: the GC works harder near it), above
    # a full memory store (its messages and a 2 min de-duplication map of their ids live in
    # the heap), so that a full store does not keep the GC running.
    GOMEMLIMIT=${WEFT_NATS_MEMLIMIT:-1536MiB} setsid "$bin_dir/nats-server" -c "$1" \
        -P "$2" -l "$3" </dev/null >/dev/null 2>&1 &
    launched=$!
}

nats_start() {
    if pid_alive "$nats_pid"; then
        echo "brokers: nats already running (pid $(cat "$nats_pid"), port $nats_port)"
        return 0
    fi
    nats_install
    if [ "${WEFT_NATS_FRESH:-0}" = 1 ]; then
        rm -rf "$nats_dir/store"
    fi
    mkdir -p "$nats_dir/store"
    {
        printf 'listen: "127.0.0.1:%s"\nhttp: "127.0.0.1:%s"\n' "$nats_port" "$nats_http_port"
        nats_jetstream_conf "$nats_dir/store"
    } >"$nats_dir/nats-server.conf"
    nats_launch "$nats_dir/nats-server.conf" "$nats_pid" "$nats_log"
    for _ in $(seq 1 100); do
        if ! kill -0 "$launched" 2>/dev/null; then
            echo "brokers: nats-server exited at start; its log ($nats_log):" >&2
            tail -n 30 "$nats_log" >&2 2>/dev/null || true
            exit 1
        fi
        if [ -f "$nats_pid" ] && nats_healthy "$nats_http_port" "?js-enabled-only=true"; then
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

nats_kill() {  # pid file, name -> SIGKILL, waits until the process is gone
    if ! pid_alive "$1"; then
        echo "brokers: $2 not running"
        return 0
    fi
    local pid
    pid=$(cat "$1")
    kill -KILL "$pid"
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    rm -f "$1"
    echo "brokers: $2 killed (SIGKILL, pid $pid)"
}

# ---- nats-cluster --------------------------------------------------------------------------
cluster_port=${WEFT_NATS_CLUSTER_PORT:-14250}
cluster_dir=$state_dir/nats-cluster-$cluster_port

cluster_node_start() {  # i -> launches node i unless it runs
    local i=$1 dir=$cluster_dir/node$1
    if pid_alive "$dir/nats-server.pid"; then
        return 0
    fi
    mkdir -p "$dir/store"
    {
        printf 'server_name: "weft-%s-n%s"\n' "$cluster_port" "$i"
        printf 'listen: "127.0.0.1:%s"\nhttp: "127.0.0.1:%s"\n' \
            "$((cluster_port + i))" "$((cluster_port + 6 + i))"
        nats_jetstream_conf "$dir/store"
        printf 'cluster {\n    name: "weft"\n    listen: "127.0.0.1:%s"\n    routes: [\n' \
            "$((cluster_port + 3 + i))"
        for j in 0 1 2; do
            [ "$j" = "$i" ] || printf '        "nats-route://127.0.0.1:%s"\n' "$((cluster_port + 3 + j))"
        done
        printf '    ]\n}\n'
    } >"$dir/nats-server.conf"
    nats_launch "$dir/nats-server.conf" "$dir/nats-server.pid" "$dir/nats-server.log"
    echo "brokers: nats-cluster node $i launched (pid $launched, nats://127.0.0.1:$((cluster_port + i)))"
}

cluster_start() {
    nats_install
    if [ "${WEFT_NATS_FRESH:-0}" = 1 ]; then
        for i in 0 1 2; do
            pid_alive "$cluster_dir/node$i/nats-server.pid" || rm -rf "$cluster_dir/node$i/store"
        done
    fi
    for i in 0 1 2; do cluster_node_start "$i"; done
    for _ in $(seq 1 300); do
        local ready=0
        for i in 0 1 2; do
            local dir=$cluster_dir/node$i
            if pid_alive "$dir/nats-server.pid" && nats_healthy "$((cluster_port + 6 + i))"; then
                ready=$((ready + 1))
            fi
        done
        if [ "$ready" = 3 ]; then
            echo "brokers: nats-cluster ready (nats://127.0.0.1:$cluster_port, :$((cluster_port + 1)), :$((cluster_port + 2)); $cluster_dir)"
            return 0
        fi
        sleep 0.1
    done
    echo "brokers: nats-cluster did not become healthy within 30 s; the nodes' logs:" >&2
    for i in 0 1 2; do
        echo "--- node $i" >&2
        tail -n 15 "$cluster_dir/node$i/nats-server.log" >&2 2>/dev/null || true
    done
    exit 1
}

cluster_stop() {
    for i in 0 1 2; do
        local pidf=$cluster_dir/node$i/nats-server.pid
        if pid_alive "$pidf"; then
            local pid
            pid=$(cat "$pidf")
            kill -TERM "$pid"
            for _ in $(seq 1 100); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
            done
            kill -KILL "$pid" 2>/dev/null || true
            echo "brokers: nats-cluster node $i stopped (pid $pid)"
        fi
        rm -f "$pidf"
    done
}

cluster_status() {
    local rc=0
    for i in 0 1 2; do
        local pidf=$cluster_dir/node$i/nats-server.pid
        if pid_alive "$pidf"; then
            echo "nats-cluster node $i: running (pid $(cat "$pidf"), nats://127.0.0.1:$((cluster_port + i)))"
        else
            echo "nats-cluster node $i: stopped"
            rc=3
        fi
    done
    return $rc
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

# ---- test certificates and nats-tls --------------------------------------------------------
tls_issue() {  # name subject san -> $tls_dir/name.pem (leaf, then the CA) and name.key
    local d=$tls_dir
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
        -keyout "$d/$1.key" -out "$d/$1.csr" 2>/dev/null
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n' \
        "$3" >"$d/$1.ext"
    openssl x509 -req -in "$d/$1.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
        -days 30 -sha256 -extfile "$d/$1.ext" -out "$d/$1.leaf" 2>/dev/null
    cat "$d/$1.leaf" "$d/ca.pem" >"$d/$1.pem"
    rm -f "$d/$1.csr" "$d/$1.ext" "$d/$1.leaf"
}

tls_certs() {
    command -v openssl >/dev/null || die "tls: the openssl command is not installed"
    # Fixtures start in parallel: one maker at a time, the others then find the files.
    mkdir -p "$state_dir"
    exec {tls_lock}>"$state_dir/tls.lock"
    flock "$tls_lock"
    if [ -f "$tls_dir/server.pem" ] && [ -f "$tls_dir/client.key" ] &&
        openssl x509 -in "$tls_dir/server.pem" -noout -checkend 86400 >/dev/null 2>&1; then
        exec {tls_lock}>&-
        return 0
    fi
    rm -rf "$tls_dir"
    mkdir -p "$tls_dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
        -subj "/CN=weft brokers test CA" -keyout "$tls_dir/ca.key" -out "$tls_dir/ca.pem" \
        2>/dev/null || die "tls: the CA could not be made"
    tls_issue server localhost "DNS:localhost,IP:127.0.0.1"
    tls_issue client weft-bus-client "DNS:weft-bus-client"
    # Kafka's PEM key store: the key (PKCS#8, unencrypted), then the chain.
    cat "$tls_dir/server.key" "$tls_dir/server.pem" >"$tls_dir/server-keystore.pem"
    [ -s "$tls_dir/client.pem" ] || die "tls: the certificates could not be made"
    exec {tls_lock}>&-
}

nats_tls_start() {
    local pid_file=$nats_tls_dir/nats-server.pid log=$nats_tls_dir/nats-server.log
    if pid_alive "$pid_file"; then
        echo "brokers: nats-tls already running (pid $(cat "$pid_file"), port $nats_tls_port)"
        return 0
    fi
    nats_install
    tls_certs
    mkdir -p "$nats_tls_dir/store"
    {
        printf 'listen: "127.0.0.1:%s"\nhttp: "127.0.0.1:%s"\n' "$nats_tls_port" "$((nats_tls_port + 1))"
        printf 'tls {\n    cert_file: "%s"\n    key_file: "%s"\n    ca_file: "%s"\n    verify: true\n    timeout: 2\n}\n' \
            "$tls_dir/server.pem" "$tls_dir/server.key" "$tls_dir/ca.pem"
        nats_jetstream_conf "$nats_tls_dir/store"
    } >"$nats_tls_dir/nats-server.conf"
    nats_launch "$nats_tls_dir/nats-server.conf" "$pid_file" "$log"
    for _ in $(seq 1 100); do
        if ! kill -0 "$launched" 2>/dev/null; then
            echo "brokers: nats-tls exited at start; its log ($log):" >&2
            tail -n 30 "$log" >&2 2>/dev/null || true
            exit 1
        fi
        if [ -f "$pid_file" ] && nats_healthy "$((nats_tls_port + 1))" "?js-enabled-only=true"; then
            echo "brokers: nats-tls started (pid $(cat "$pid_file"), tls://127.0.0.1:$nats_tls_port, certificates $tls_dir)"
            return 0
        fi
        sleep 0.1
    done
    echo "brokers: nats-tls did not answer on port $((nats_tls_port + 1)) within 10 s; its log:" >&2
    tail -n 30 "$log" >&2 2>/dev/null || true
    kill "$launched" 2>/dev/null || true
    exit 1
}

nats_tls_stop() {
    local pid_file=$nats_tls_dir/nats-server.pid
    if ! pid_alive "$pid_file"; then
        rm -f "$pid_file"
        echo "brokers: nats-tls not running"
        return 0
    fi
    local pid
    pid=$(cat "$pid_file")
    kill -TERM "$pid"
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$pid_file"
    rm -rf "$nats_tls_dir/store"
    echo "brokers: nats-tls stopped (pid $pid)"
}

kafka_install() {
    local stamp=$kafka_lib/.weft-kafka-$kafka_version
    install_lock
    if [ -f "$stamp" ]; then
        install_unlock
        return 0
    fi
    command -v java >/dev/null || die "kafka: java is not installed (JDK 17 runs the broker)"
    command -v mvn >/dev/null || die "kafka: mvn is not installed (it fetches the broker's jars)"
    echo "brokers: fetching Kafka $kafka_version and its dependencies into $kafka_lib"
    rm -rf "$kafka_lib"
    mkdir -p "$kafka_lib"
    if ! (cd scripts/kafka && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory="$kafka_lib") >"$kafka_lib.mvn.log" 2>&1; then
        tail -n 30 "$kafka_lib.mvn.log" >&2
        die "kafka: mvn dependency:copy-dependencies failed (log above)"
    fi
    touch "$stamp"
    install_unlock
}

kafka_ready() {
    python3 scripts/kafka/kafka_ready.py 127.0.0.1 "$kafka_port" 1 2>/dev/null
}

kafka_fail() {  # message -> the broker's log, exit 1
    echo "brokers: kafka: $1; its log ($kafka_log):" >&2
    tail -n 40 "$kafka_log" >&2 2>/dev/null || true
    exit 1
}

kafka_start() {
    if pid_alive "$kafka_pid"; then
        echo "brokers: kafka already running (pid $(cat "$kafka_pid"), port $kafka_port)"
        return 0
    fi
    kafka_install
    tls_certs
    local t0=$SECONDS
    [ -n "$kafka_dir" ] || die "kafka: no state directory"
    local keep=0
    if [ "${WEFT_KAFKA_KEEP_DATA:-0}" = 1 ] && [ -f "$kafka_dir/data/meta.properties" ]; then
        keep=1
        mv "$kafka_log" "$kafka_log.previous" 2>/dev/null || true
    else
        rm -rf "$kafka_dir"
    fi
    mkdir -p "$kafka_dir/data"
    # One process for broker and controller; every internal topic with one replica; groups
    # rebalance at once (tests make and leave groups in seconds).
    cat >"$kafka_dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$kafka_controller_port
listeners=PLAINTEXT://127.0.0.1:$kafka_port,CONTROLLER://127.0.0.1:$kafka_controller_port,SSL://127.0.0.1:$kafka_tls_port
advertised.listeners=PLAINTEXT://127.0.0.1:$kafka_port,SSL://127.0.0.1:$kafka_tls_port
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL
ssl.keystore.type=PEM
ssl.keystore.location=$tls_dir/server-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$tls_dir/ca.pem
ssl.client.auth=required
inter.broker.listener.name=PLAINTEXT
log.dirs=$kafka_dir/data
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
EOF
    cat >"$kafka_dir/log4j2.yaml" <<EOF
Configuration:
  Appenders:
    File:
      name: file
      fileName: $kafka_log
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: file
EOF
    local java_opts=(-Xmx"${WEFT_KAFKA_HEAP:-512m}" -Xms128m -XX:+UseSerialGC
        -Djava.awt.headless=true -Dlog4j2.configurationFile="$kafka_dir/log4j2.yaml")
    local cluster_id
    # What `StorageTool random-uuid` prints (16 random bytes, base64url, no padding, not
    # starting with '-'), without a JVM start of its own.
    cluster_id=$(python3 -c 'import base64, uuid
while True:
    s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not s.startswith("-"):
        print(s)
        break')
    # The formatter runs for a second: the quick-starting compiler only.
    if [ "$keep" = 0 ]; then
        java "${java_opts[@]}" -XX:TieredStopAtLevel=1 -cp "$kafka_lib/*" kafka.tools.StorageTool format \
            -t "$cluster_id" -c "$kafka_dir/server.properties" >>"$kafka_log" 2>&1 ||
            kafka_fail "formatting storage failed"
    fi
    # A restart on kept data is a test's broker outage: the quick-starting compiler only (the
    # JVM's start is most of a restart); a fresh start gets the optimising one, for the benches.
    if [ "$keep" = 1 ]; then
        java_opts+=(-XX:TieredStopAtLevel=1)
    fi
    setsid java "${java_opts[@]}" -cp "$kafka_lib/*" kafka.Kafka "$kafka_dir/server.properties" \
        </dev/null >>"$kafka_dir/stdout.log" 2>&1 &
    local launched=$!
    echo "$launched" >"$kafka_pid"
    for _ in $(seq 1 600); do
        if ! kill -0 "$launched" 2>/dev/null; then
            cat "$kafka_dir/stdout.log" >>"$kafka_log" 2>/dev/null || true
            rm -f "$kafka_pid"
            kafka_fail "the broker exited at start"
        fi
        if kafka_ready; then
            echo "brokers: kafka started in $((SECONDS - t0)) s (pid $launched, 127.0.0.1:$kafka_port, Kafka $kafka_version, data $kafka_dir/data)"
            return 0
        fi
        sleep 0.1
    done
    kill -KILL "$launched" 2>/dev/null || true
    rm -f "$kafka_pid"
    kafka_fail "no Metadata answer on port $kafka_port within 60 s"
}

kafka_stop() {
    if ! pid_alive "$kafka_pid"; then
        rm -f "$kafka_pid"
        echo "brokers: kafka not running"
        return 0
    fi
    local pid
    pid=$(cat "$kafka_pid")
    kill -TERM "$pid"
    local how=stopped
    for _ in $(seq 1 200); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
        how="killed after 20 s"
    fi
    rm -f "$kafka_pid"
    if [ "${WEFT_KAFKA_KEEP_DATA:-0}" != 1 ]; then
        rm -rf "$kafka_dir/data"
    fi
    echo "brokers: kafka $how (pid $pid)"
}

kafka_status() {
    if ! pid_alive "$kafka_pid"; then
        echo "kafka: stopped"
        return 3
    fi
    if kafka_ready; then
        echo "kafka: running (pid $(cat "$kafka_pid"), 127.0.0.1:$kafka_port)"
    else
        echo "kafka: running but not answering (pid $(cat "$kafka_pid"), 127.0.0.1:$kafka_port)"
        return 1
    fi
}

# ---- postgres ------------------------------------------------------------------------------
pg_bin=${WEFT_PG_BIN:-/usr/lib/postgresql/15/bin}
pg_port=${WEFT_PG_PORT:-15432}
pg_dir=$state_dir/postgres-$pg_port  # the caller's: the record of the run directory, old logs
pg_record=$pg_dir/run-dir
pg_pidfile=$pg_dir/postgres.pid  # a copy of the postmaster's PID for tools, while it runs
pg_user=weft-postgres

pg_run_dir() {  # the running server's directory (data, socket, log), or nothing
    [ -f "$pg_record" ] && [ -d "$(cat "$pg_record")" ] && cat "$pg_record"
}

pg_as_user() {  # runs "$@" in the run directory $1 as the unprivileged owner of the data
    local run=$1
    shift
    if [ "$(id -u)" -eq 0 ]; then
        (cd "$run" && runuser -u "$pg_user" -- "$@")
    else
        (cd "$run" && "$@")
    fi
}

pg_pid() {  # the postmaster's PID from its pid file (first line), or nothing
    local run
    run=$(pg_run_dir) && [ -f "$run/data/postmaster.pid" ] && head -n 1 "$run/data/postmaster.pid"
}

pg_running() {
    local pid
    pid=$(pg_pid) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

pg_ready() {
    local run
    run=$(pg_run_dir) && "$pg_bin/pg_isready" -q -h "$run/sock" -p "$pg_port" -U postgres 2>/dev/null
}

pg_remove_run_dir() {  # keeps the log beside the record, then removes the run directory
    local run
    run=$(pg_run_dir) || {
        rm -f "$pg_record" "$pg_pidfile"
        return 0
    }
    [ -f "$run/postgres.log" ] && cp -f "$run/postgres.log" "$pg_dir/postgres.log"
    [ -f "$run/initdb.log" ] && cp -f "$run/initdb.log" "$pg_dir/initdb.log"
    rm -rf "$run"
    rm -f "$pg_record" "$pg_pidfile"
}

pg_start() {
    [ -x "$pg_bin/initdb" ] || die "postgres: $pg_bin/initdb not found (install postgresql-15)"
    if pg_running && pg_ready; then
        echo "brokers: postgres already running (pid $(pg_pid), port $pg_port)"
        return 0
    fi
    # A directory left by a server that is gone (killed, or a start that failed) is not reused.
    if pg_running; then
        pg_stop >/dev/null
    fi
    pg_remove_run_dir
    if [ "$(id -u)" -eq 0 ] && ! id -u "$pg_user" >/dev/null 2>&1; then
        useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
            "$pg_user" || die "postgres: could not create the system user $pg_user"
    fi
    mkdir -p "$pg_dir"
    local run
    run=$(mktemp -d /tmp/weft-postgres-"$pg_port".XXXXXX) || die "postgres: mktemp failed"
    echo "$run" >"$pg_record"
    mkdir "$run/sock"
    [ "$(id -u)" -eq 0 ] && chown -R "$pg_user" "$run"
    pg_as_user "$run" "$pg_bin/initdb" -D "$run/data" -U postgres -A trust -E UTF8 --no-sync \
        >"$run/initdb.log" 2>&1 || {
        echo "brokers: postgres: initdb failed; its output:" >&2
        tail -n 30 "$run/initdb.log" >&2
        pg_remove_run_dir
        exit 1
    }
    # Bounded: small shared buffers and few connections; fsync stays on (the outbox's chaos
    # tests kill processes and expect committed rows to stay).
    pg_as_user "$run" "$pg_bin/pg_ctl" start -D "$run/data" -l "$run/postgres.log" -w -t 30 -o \
        "-p $pg_port -k $run/sock -c listen_addresses=127.0.0.1 -c shared_buffers=64MB -c max_connections=64" \
        >/dev/null 2>&1 || true
    for _ in $(seq 1 100); do
        if pg_running && pg_ready; then
            pg_pid >"$pg_pidfile"
            echo "brokers: postgres started (pid $(pg_pid), host=$run/sock port=$pg_port user=postgres)"
            return 0
        fi
        sleep 0.1
    done
    echo "brokers: postgres did not accept connections on port $pg_port; its log:" >&2
    tail -n 30 "$run/postgres.log" >&2 2>/dev/null || true
    pg_stop >/dev/null
    exit 1
}

pg_stop() {
    if ! pg_running; then
        pg_remove_run_dir
        echo "brokers: postgres not running"
        return 0
    fi
    local pid run
    pid=$(pg_pid)
    run=$(pg_run_dir)
    pg_as_user "$run" "$pg_bin/pg_ctl" stop -D "$run/data" -m fast -w -t 20 >/dev/null 2>&1 || true
    for _ in $(seq 1 100); do
        if ! kill -0 "$pid" 2>/dev/null; then
            pg_remove_run_dir
            echo "brokers: postgres stopped (pid $pid)"
            return 0
        fi
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    pg_remove_run_dir
    echo "brokers: postgres killed after 10 s (pid $pid)"
}

pg_status() {
    if pg_running; then
        echo "postgres: running (pid $(pg_pid), port $pg_port, socket dir $(pg_run_dir)/sock)"
    else
        echo "postgres: stopped"
        return 3
    fi
}

pg_main() {
    case "$1" in
        start) pg_start ;;
        stop) pg_stop ;;
        status) pg_status ;;
        *)
            echo "usage: scripts/brokers.sh start|stop|status postgres" >&2
            exit 64
            ;;
    esac
}

if [ "${2:-}" = postgres ]; then
    pg_main "${1:-}"
    exit $?
fi

action=${1:-}
which=${2:-all}
if [ "$action" = install ]; then  # what `start` would fetch first (scripts/setup.sh runs it)
    nats_install
    kafka_install
    exit 0
fi
if [ "$which" = nats-tls ] || [ "$action" = certs ]; then
    case "$action" in
        start) nats_tls_start ;;
        stop) nats_tls_stop ;;
        status)
            if pid_alive "$nats_tls_dir/nats-server.pid"; then
                echo "nats-tls: running (pid $(cat "$nats_tls_dir/nats-server.pid"), tls://127.0.0.1:$nats_tls_port)"
            else
                echo "nats-tls: stopped"
                exit 3
            fi
            ;;
        certs)
            tls_certs
            echo "$tls_dir"
            ;;
        *)
            echo "usage: scripts/brokers.sh start|stop|status nats-tls; scripts/brokers.sh certs" >&2
            exit 64
            ;;
    esac
    exit 0
fi
if [ "$which" = nats-cluster ]; then
    case "$action" in
        start) cluster_start ;;
        stop) cluster_stop ;;
        status) cluster_status ;;
        kill)
            case "${3:-}" in 0 | 1 | 2) ;; *) die "kill nats-cluster needs a node: 0, 1 or 2" ;; esac
            nats_kill "$cluster_dir/node$3/nats-server.pid" "nats-cluster node $3"
            ;;
        *)
            echo "usage: scripts/brokers.sh start|stop|status|kill nats-cluster [node]" >&2
            exit 64
            ;;
    esac
    exit 0
fi
case "$which" in nats | kafka | all) ;; *) die "unknown broker '$which' (nats|kafka|nats-cluster|postgres|all)" ;; esac
case "$action" in
    start)
        if [ "$which" != kafka ]; then nats_start; fi
        if [ "$which" != nats ]; then kafka_start; fi
        ;;
    stop)
        if [ "$which" != kafka ]; then nats_stop; fi
        if [ "$which" != nats ]; then kafka_stop; fi
        ;;
    kill)
        [ "$which" = nats ] || die "kill: only nats and nats-cluster"
        nats_kill "$nats_pid" nats
        ;;
    status)
        rc=0
        if [ "$which" != kafka ]; then nats_status || rc=$?; fi
        if [ "$which" != nats ]; then kafka_status || rc=$?; fi
        exit $rc
        ;;
    *)
        echo "usage: scripts/brokers.sh start|stop|status [nats|kafka|all]" >&2
        exit 64
        ;;
esac
