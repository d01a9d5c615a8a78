//! hyper peer for weft-bench's HTTP suites (see ../../../README.md): the routes of
//! examples/hello_http.cpp served by hyper 1.x's HTTP/1 server on the tokio runtime.
//!
//!     hyper [-h HOST] [-p PORT] [-t THREADS] [--cert CHAIN.pem --key KEY.pem] [--h2 1]
//!
//! With `--cert` and `--key` every connection is TLS (tokio-rustls with rustls's defaults: TLS
//! 1.2 and 1.3, its default crypto provider, ALPN `http/1.1`), as hyper's own TLS examples set
//! it up. With `--h2 1` every connection is HTTP/2 with prior knowledge (h2c: hyper's `http2`
//! connection builder on tokio's executor, its default settings).
//!
//! `GET /` answers 200 `Hello, World!` (text/plain), `POST /echo` the request body (at most
//! 1 MiB, else 413); other paths 404, other methods 405. One `tokio::spawn`ed task per
//! connection runs `hyper::server::conn::http1`, keep-alive on (hyper's default). No timer is
//! given to hyper, so its header-read timeout (a timer armed for every request's headers) is
//! off, as in hyper's defaults. The one setting beyond them: `pipeline_flush(true)`, which lets
//! hyper answer pipelined requests in one flush (its own documented knob for pipelining; it
//! changes nothing for one request at a time). The listener sets TCP_DEFER_ACCEPT (1 s), as
//! every HTTP server of weft-bench's comparison does (weft's default, nginx's `deferred`): a
//! connection is accepted once its request's first bytes have arrived. Prints
//! `listening on HOST:PORT` once bound; exits 0 on SIGTERM/SIGINT (open connections are
//! dropped). Exit code 2 on bad arguments, 1 if the listener cannot be set up.

use std::convert::Infallible;
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::exit;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpSocket};
use tokio::signal::unix::{signal, SignalKind};
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;

const BACKLOG: u32 = 4096;
const BODY_LIMIT: usize = 1 << 20;
const HELLO: &[u8] = b"Hello, World!";
/// TCP_DEFER_ACCEPT: how long the kernel holds a connection that sent nothing (weft's default).
const DEFER_ACCEPT_SECS: libc::c_int = 1;

fn usage(msg: &str) -> ! {
    eprintln!(
        "hyper: {msg}\nusage: hyper [-h HOST] [-p PORT] [-t THREADS] [--cert F --key F] [--h2 1]"
    );
    exit(2);
}

fn fail(what: &str, err: std::io::Error) -> ! {
    eprintln!("hyper: {what}: {err}");
    exit(1);
}

fn text(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

fn not_allowed(allow: &'static str) -> Response<Full<Bytes>> {
    let mut resp = text(StatusCode::METHOD_NOT_ALLOWED, Bytes::from_static(b"Method Not Allowed"));
    resp.headers_mut().insert(ALLOW, HeaderValue::from_static(allow));
    resp
}

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let resp = match (req.uri().path(), req.method()) {
        ("/", &Method::GET) | ("/", &Method::HEAD) => text(StatusCode::OK, Bytes::from_static(HELLO)),
        ("/", _) => not_allowed("GET, HEAD"),
        ("/echo", &Method::POST) => match Limited::new(req.into_body(), BODY_LIMIT).collect().await {
            Ok(body) => text(StatusCode::OK, body.to_bytes()),
            Err(_) => text(StatusCode::PAYLOAD_TOO_LARGE, Bytes::from_static(b"Payload Too Large")),
        },
        ("/echo", _) => not_allowed("POST"),
        _ => text(StatusCode::NOT_FOUND, Bytes::from_static(b"Not Found")),
    };
    Ok(resp)
}

fn main() {
    let (mut host, mut port, mut threads) = ("127.0.0.1".to_string(), 8080u16, 0usize);
    let (mut cert, mut key, mut h2) = (None, None, false);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let Some(value) = it.next() else { usage(&format!("{flag}: missing value")) };
        match flag.as_str() {
            "-h" => host = value,
            "-p" => port = value.parse().unwrap_or_else(|_| usage(&format!("bad port {value:?}"))),
            "-t" => {
                threads = value.parse().unwrap_or_else(|_| usage(&format!("bad thread count {value:?}")))
            }
            "--cert" => cert = Some(value),
            "--key" => key = Some(value),
            "--h2" => h2 = value == "1",
            _ => usage(&format!("unknown option {flag:?}")),
        }
    }
    let tls = match (cert, key) {
        (Some(cert), Some(key)) => Some(tls_acceptor(&cert, &key)),
        (None, None) => None,
        _ => usage("--cert and --key go together"),
    };
    let addr: SocketAddr = match (host.as_str(), port).to_socket_addrs() {
        Ok(mut addrs) => addrs.next().unwrap_or_else(|| usage("host resolves to no address")),
        Err(e) => fail(&format!("resolving {host:?}"), e),
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_io().enable_time();
    if threads > 0 {
        builder.worker_threads(threads);
    }
    let rt = builder.build().unwrap_or_else(|e| fail("building the runtime", e));
    rt.block_on(async {
        let mut term = signal(SignalKind::terminate()).unwrap_or_else(|e| fail("SIGTERM", e));
        let mut int = signal(SignalKind::interrupt()).unwrap_or_else(|e| fail("SIGINT", e));
        let listener = listen(addr).unwrap_or_else(|e| fail(&format!("listening on {addr}"), e));
        let bound = listener.local_addr().map(|a| a.port()).unwrap_or(port);
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on {host}:{bound}");
        let _ = out.flush();
        drop(out);
        // In a spawned task, for the reason tokio-echo gives (spawns from a worker stay local).
        tokio::spawn(accept_loop(listener, tls, h2));
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    });
    rt.shutdown_background();
    exit(0);
}

fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    defer_accept(&socket, DEFER_ACCEPT_SECS)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// setsockopt(IPPROTO_TCP, TCP_DEFER_ACCEPT, secs) on the listening socket.
fn defer_accept(socket: &TcpSocket, secs: libc::c_int) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid descriptor, a c_int option value and its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&secs as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A rustls server configuration with the chain and key of two PEM files, ALPN http/1.1.
fn tls_acceptor(cert: &str, key: &str) -> TlsAcceptor {
    let open = |path: &str| {
        std::fs::File::open(path).map(std::io::BufReader::new).unwrap_or_else(|e| fail(path, e))
    };
    let chain = rustls_pemfile::certs(&mut open(cert))
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| fail(cert, e));
    let key = rustls_pemfile::private_key(&mut open(key))
        .unwrap_or_else(|e| fail(key, e))
        .unwrap_or_else(|| usage(&format!("{key}: no private key")));
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap_or_else(|e| fail("certificate", std::io::Error::other(e)));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    TlsAcceptor::from(std::sync::Arc::new(config))
}

/// Serves one connection (plain or TLS) as HTTP/1.1, or HTTP/2 with prior knowledge (`h2`).
async fn serve<S>(io: S, h2: bool)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    if h2 {
        let _ = http2::Builder::new(TokioExecutor::new())
            .serve_connection(TokioIo::new(io), service_fn(handle))
            .await;
    } else {
        let _ = http1::Builder::new()
            .pipeline_flush(true)
            .serve_connection(TokioIo::new(io), service_fn(handle))
            .await;
    }
}

/// Accepts forever; accept errors (EMFILE, ...) back off 5 ms doubling to 1 s, as tokio-echo.
async fn accept_loop(listener: TcpListener, tls: Option<TlsAcceptor>, h2: bool) {
    let mut backoff = Duration::ZERO;
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                backoff = Duration::ZERO;
                let _ = stream.set_nodelay(true);
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(stream).await {
                                serve(stream, h2).await;
                            }
                        }
                        None => serve(stream, h2).await,
                    }
                });
            }
            Err(e) => {
                backoff = if backoff.is_zero() {
                    Duration::from_millis(5)
                } else {
                    (backoff * 2).min(Duration::from_secs(1))
                };
                eprintln!("hyper: accept: {e}; retrying in {backoff:?}");
                tokio::time::sleep(backoff).await;
            }
        }
    }
}
