//! Model of the parking protocol (runtime_core's class comment states it). Each step quotes the
//! C++ it follows (`@"..."`, checked by check_anchors.py).
//! Property: no wake-up is lost. A worker that finds nothing parks in its driver; a submitter
//! that publishes work afterwards must wake it, or the worker must see the work before it
//! sleeps. If a wake-up were lost the worker would sleep forever with work queued: every
//! thread blocked, which loom reports as a deadlock (the test fails).
//! Follows: src/sched/runtime_core.hpp
//! Follows: src/sched/runtime_core.cpp
//! Follows: src/sched/worker.hpp
//! Follows: src/sched/worker.cpp
use loom::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering::*};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

// SEQCST: loom 0.7 models SeqCst loads and stores as AcqRel (its documented limitation), so on
// its own it allows the store-buffering outcome that C++ forbids between the parker's
// `idle_count.fetch_add(seq_cst)` + `injected_.load(seq_cst)` and the submitter's
// `injected_` publication + seq_cst fence + `idle_count.load(seq_cst)`. The model adds a SeqCst
// fence after the parker's RMW (loom does model fences); in C++ the seq_cst RMW and loads are
// in the single total order S, which gives the same guarantee (runtime_core.hpp's argument).

// MUTANT (feature "mutant"): notify_parked without its seq_cst fence, so the submitter's
// publication and its idle_count load may pass the parker's idle_count increment and queue
// check (store buffering): the worker sleeps with the work queued.
const MUTANT: bool = cfg!(feature = "mutant");

/// A worker's park driver (futex_driver / the reactor's eventfd): an unpark before the park
/// makes the park return at once (a token), as both drivers do.
struct Driver {
    token: Mutex<bool>,
    cv: Condvar,
}

impl Driver {
    fn new() -> Self {
        Driver { token: Mutex::new(false), cv: Condvar::new() }
    }
    fn park(&self) {
        let mut t = self.token.lock().unwrap();
        while !*t {
            t = self.cv.wait(t).unwrap();
        }
        *t = false;
    }
    fn unpark(&self) {
        *self.token.lock().unwrap() = true;
        self.cv.notify_one();
    }
}

struct Runtime {
    // @"std::atomic<std::size_t> injected_{0};  // == injector_.size()"
    injected: AtomicUsize,
    // @"std::deque<void*> injector_;            // guarded by inject_mu_" (a count here)
    injector: Mutex<usize>,
    // @"std::vector<sched_worker*> idle;      // guarded by idle_mu" (worker indices here)
    idle: Mutex<Vec<usize>>,
    idle_count: AtomicUsize, // @"std::atomic<unsigned> idle_count{0};"
    searching: AtomicUsize,  // @"std::atomic<unsigned> searching{0};"
    // @worker.hpp"bool in_idle_list = false;" (guarded by idle_mu in C++)
    in_idle_list: Vec<Mutex<bool>>,
    // @worker.hpp"bool searching = false;" (set by a waker, under idle_mu)
    wsearching: Vec<AtomicBool>,
    drivers: Vec<Driver>,
}

impl Runtime {
    fn new(workers: usize) -> Self {
        Runtime {
            injected: AtomicUsize::new(0),
            injector: Mutex::new(0),
            idle: Mutex::new(Vec::new()),
            idle_count: AtomicUsize::new(0),
            searching: AtomicUsize::new(0),
            in_idle_list: (0..workers).map(|_| Mutex::new(false)).collect(),
            wsearching: (0..workers).map(|_| AtomicBool::new(false)).collect(),
            drivers: (0..workers).map(|_| Driver::new()).collect(),
        }
    }

    // inject(): push under the lock, publish the count (seq_cst), then notify_parked.
    fn inject(&self) {
        {
            let mut q = self.injector.lock().unwrap(); // @"std::lock_guard lock(inject_mu_);"
            *q += 1; // @"injector_.insert(injector_.end(), hs, hs + n);"
            // @"injected_.store(injector_.size(), std::memory_order_seq_cst); } notify_parked();"
            self.injected.store(*q, SeqCst);
        }
        self.notify_parked();
    }

    // take_injected(): one task, if any (a fair share of a burst; the model injects one at a
    // time).
    fn take_injected(&self) -> bool {
        // @"if (injected_.load(std::memory_order_relaxed) == 0) { return 0; }"
        if self.injected.load(Relaxed) == 0 {
            return false;
        }
        let mut q = self.injector.lock().unwrap();
        if *q == 0 {
            return false;
        }
        *q -= 1;
        // @"injector_.erase(injector_.begin(), injector_.begin() + static_cast<std::ptrdiff_t>(n)); injected_.store(injector_.size(), std::memory_order_seq_cst);"
        self.injected.store(*q, SeqCst);
        true
    }

    // @"auto runtime_core::notify_parked() noexcept -> bool {"
    fn notify_parked(&self) {
        if !MUTANT {
            fence(SeqCst); // @"std::atomic_thread_fence(std::memory_order_seq_cst);"
        }
        // @"if (searching.load(std::memory_order_seq_cst) != 0 || idle_count.load(std::memory_order_seq_cst) == 0) { return false; }"
        if self.searching.load(SeqCst) != 0 || self.idle_count.load(SeqCst) == 0 {
            return;
        }
        let w;
        {
            let mut idle = self.idle.lock().unwrap(); // @"std::lock_guard lock(idle_mu);"
            // @"if (idle.empty() || searching.load(std::memory_order_relaxed) != 0) { return false; }"
            if idle.is_empty() || self.searching.load(Relaxed) != 0 {
                return;
            }
            w = idle.pop().unwrap(); // @"w = idle.back(); idle.pop_back();"
            *self.in_idle_list[w].lock().unwrap() = false; // @"w->in_idle_list = false;"
            // @"idle_count.fetch_sub(1, std::memory_order_seq_cst);"
            self.idle_count.fetch_sub(1, SeqCst);
            // @"w->searching = true;" (ordered by the unpark)
            self.wsearching[w].store(true, Relaxed);
            // @"searching.fetch_add(1, std::memory_order_seq_cst); }"
            self.searching.fetch_add(1, SeqCst);
        }
        self.drivers[w].unpark(); // @"w->unpark(); return true;"
    }

    // @"void sched_worker::park() {"; `searching` is the worker's own flag.
    fn park(&self, me: usize) {
        // @"if (searching) { searching = false; rt_.searching.fetch_sub(1, std::memory_order_seq_cst); }"
        if self.wsearching[me].swap(false, Relaxed) {
            self.searching.fetch_sub(1, SeqCst);
        }
        {
            let mut idle = self.idle.lock().unwrap();
            idle.push(me); // @"rt_.idle.push_back(this);"
            *self.in_idle_list[me].lock().unwrap() = true; // @"in_idle_list = true;"
            // @"rt_.idle_count.fetch_add(1, std::memory_order_seq_cst);"
            self.idle_count.fetch_add(1, SeqCst);
        }
        fence(SeqCst); // see SEQCST above
        let unlist = || {
            let mut idle = self.idle.lock().unwrap();
            let mut listed = self.in_idle_list[me].lock().unwrap();
            if *listed {
                idle.retain(|&w| w != me);
                *listed = false;
                self.idle_count.fetch_sub(1, SeqCst);
            }
        };
        // @"if (rt_.has_work_for(*this, stealable_) || !inbox_empty() ||": the injector (the
        // model's only queue), seq_cst (@"return injected_.load(std::memory_order_seq_cst) == 0;")
        if self.injected.load(SeqCst) != 0 {
            unlist();
            return;
        }
        self.drivers[me].park(); // @"driver_->park(timeout);"
        unlist();
    }
}

// A worker runs until the workers took `want` tasks together (the shared `done`): the loop of
// @"void sched_worker::run() {" with the injector as its only source of work.
fn worker(rt: &Runtime, me: usize, done: &AtomicUsize, want: usize) {
    loop {
        if done.load(SeqCst) == want {
            return;
        }
        if rt.take_injected() {
            if rt.wsearching[me].swap(false, Relaxed) {
                // @"// The last searcher to find work wakes another, so bursts fan out."
                // @"if (rt_.searching.fetch_sub(1, std::memory_order_seq_cst) == 1) {"
                if rt.searching.fetch_sub(1, SeqCst) == 1 {
                    rt.notify_parked();
                }
            }
            if done.fetch_add(1, SeqCst) + 1 == want {
                // All done: wake everyone so the model's threads end (the runtime's shutdown
                // sets `terminate` and unparks every worker). A worker left asleep with work
                // queued never gets here: that is the deadlock loom reports.
                for d in &rt.drivers {
                    d.unpark();
                }
            }
            continue;
        }
        rt.park(me);
    }
}

#[test]
fn one_worker_never_misses_a_submission() {
    loom::model(|| {
        let rt = Arc::new(Runtime::new(1));
        let done = Arc::new(AtomicUsize::new(0));
        let w = {
            let (rt, done) = (rt.clone(), done.clone());
            thread::spawn(move || worker(&rt, 0, &done, 2))
        };
        rt.inject();
        rt.inject();
        w.join().unwrap();
        assert_eq!(done.load(SeqCst), 2);
    });
}

#[test]
fn two_workers_and_an_outside_submitter() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(|| {
        let rt = Arc::new(Runtime::new(2));
        let done = Arc::new(AtomicUsize::new(0));
        let ws: Vec<_> = (0..2)
            .map(|i| {
                let (rt, done) = (rt.clone(), done.clone());
                thread::spawn(move || worker(&rt, i, &done, 2))
            })
            .collect();
        rt.inject();
        rt.inject();
        for w in ws {
            w.join().unwrap();
        }
        assert_eq!(done.load(SeqCst), 2);
    });
}
