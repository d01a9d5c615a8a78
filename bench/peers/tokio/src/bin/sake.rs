//! tokio peer for the channel scenarios of weft-bench's Sake suite (see ../../README.md).
//!
//!     sake SCENARIO key=value ...
//!
//! runs one measurement and prints one JSON object per line on stdout:
//! `{"metric": "<name>", "unit": "<unit>", "value": <number>}`.
//! Channels are `tokio::sync::mpsc` (bounded; tokio has no capacity-0 channel, so `cap` >= 1).
//! Diagnostics go to stderr. Exit codes: 0 ok, 1 wrong result, 2 usage error or unsupported
//! scenario (the five rows of the seed's table are written for weft and Go only).

use std::collections::HashMap;
use std::process::exit;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((scenario, rest)) = args.split_first() else {
        usage("missing scenario");
    };
    let params = Params::parse(rest);

    let keys: &[&str] = match scenario.as_str() {
        "chan_pingpong" => &["rounds", "cap"],
        "chan_throughput" => &["items", "cap"],
        "chan_uncontended" => &["pairs", "cap"],
        "direct" | "spawn_only" | "pool_map_serial" | "chan_coord" | "spawn_pool_map" => usage(
            &format!("scenario {scenario:?} is not implemented for tokio"),
        ),
        other => usage(&format!("unknown scenario {other:?}")),
    };
    params.warn_unknown(keys);

    // workers=N -> worker_threads(N); 0 or absent keeps tokio's default (number of CPUs).
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    let workers = params.uint("workers", 0);
    if workers > 0 {
        builder.worker_threads(workers as usize);
    }
    let rt = builder
        .build()
        .unwrap_or_else(|e| fail(&format!("runtime: {e}")));

    // The driver runs in a spawned task, not in block_on (which polls on the main thread, not a
    // worker): its spawns then go to a worker's local queue, as in the other peers.
    let scenario = scenario.clone();
    rt.block_on(async move {
        tokio::spawn(async move {
            match scenario.as_str() {
                "chan_pingpong" => {
                    ping_pong(
                        params.positive("rounds", 100_000),
                        params.positive("cap", 1),
                    )
                    .await
                }
                "chan_throughput" => {
                    throughput(
                        params.positive("items", 1_000_000),
                        params.positive("cap", 1024),
                    )
                    .await
                }
                "chan_uncontended" => {
                    uncontended(
                        params.positive("pairs", 1_000_000),
                        params.positive("cap", 1024),
                    )
                    .await
                }
                _ => unreachable!(),
            }
        })
        .await
        .unwrap_or_else(|e| fail(&format!("driver task: {e}")))
    });
}

// --- scenarios ---------------------------------------------------------------------------------

/// chan_pingpong: the driver sends i on `ping`, a spawned task answers i+1 on `pong`.
async fn ping_pong(rounds: u64, cap: u64) {
    async fn run(rounds: u64, cap: usize) -> (Duration, bool) {
        let (ping_tx, mut ping_rx) = mpsc::channel::<u64>(cap);
        let (pong_tx, mut pong_rx) = mpsc::channel::<u64>(cap);
        let other = tokio::spawn(async move {
            while let Some(v) = ping_rx.recv().await {
                if pong_tx.send(v + 1).await.is_err() {
                    break;
                }
            }
        });
        let mut ok = true;
        let start = Instant::now();
        for i in 0..rounds {
            ping_tx.send(i).await.unwrap();
            ok &= pong_rx.recv().await == Some(i + 1);
        }
        let elapsed = start.elapsed();
        drop(ping_tx);
        other.await.unwrap();
        (elapsed, ok)
    }
    run((rounds / 10).max(1), cap as usize).await;
    let (elapsed, ok) = run(rounds, cap as usize).await;
    if !ok {
        fail("chan_pingpong: wrong value");
    }
    emit(
        "ns_per_round_trip",
        "ns",
        elapsed.as_nanos() as f64 / rounds as f64,
    );
}

/// chan_throughput: a spawned producer sends 0..items and drops its sender; the driver receives
/// until the channel is closed.
async fn throughput(items: u64, cap: u64) {
    async fn run(n: u64, cap: usize) -> (Duration, u64) {
        let start = Instant::now();
        let (tx, mut rx) = mpsc::channel::<u64>(cap);
        let producer = tokio::spawn(async move {
            for i in 0..n {
                if tx.send(i).await.is_err() {
                    break;
                }
            }
        });
        let mut sum = 0u64;
        while let Some(v) = rx.recv().await {
            sum += v;
        }
        producer.await.unwrap();
        (start.elapsed(), sum)
    }
    run((items / 10).max(1), cap as usize).await;
    let (elapsed, sum) = run(items, cap as usize).await;
    if sum != items * (items - 1) / 2 {
        fail("chan_throughput: lost an item");
    }
    emit(
        "ns_per_item",
        "ns",
        elapsed.as_nanos() as f64 / items as f64,
    );
}

/// chan_uncontended: send then recv on one task; the buffer never fills.
async fn uncontended(pairs: u64, cap: u64) {
    async fn run(n: u64, cap: usize) -> (Duration, u64) {
        let (tx, mut rx) = mpsc::channel::<u64>(cap);
        let mut sum = 0u64;
        let start = Instant::now();
        for i in 0..n {
            tx.send(i).await.unwrap();
            sum += rx.recv().await.unwrap();
        }
        (start.elapsed(), sum)
    }
    run((pairs / 10).max(1), cap as usize).await;
    let (elapsed, sum) = run(pairs, cap as usize).await;
    if sum != pairs * (pairs - 1) / 2 {
        fail("chan_uncontended: lost an item");
    }
    emit(
        "ns_per_pair",
        "ns",
        elapsed.as_nanos() as f64 / pairs as f64,
    );
}

// --- protocol helpers --------------------------------------------------------------------------

fn emit(metric: &str, unit: &str, value: f64) {
    // Rust's f64 Display never uses exponent notation, so this is always a JSON number.
    println!("{{\"metric\": \"{metric}\", \"unit\": \"{unit}\", \"value\": {value}}}");
}

fn fail(msg: &str) -> ! {
    eprintln!("sake: {msg}");
    exit(1)
}

fn usage(msg: &str) -> ! {
    eprintln!(
        "sake: {msg}\nusage: sake chan_pingpong|chan_throughput|chan_uncontended key=value ..."
    );
    exit(2)
}

struct Params(HashMap<String, String>);

impl Params {
    fn parse(args: &[String]) -> Self {
        let mut map = HashMap::new();
        for a in args {
            match a.split_once('=') {
                Some((k, v)) if !k.is_empty() => map.insert(k.to_string(), v.to_string()),
                _ => usage(&format!("bad argument {a:?}, want key=value")),
            };
        }
        Params(map)
    }

    fn warn_unknown(&self, keys: &[&str]) {
        for k in self.0.keys() {
            if k != "workers" && !keys.contains(&k.as_str()) {
                eprintln!("sake: warning: parameter {k:?} ignored");
            }
        }
    }

    fn uint(&self, key: &str, default: u64) -> u64 {
        match self.0.get(key) {
            None => default,
            Some(s) => s
                .parse()
                .unwrap_or_else(|_| usage(&format!("{key}={s} is not a non-negative integer"))),
        }
    }

    fn positive(&self, key: &str, default: u64) -> u64 {
        let v = self.uint(key, default);
        if v == 0 {
            usage(&format!("{key} must be > 0"));
        }
        v
    }
}
