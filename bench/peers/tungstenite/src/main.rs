//! tungstenite-echo: the tokio-tungstenite peer of weft-bench's websocket suite. A WebSocket
//! echo server on 127.0.0.1:PORT (any path), 2 worker threads: each connection is a task that
//! reads a message and writes it back (pings are answered by tungstenite).
//!
//!     tungstenite-echo -p PORT
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpListener;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = args
        .iter()
        .position(|a| a == "-p")
        .and_then(|i| args.get(i + 1))
        .and_then(|p| p.parse().ok())
        .unwrap_or(9300);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else { return };
                while let Some(Ok(msg)) = ws.next().await {
                    if msg.is_text() || msg.is_binary() {
                        if ws.send(msg).await.is_err() {
                            return;
                        }
                    } else if msg.is_close() {
                        return;
                    }
                }
            });
        }
    });
}
