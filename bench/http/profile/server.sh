# Part of bench/http/profile (see README.md there): sourced by its scripts, from the repository
# root, after they set P (their port). Their defaults (WORK, PEERS, ROOT, BIN), and starting,
# measuring and stopping the server under test. With SERVES_FILES=1 set before sourcing, `weft`,
# `nginx` and `go` name the static file servers (examples/file_server, nginx and go-fileserver
# serving ROOT); else the hello servers (examples/hello_http, nginx-hello, go-httphello).
: "${WORK:=/tmp/weft-http-profile}" "${PEERS:=build/peers}" "${ROOT:=$WORK/root}"
: "${BIN:=${WEFT_BIN:-build/release/examples}}"
mkdir -p "$WORK"
set -u

# start_server SYSTEM LOG: waits until the previous server is gone from port P, starts SYSTEM
# there in the background (its output to LOG), sets SP to its pid and waits until it accepts.
# Fails if it exited meanwhile; exits the script (status 2) for a system it does not know.
start_server() {
  local files=${SERVES_FILES:-} hello="$BIN/hello_http --port $P --workers 2 ${HELLO_ARGS:-}"
  for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$P) 2>/dev/null || break; sleep 0.05; done
  case $1 in
    weft) if [ -n "$files" ]; then
            $BIN/file_server --root $ROOT --port $P --workers 2 > $2 2>&1 &
          else $hello > $2 2>&1 & fi ;;
    weft-hello) $hello > $2 2>&1 & ;;
    weft-epoll) WEFT_IO_BACKEND=epoll $hello > $2 2>&1 & ;;
    weft-percore) $hello --per-core > $2 2>&1 & ;;
    weft-percore-epoll) WEFT_IO_BACKEND=epoll $hello --per-core > $2 2>&1 & ;;
    nginx) setsid $PEERS/nginx-hello -p $P -t 2 ${files:+-r $ROOT} > $2 2>&1 & ;;
    nginx-hello) setsid $PEERS/nginx-hello -p $P -t 2 > $2 2>&1 & ;;
    asio) $PEERS/asio-http ${ASIO_ARGS:-} -p $P -t 2 > $2 2>&1 & ;;
    minihttp) $PEERS/minihttp -p $P -t 2 > $2 2>&1 & ;;
    hyper) $PEERS/tokio-hyper -p $P -t 2 > $2 2>&1 & ;;
    go) if [ -n "$files" ]; then
          $PEERS/go-fileserver -p $P -t 2 -r $ROOT > $2 2>&1 &
        else $PEERS/go-httphello -p $P -t 2 > $2 2>&1 & fi ;;
    *) echo "unknown system $1" >&2; exit 2 ;;
  esac
  SP=$!
  for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$P) 2>/dev/null && break; sleep 0.05; done
  kill -0 $SP 2>/dev/null
}

# server_pids SYSTEM: sets PIDS to the processes that serve, space-separated (nginx: the
# master's workers; else SP).
server_pids() {
  case $1 in nginx*) PIDS=$(pgrep -P $(pgrep -P $SP nginx) | tr '\n' ' ');; *) PIDS=$SP;; esac
}

# start_profiled SYSTEM: start_server for the profilers (perf, strace): the server's output
# dropped, asio-http per core (as weft-bench runs it), PIDS set at once.
start_profiled() {
  ASIO_ARGS=--per-core
  start_server $1 /dev/null
  server_pids $1
}

# stop_server SYSTEM: ends the server started last and waits for it.
stop_server() {
  case $1 in nginx*) kill -TERM -- -$SP;; minihttp) kill -KILL $SP;; *) kill -INT $SP;; esac
  wait $SP 2>/dev/null
}

# ticks: the user and system CPU ticks of PIDS so far; nsec: their threads' run time in ns
# (schedstat); machine_ticks: the machine's busy and idle ticks (/proc/stat).
ticks() { local u=0 s=0; for p in $PIDS; do read -r a b < <(awk '{print $14, $15}' /proc/$p/stat); u=$((u+a)); s=$((s+b)); done; echo $u $s; }
nsec() { local t=0; for p in $PIDS; do for f in /proc/$p/task/*/schedstat; do t=$((t + $(awk '{print $1}' $f))); done; done; echo $t; }
machine_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat; }
