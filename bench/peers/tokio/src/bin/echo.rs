//! tokio peer for weft-bench's TCP echo benchmark (see ../../../README.md).
//!
//!     echo [-h HOST] [-p PORT] [-t THREADS] [-m echo|idle]
//!
//! accepts connections forever; each connection is a `tokio::spawn`ed task that reads up to 4096
//! bytes and writes back exactly what it read until the peer closes. THREADS sets the
//! multi-thread runtime's `worker_threads` (0 or absent: number of CPUs). `-m idle` (weft-bench's
//! idle-connection row): a connection waits for readability (`readable()`) before it takes a
//! buffer, reads with `try_read` into a `Vec` made then and dropped after the echo, so an idle
//! connection holds no buffer (the design weft's io_uring receive has); the default keeps a
//! 4 KiB array in the task, the usual tokio echo. Prints
//! `listening on HOST:PORT` on stdout once the listener is bound; exits 0 on SIGTERM/SIGINT.
//! Exit code 2 on bad arguments, 1 if the listener cannot be set up.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::exit;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::signal::unix::{signal, SignalKind};

const BUF_SIZE: usize = 4096;
const BACKLOG: u32 = 4096;
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;

struct Args {
    host: String,
    port: u16,
    threads: usize,
    lazy_buffer: bool,
}

fn usage(msg: &str) -> ! {
    eprintln!("echo: {msg}\nusage: echo [-h HOST] [-p PORT] [-t THREADS] [-m echo|idle]");
    exit(2);
}

fn parse_args() -> Args {
    let mut args = Args { host: "127.0.0.1".into(), port: 8080, threads: 0, lazy_buffer: false };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let Some(value) = it.next() else { usage(&format!("{flag}: missing value")) };
        match flag.as_str() {
            "-h" => args.host = value,
            "-p" => {
                args.port = value.parse().unwrap_or_else(|_| usage(&format!("bad port {value:?}")))
            }
            "-t" => {
                args.threads =
                    value.parse().unwrap_or_else(|_| usage(&format!("bad thread count {value:?}")))
            }
            "-m" => match value.as_str() {
                "echo" => args.lazy_buffer = false,
                "idle" => args.lazy_buffer = true,
                _ => usage(&format!("bad mode {value:?}")),
            },
            _ => usage(&format!("unknown option {flag:?}")),
        }
    }
    args
}

fn fail(what: &str, err: std::io::Error) -> ! {
    eprintln!("echo: {what}: {err}");
    exit(1);
}

fn main() {
    let args = parse_args();
    let addr: SocketAddr = match (args.host.as_str(), args.port).to_socket_addrs() {
        Ok(mut addrs) => addrs.next().unwrap_or_else(|| usage("host resolves to no address")),
        Err(e) => fail(&format!("resolving {:?}", args.host), e),
    };

    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_io().enable_time();
    if args.threads > 0 {
        builder.worker_threads(args.threads);
    }
    let rt = builder.build().unwrap_or_else(|e| fail("building the runtime", e));

    rt.block_on(async {
        // Signals first, so a SIGTERM sent right after the "listening" line is already ours.
        let mut term = signal(SignalKind::terminate()).unwrap_or_else(|e| fail("SIGTERM", e));
        let mut int = signal(SignalKind::interrupt()).unwrap_or_else(|e| fail("SIGINT", e));

        let listener = listen(addr).unwrap_or_else(|e| fail(&format!("listening on {addr}"), e));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(args.port);
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on {}:{}", args.host, port);
        let _ = out.flush();
        drop(out);

        // The accept loop runs in a spawned task, not here: block_on polls on the main thread,
        // which is not a worker, so its spawns would all go through the injection queue.
        tokio::spawn(accept_loop(listener, args.lazy_buffer));

        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    });
    // Drop connection tasks without waiting for them.
    rt.shutdown_background();
    exit(0);
}

fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// Accepts forever. On EMFILE/ENFILE (and other accept errors) backs off 5 ms, doubling up to
/// 1 s, and retries; the backoff resets after the next successful accept.
async fn accept_loop(listener: TcpListener, lazy_buffer: bool) {
    let mut backoff = Duration::ZERO;
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                backoff = Duration::ZERO;
                if lazy_buffer {
                    tokio::spawn(echo_lazy(stream));
                } else {
                    tokio::spawn(echo(stream));
                }
            }
            Err(e) => {
                backoff = if backoff.is_zero() {
                    Duration::from_millis(5)
                } else {
                    (backoff * 2).min(Duration::from_secs(1))
                };
                if matches!(e.raw_os_error(), Some(EMFILE | ENFILE)) {
                    eprintln!("echo: accept: {e}; retrying in {backoff:?}");
                }
                tokio::time::sleep(backoff).await;
            }
        }
    }
}

/// Echoes until EOF or any error (reset etc.), then drops (closes) the connection. `write_all`
/// loops over partial writes.
async fn echo(mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut buf = [0u8; BUF_SIZE];
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if stream.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The same echo, holding no buffer while it waits: readability first, then a buffer for this
/// one read and write.
async fn echo_lazy(mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    loop {
        if stream.readable().await.is_err() {
            return;
        }
        let mut buf = vec![0u8; BUF_SIZE];
        let n = match stream.try_read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return,
        };
        if stream.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
