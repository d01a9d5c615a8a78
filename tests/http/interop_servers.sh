#!/usr/bin/env bash
# Starts and stops the servers test_http_client_interop runs weft's pooled client against, each
# by its PID on private ports, with a test CA and a certificate for 127.0.0.1 made here with the
# openssl CLI (tls/ca.pem is what the tests trust); both offer h2 and http/1.1 over TLS:
#   interop_servers.sh start nginx DIR HTTP_PORT HTTPS_PORT   Debian's nginx, config written here
#   interop_servers.sh start go DIR HTTP_PORT HTTPS_PORT      interop_go/ built with `go build`
#   interop_servers.sh stop nginx|go DIR                      SIGTERM to that PID, then SIGKILL
# DIR/<server>/ holds the server's files, its PID and its log. Exit status: non-zero with the
# log's tail when a server cannot be built or started (the tests that need it then fail).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -ge 3 ] || { echo "usage: $0 start|stop nginx|go DIR [HTTP_PORT HTTPS_PORT]" >&2; exit 2; }
action=$1 server=$2 dir=$3/$2
pid_file=$dir/server.pid
log=$dir/server.log

die() {
    echo "interop_servers: $server: $*" >&2
    [ -f "$log" ] && tail -n 30 "$log" >&2
    exit 1
}

make_certs() {  # a CA and a leaf for 127.0.0.1 and localhost signed by it
    local t=$dir/tls
    mkdir -p "$t"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=weft interop test CA" \
        -keyout "$t/ca.key" -out "$t/ca.pem" 2>>"$log" || die "openssl: CA"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=127.0.0.1" \
        -keyout "$t/server.key" -out "$t/server.csr" 2>>"$log" || die "openssl: request"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$t/ext.cnf"
    openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial \
        -days 2 -extfile "$t/ext.cnf" -out "$t/server.pem" 2>>"$log" || die "openssl: leaf"
}

nginx_conf() {  # http port, https port
    local root=$dir/root
    mkdir -p "$root/static" "$root/sub" "$dir/logs"
    printf 'hello from nginx\n' >"$root/static/hello.txt"
    # Larger than every HTTP/2 window either side opens at once; bytes of every value, which
    # the tests compare with this file.
    head -c 4194304 /dev/urandom >"$root/static/large.bin"
    # Large enough for several chunks once sub_filter rewrites it (no Content-Length then).
    for i in $(seq 2000); do printf 'line %d: hello world\n' "$i"; done >"$root/sub/big.txt"
    # Started as root, nginx's workers would run as nobody, who may not read this directory.
    local user=""
    [ "$(id -u)" = 0 ] && user="user root;"
    cat >"$dir/nginx.conf" <<CONF
daemon off;
$user
worker_processes 1;
error_log $dir/logs/error.log warn;
pid $dir/nginx.pid;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $dir/tmp;
    proxy_temp_path $dir/tmp;
    types { text/plain txt; }
    default_type text/plain;
    gzip off;
    keepalive_timeout 30s;
    server {
        listen 127.0.0.1:$1;
        listen 127.0.0.1:$2 ssl http2;
        ssl_certificate $dir/tls/server.pem;
        ssl_certificate_key $dir/tls/server.key;
        root $root;
        location /static/ { }
        # nginx closes the connection after every second request (Connection: close).
        location /limited/ { keepalive_requests 2; alias $root/static/; }
        # An idle connection closed by the server after 300 ms, unannounced.
        location /short-idle/ { keepalive_timeout 300ms; alias $root/static/; }
        # sub_filter changes the length: nginx sends the body chunked.
        location /sub/ { sub_filter 'world' 'nginx'; sub_filter_once off; sub_filter_types text/plain; }
        location = /moved { return 301 /static/hello.txt; }
        location = /loop { return 302 /loop; }
        # POST: nginx reads the body for the proxied request; /echo-back returns it.
        location = /echo {
            client_body_buffer_size 64k;
            proxy_pass http://127.0.0.1:$1/echo-back;
            proxy_set_header X-Echo-Body \$request_body;
        }
        location = /echo-back { return 200 \$http_x_echo_body; }
        location = /status { stub_status; }
        # PUT stores the body as a file (WebDAV), which a GET then returns.
        location /put/ { dav_methods PUT; create_full_put_path on; client_max_body_size 16m; }
    }
}
CONF
}

wait_port() {  # port, pid
    for _ in $(seq 500); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        kill -0 "$2" 2>/dev/null || die "exited before listening on 127.0.0.1:$1"
        sleep 0.02
    done
    die "not listening on 127.0.0.1:$1 after 10 s"
}

start() {  # http port, https port
    [ $# -eq 2 ] || die "start needs HTTP_PORT HTTPS_PORT"
    if [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
        die "already running (pid $(cat "$pid_file"))"
    fi
    local port
    for port in "$1" "$2"; do  # else the wait below would take another listener for ours
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            die "127.0.0.1:$port is already in use"
        fi
    done
    rm -rf "$dir"
    mkdir -p "$dir/tmp"
    : >"$log"
    make_certs
    case $server in
        nginx)
            command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || die "nginx is not installed"
            nginx_conf "$1" "$2"
            setsid "$(command -v nginx || echo /usr/sbin/nginx)" -p "$dir" -c "$dir/nginx.conf" \
                </dev/null >>"$log" 2>&1 &
            ;;
        go)
            command -v go >/dev/null || die "go is not installed"
            (cd "$here/interop_go" && GOTOOLCHAIN=local GOFLAGS=-buildvcs=false go build -o "$dir/server" .) \
                >>"$log" 2>&1 || die "go build failed"
            setsid "$dir/server" -http "127.0.0.1:$1" -https "127.0.0.1:$2" \
                -cert "$dir/tls/server.pem" -key "$dir/tls/server.key" </dev/null >>"$log" 2>&1 &
            ;;
        *) die "unknown server" ;;
    esac
    local pid=$!
    echo "$pid" >"$pid_file"
    wait_port "$1" "$pid"
    wait_port "$2" "$pid"
    kill -0 "$pid" 2>/dev/null || die "exited after listening"
    echo "interop_servers: $server listening on 127.0.0.1:$1 (http) and :$2 (https), pid $pid"
}

stop() {
    [ -f "$pid_file" ] || { echo "interop_servers: $server: not running"; return 0; }
    local pid
    pid=$(cat "$pid_file")
    if kill -TERM "$pid" 2>/dev/null; then
        for _ in $(seq 250); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.02
        done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pid_file"
    echo "interop_servers: $server stopped (pid $pid)"
}

case $action in
    start) shift 3; start "$@" ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop nginx|go DIR [HTTP_PORT HTTPS_PORT]" >&2; exit 2 ;;
esac
