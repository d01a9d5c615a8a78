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
//! Follows: include/weft/core/detail/worker_base.hpp
//! Follows: include/weft/core/detail/work_deque.hpp
use loom::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering::*};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

// SEQCST: loom 0.7 models SeqCst loads and stores as AcqRel (its documented limitation), so on
// its own it allows the store-buffering outcome that C++ forbids between the parker's
// `idle_count.fetch_add(seq_cst)` + `injected_.load(seq_cst)` and the submitter's
// `injected_` publication + seq_cst fence + `idle_count.load(seq_cst)`. The model adds a SeqCst
// fence after the parker's RMW (loom does model fences); in C++ the seq_cst RMW and loads are
// in the single total order S, which gives the same guarantee (runtime_core.hpp's argument).

// MUTANT (feature "mutant"): the submitters without their seq_cst fences: notify_parked's, so
// an injector publication and its idle_count load may pass the parker's idle_count increment
// and queue check (store buffering), and a local push's, so its relaxed idle_count check may
// read the count from before a parker's increment while the parker reads the deque from before
// the push. Either way a worker sleeps with the work queued.
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
    // Each worker's deque, as its size (bottom_ - top_): the owner pushes, thieves take.
    // @work_deque.hpp"bottom_.store(b + 1, std::memory_order_release);"
    local: Vec<AtomicUsize>,
    // @"std::atomic<std::size_t> injected_{0};  // entries in the ring (written under inject_mu_)"
    injected: AtomicUsize,
    // @"std::vector<void*> injector_;" (a ring guarded by inject_mu_; a count here)
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
            local: (0..workers).map(|_| AtomicUsize::new(0)).collect(),
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
            *q += 1; // @"injector_[(inject_head_ + count + i) & mask] = hs[i];"
            // @"injected_.store(count + n, std::memory_order_seq_cst); } notify_parked();"
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
        // @"inject_head_ = (inject_head_ + n) & mask; injected_.store(count - n, std::memory_order_seq_cst);"
        self.injected.store(*q, SeqCst);
        true
    }

    // worker_base::push(): a task spawned (or woken) on worker `me`, by the task it runs. The
    // owner alone pushes, so the model's deque is a count.
    fn push_local(&self, me: usize) {
        // @work_deque.hpp"bottom_.store(b + 1, std::memory_order_release);"
        self.local[me].fetch_add(1, Release);
        // @worker_base.hpp"void notify_idle() noexcept {"
        if !MUTANT {
            // @worker_base.hpp"seq_cst_fence();" (a locked OR on x86-64: a full fence there)
            fence(SeqCst);
        }
        // @worker_base.hpp"if (idle_hint_->load(std::memory_order_relaxed) != 0) {"
        if self.idle_count.load(Relaxed) != 0 {
            // @worker_base.hpp"on_push(); // a worker is parked: let it come and steal"
            // (with no IO home, on_push is notify_parked:
            // @worker.cpp"if (rt_.notify_parked()) { bump(wakes); }")
            self.notify_parked();
        }
    }

    // The owner's pop or a thief's steal: one task from worker `w`'s deque, if any.
    fn take_local(&self, w: usize) -> bool {
        let mut n = self.local[w].load(SeqCst);
        while n != 0 {
            match self.local[w].compare_exchange(n, n - 1, SeqCst, SeqCst) {
                Ok(_) => return true,
                Err(m) => n = m,
            }
        }
        false
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
        // @"if (rt_.has_work_for(*this, stealable_) || !inbox_empty() ||": the injector, seq_cst
        // (@"return injected_.load(std::memory_order_seq_cst) == 0;"), then every deque
        // (@"if (w->stealable_size_seq_cst() != 0) {", through
        // @work_deque.hpp"const std::int64_t b = bottom_.load(std::memory_order_seq_cst);")
        if self.injected.load(SeqCst) != 0 || self.local.iter().any(|l| l.load(SeqCst) != 0) {
            unlist();
            return;
        }
        self.drivers[me].park(); // @"driver_->park(timeout);"
        unlist();
    }
}

// A worker runs until the workers took `want` tasks together (the shared `done`): the loop of
// @"void sched_worker::run() {": its own deque, the injector, then the other deques (a steal).
fn worker(rt: &Runtime, me: usize, done: &AtomicUsize, want: usize) {
    loop {
        if done.load(SeqCst) == want {
            return;
        }
        let took = rt.take_local(me)
            || rt.take_injected()
            || (0..rt.local.len()).any(|w| w != me && rt.take_local(w));
        if took {
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

// No IO home (a push wakes a helper at once): worker 0 runs a task that spawns onto its own
// deque and then keeps its thread until the spawned task has run (it spins, or blocks), while
// worker 1, out of work, parks. Worker 1 must see the spawn before it sleeps, or the push must
// see worker 1 listed and wake it: otherwise both wait for good, which loom reports.
#[test]
fn a_local_spawn_reaches_a_worker_that_is_parking() {
    loom::model(|| {
        let rt = Arc::new(Runtime::new(2));
        let done = Arc::new(AtomicUsize::new(0));
        let helper = {
            let (rt, done) = (rt.clone(), done.clone());
            thread::spawn(move || worker(&rt, 1, &done, 1))
        };
        // Worker 0's running task: the spawn, then its thread kept until the spawned task ran
        // (the helper's `done` and its unpark of every driver end the wait).
        rt.push_local(0);
        while done.load(SeqCst) != 1 {
            rt.drivers[0].park();
        }
        helper.join().unwrap();
        assert_eq!(done.load(SeqCst), 1);
    });
}
