//! tokio peer for weft-bench's Coflux scenarios (see ../README.md).
//!
//!     coflux SCENARIO key=value ...
//!
//! runs one measurement and prints one JSON object per line on stdout:
//! `{"metric": "<name>", "unit": "<unit>", "value": <number>}`.
//! Diagnostics go to stderr. Exit codes: 0 ok, 1 wrong result, 2 usage error or unsupported
//! scenario (`fib`: tokio has no cheap fork-join, a spawn per call would take minutes).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::process::exit;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((scenario, rest)) = args.split_first() else {
        usage("missing scenario");
    };
    let params = Params::parse(rest);

    let keys: &[&str] = match scenario.as_str() {
        "spawn" => &["tasks"],
        "pipeline" => &["C", "D", "iters"],
        "parked_memory" => &["tasks"],
        "idle_cpu" => &["seconds"],
        "fib" => usage("scenario \"fib\" is not implemented for tokio (no cheap fork-join)"),
        other => usage(&format!("unknown scenario {other:?}")),
    };
    params.warn_unknown(keys);

    // workers=N -> worker_threads(N); 0 or absent keeps tokio's default (number of CPUs).
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_time();
    let workers = params.uint("workers", 0);
    if workers > 0 {
        builder.worker_threads(workers as usize);
    }
    let rt = builder
        .build()
        .unwrap_or_else(|e| fail(&format!("runtime: {e}")));

    // block_on polls its future on the main thread, which is not a worker: a tokio::spawn from
    // there goes through the shared injection queue. Each scenario therefore runs its driver in
    // a spawned task, so that spawns land in a worker's local queue as they do for the Go
    // and weft drivers.
    let scenario = scenario.clone();
    rt.block_on(async move {
        tokio::spawn(async move {
            match scenario.as_str() {
                "spawn" => spawn(params.positive("tasks", 1_000_000)).await,
                "pipeline" => {
                    pipeline(
                        params.positive("C", 8),
                        params.positive("D", 5),
                        params.positive("iters", 2000),
                    )
                    .await
                }
                "parked_memory" => parked_memory(params.positive("tasks", 100_000)).await,
                "idle_cpu" => idle_cpu(params.float("seconds", 1.0)).await,
                _ => unreachable!(),
            }
        })
        .await
        .unwrap_or_else(|e| fail(&format!("driver task: {e}")))
    });
}

// --- scenarios ---------------------------------------------------------------------------------

/// spawn: the driver task spawns `tasks` tasks, each returning its index, keeps the JoinHandles
/// in a Vec and awaits them in order. (A Vec of JoinHandles measured faster than a JoinSet,
/// which adds its own bookkeeping per task.)
async fn spawn(tasks: u64) {
    async fn run(n: u64) -> (Duration, u64) {
        let start = Instant::now();
        let handles: Vec<_> = (0..n).map(|i| tokio::spawn(async move { i })).collect();
        let mut sum = 0u64;
        for h in handles {
            sum += h.await.unwrap();
        }
        (start.elapsed(), sum)
    }
    run((tasks / 10).max(1)).await; // warm-up: grows the allocator's caches and the Vec
    let (elapsed, sum) = run(tasks).await;
    if sum != tasks * (tasks - 1) / 2 {
        fail(&format!(
            "spawn: sum of results {sum}, want {}",
            tasks * (tasks - 1) / 2
        ));
    }
    emit(
        "ns_per_task",
        "ns",
        elapsed.as_nanos() as f64 / tasks as f64,
    );
}

/// One link of a pipeline: stage i < d spawns stage i+1 as a new task and awaits its
/// JoinHandle, so every stage costs one schedule + suspend + wake-up hand-off.
/// Boxed because the future of a recursive async fn cannot name its own type; the Box is one
/// extra allocation per stage next to the task allocation tokio::spawn already makes.
fn stage(i: u64, d: u64) -> Pin<Box<dyn Future<Output = u64> + Send>> {
    Box::pin(async move {
        if i == d {
            return 1;
        }
        tokio::spawn(stage(i + 1, d)).await.unwrap() + 1
    })
}

/// pipeline: each iteration spawns stage 1 of C pipelines (so a pipeline is D tasks) and
/// awaits all C results.
async fn pipeline(c: u64, d: u64, iters: u64) {
    async fn run(c: u64, d: u64, iters: u64) -> (Duration, bool) {
        let mut ok = true;
        let mut handles = Vec::with_capacity(c as usize);
        let start = Instant::now();
        for _ in 0..iters {
            handles.extend((0..c).map(|_| tokio::spawn(stage(1, d))));
            for h in handles.drain(..) {
                ok &= h.await.unwrap() == d;
            }
        }
        (start.elapsed(), ok)
    }
    run(c, d, (iters / 10).max(1)).await; // warm-up
    let (elapsed, ok) = run(c, d, iters).await;
    if !ok {
        fail(&format!(
            "pipeline: a pipeline returned a value other than D={d}"
        ));
    }
    emit(
        "ns_per_pipeline",
        "ns",
        elapsed.as_nanos() as f64 / (iters * c) as f64,
    );
}

/// parked_memory: RSS growth per spawned task blocked in a long tokio::time::sleep. No warm-up:
/// the parked tasks cannot be reclaimed, so a warm-up pass would be counted in the baseline.
async fn parked_memory(tasks: u64) {
    let before = vm_rss();
    // Each task adds a permit once it has polled its sleep (registered the timer) and is about
    // to return Pending; the driver waits for all of them.
    let parked = Arc::new(Semaphore::new(0));
    for _ in 0..tasks {
        let parked = parked.clone();
        tokio::spawn(async move {
            let sleep = tokio::time::sleep(Duration::from_secs(3600));
            tokio::pin!(sleep);
            let _ = poll_once(sleep.as_mut()).await;
            parked.add_permits(1);
            sleep.await;
        });
    }
    let need = u32::try_from(tasks).unwrap_or_else(|_| usage("tasks too large"));
    let _ = parked.acquire_many(need).await.unwrap();
    let after = vm_rss();
    emit(
        "bytes_per_parked_task",
        "B",
        (after - before) as f64 / tasks as f64,
    );
    exit(0); // do not wait for the sleepers
}

/// Polls `fut` once (so a timer registers itself) and reports whether it was ready.
async fn poll_once<F: Future + Unpin>(mut fut: F) -> bool {
    std::future::poll_fn(|cx| std::task::Poll::Ready(Pin::new(&mut fut).poll(cx).is_ready())).await
}

/// idle_cpu: process CPU time (user + system, getrusage) while the runtime has nothing to do
/// but one task sleeping for `seconds`.
async fn idle_cpu(seconds: f64) {
    if !seconds.is_finite() || seconds <= 0.0 {
        usage("seconds must be > 0");
    }
    // Warm-up: let the workers finish start-up and park, so only the idle steady state counts.
    tokio::time::sleep(Duration::from_millis(50)).await;

    let (cpu0, wall0) = (cpu_seconds(), Instant::now());
    tokio::spawn(tokio::time::sleep(Duration::from_secs_f64(seconds)))
        .await
        .unwrap();
    let (cpu, wall) = (cpu_seconds() - cpu0, wall0.elapsed().as_secs_f64());
    emit("idle_cpu_percent", "%", 100.0 * cpu / wall);
}

// --- helpers -----------------------------------------------------------------------------------

fn emit(metric: &str, unit: &str, value: f64) {
    // Rust's f64 Display never uses exponent notation, so this is always a JSON number.
    println!("{{\"metric\": \"{metric}\", \"unit\": \"{unit}\", \"value\": {value}}}");
}

fn fail(msg: &str) -> ! {
    eprintln!("coflux: {msg}");
    exit(1)
}

fn usage(msg: &str) -> ! {
    eprintln!("coflux: {msg}\nusage: coflux spawn|pipeline|parked_memory|idle_cpu key=value ...");
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
                eprintln!("coflux: warning: parameter {k:?} ignored");
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

    fn float(&self, key: &str, default: f64) -> f64 {
        match self.0.get(key) {
            None => default,
            Some(s) => s
                .parse()
                .unwrap_or_else(|_| usage(&format!("{key}={s} is not a number"))),
        }
    }
}

/// Resident set size from /proc/self/status, in bytes.
fn vm_rss() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_else(|e| fail(&format!("read /proc/self/status: {e}")));
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap_or_else(|| fail("no VmRSS in /proc/self/status"));
    let kb: i64 = line
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap_or_else(|_| fail(&format!("cannot parse VmRSS:{line}")));
    kb * 1024
}

// getrusage(2), declared here to keep tokio the only dependency (no libc crate).
#[repr(C)]
struct Timeval {
    tv_sec: i64,
    tv_usec: i64,
}

#[repr(C)]
struct Rusage {
    ru_utime: Timeval,
    ru_stime: Timeval,
    ru_rest: [i64; 14], // maxrss .. nivcsw, unused here
}

extern "C" {
    fn getrusage(who: i32, usage: *mut Rusage) -> i32;
}

/// User + system CPU time of the whole process so far, in seconds.
fn cpu_seconds() -> f64 {
    const RUSAGE_SELF: i32 = 0;
    let mut ru = std::mem::MaybeUninit::<Rusage>::uninit();
    // SAFETY: Rusage matches struct rusage on 64-bit Linux; getrusage fills it completely.
    let ru = unsafe {
        if getrusage(RUSAGE_SELF, ru.as_mut_ptr()) != 0 {
            fail("getrusage failed");
        }
        ru.assume_init()
    };
    let secs = |t: &Timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(&ru.ru_utime) + secs(&ru.ru_stime)
}
