#!/usr/bin/env bash
# Starts nginx (Debian's nginx-light) as weft-bench's nginx peer: nginx.conf beside this script
# with __PORT__ replaced, in a private prefix (a temporary directory, removed when nginx exits),
# in the foreground (daemon off), WORKERS worker processes. bench/peers/build.sh installs it as
# $OUT/nginx-hello with the config as $OUT/nginx-hello.conf, and static.conf as
# $OUT/nginx-static.conf: with -r ROOT it serves the directory ROOT as files (sendfile on) instead
# of the hello routes (weft-bench's http-static suite).
#   nginx-hello [-p PORT] [-t WORKERS] [-r ROOT] [-c CHAIN.pem -k KEY.pem] [-2]
#   (defaults: 8080, number of CPUs, no root, plain HTTP/1.1)
# -c/-k: the listener speaks TLS (`listen ... ssl`, ssl_certificate and ssl_certificate_key, and
# ssl_protocols TLSv1.2 TLSv1.3; every other ssl_* directive at nginx's default). -2: the listener
# speaks HTTP/2 (`listen ... http2`: with -c/-k h2 by ALPN, without them h2c with prior
# knowledge only, as nginx 1.22 serves a plaintext http2 listener). Either is set on the config's
# one `listen ... deferred;` line.
# Prints "listening on 127.0.0.1:PORT" once nginx accepts; exits when nginx does (SIGTERM to the
# process group stops nginx at once, as the harness does).
set -uo pipefail
port=8080 workers=$(nproc) root="" cert="" key="" h2=""
while [ $# -gt 0 ]; do
    case "$1" in
        -p) port=$2; shift 2 ;;
        -t) workers=$2; shift 2 ;;
        -r) root=$(cd "$2" && pwd) || exit 2; shift 2 ;;
        -c) cert=$(realpath "$2") || exit 2; shift 2 ;;
        -k) key=$(realpath "$2") || exit 2; shift 2 ;;
        -2) h2=" http2"; shift ;;
        *) echo "nginx-hello: unknown option $1" >&2; exit 2 ;;
    esac
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -n "$root" ]; then
    conf=$here/nginx-static.conf
    [ -f "$conf" ] || conf=$here/static.conf  # run from the source tree
else
    conf=$here/nginx-hello.conf
    [ -f "$conf" ] || conf=$here/nginx.conf
fi
nginx=$(command -v nginx || echo /usr/sbin/nginx)
prefix=$(mktemp -d "${TMPDIR:-/tmp}/weft-nginx.XXXXXX") || exit 1
mkdir -p "$prefix/logs"
if [ -n "$cert" ] && [ -n "$key" ]; then
    listen=" ssl$h2;\n        ssl_certificate $cert;\n        ssl_certificate_key $key;"
    listen+="\n        ssl_protocols TLSv1.2 TLSv1.3;"
elif [ -n "$cert$key" ]; then
    echo "nginx-hello: -c and -k go together" >&2; exit 2
else
    listen="$h2;"
fi
sed -e "s/__PORT__/$port/" -e "s|__ROOT__|$root|" -e "s|^\( *listen .* deferred\);|\1$listen|" \
    "$conf" >"$prefix/nginx.conf"
"$nginx" -p "$prefix" -c "$prefix/nginx.conf" -g "worker_processes $workers; pid $prefix/nginx.pid;" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid; rm -rf "$prefix"; exit 0' TERM INT
for _ in $(seq 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "listening on 127.0.0.1:$port"
        break
    fi
    kill -0 $pid 2>/dev/null || break
    sleep 0.02
done
wait $pid
status=$?
rm -rf "$prefix"
exit $status
