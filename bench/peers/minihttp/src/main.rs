//! may_minihttp peer for weft-bench's HTTP suites (see ../README.md): the pipelining ceiling,
//! a server built for TechEmpower's plaintext test (it answers every request of a read before
//! it writes, and renders Date once a second), with the routes of examples/hello_http.cpp.
//!
//!     minihttp [-h HOST] [-p PORT] [-t THREADS]
//!
//! `GET /` answers 200 `Hello, World!` (text/plain), `POST /echo` the request body (at most
//! 1 MiB, else 413); other paths 404, other methods 405. THREADS sets may's worker threads
//! (0 or absent: number of CPUs). Prints `listening on HOST:PORT` once bound. SIGTERM/SIGINT
//! end the process (their default action: may has no signal handling of its own).

use std::io::{self, Read};
use std::process::exit;

use may_minihttp::{HttpServer, HttpService, Request, Response};

const BODY_LIMIT: u64 = 1 << 20;

#[derive(Clone)]
struct Hello;

impl HttpService for Hello {
    fn call(&mut self, req: Request, res: &mut Response) -> io::Result<()> {
        res.header("Content-Type: text/plain");
        match (req.path(), req.method()) {
            ("/", "GET") => res.body("Hello, World!"),
            ("/echo", "POST") => {
                let mut body = Vec::new();
                req.body().take(BODY_LIMIT + 1).read_to_end(&mut body)?;
                if body.len() as u64 > BODY_LIMIT {
                    res.status_code(413, "Payload Too Large").body("Payload Too Large");
                } else {
                    res.body_vec(body);
                }
            }
            ("/", _) => {
                res.status_code(405, "Method Not Allowed").header("Allow: GET").body("Method Not Allowed")
            }
            ("/echo", _) => {
                res.status_code(405, "Method Not Allowed").header("Allow: POST").body("Method Not Allowed")
            }
            _ => res.status_code(404, "Not Found").body("Not Found"),
        }
        Ok(())
    }
}

fn usage(msg: &str) -> ! {
    eprintln!("minihttp: {msg}\nusage: minihttp [-h HOST] [-p PORT] [-t THREADS]");
    exit(2);
}

fn main() {
    let (mut host, mut port, mut threads) = ("127.0.0.1".to_string(), 8080u16, 0usize);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let Some(value) = it.next() else { usage(&format!("{flag}: missing value")) };
        match flag.as_str() {
            "-h" => host = value,
            "-p" => port = value.parse().unwrap_or_else(|_| usage(&format!("bad port {value:?}"))),
            "-t" => {
                threads = value.parse().unwrap_or_else(|_| usage(&format!("bad thread count {value:?}")))
            }
            _ => usage(&format!("unknown option {flag:?}")),
        }
    }
    if threads == 0 {
        threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    }
    may::config().set_workers(threads);
    let server = HttpServer(Hello).start((host.as_str(), port)).unwrap_or_else(|e| {
        eprintln!("minihttp: listening on {host}:{port}: {e}");
        exit(1);
    });
    println!("listening on {host}:{port}");
    let _ = server.join();
}
