//! Model of the parking protocol of src/sched/runtime_core.{hpp,cpp} and src/sched/worker.cpp
//! (the class comment of runtime_core states it). Each step names the C++ line it follows.
//! Property: no wake-up is lost. A worker that finds nothing parks in its driver; a submitter
//! that publishes work afterwards must wake it, or the worker must see the work before it
//! sleeps. If a wake-up were lost the worker would sleep forever with work queued: every
//! thread blocked, which loom reports as a deadlock (the test fails).
use loom::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering::*};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

// SEQCST: loom 0.7 models SeqCst loads and stores as AcqRel (its documented limitation), so on
// its own it allows the store-buffering outcome that C++ forbids between the parker's
// `idle_count.fetch_add(seq_cst)` + `injected_.load(seq_cst)` and the submitter's
// `injected_` publication + seq_cst fence + `idle_count.load(seq_cst)`. The model adds a SeqCst
// fence after the parker's RMW (loom does model fences); in C++ the seq_cst RMW and loads are
// in the single total order S, which gives the same guarantee (runtime_core.hpp's argument).

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
    injected: AtomicUsize,      // runtime_core.hpp: injected_ (== injector_.size())
    injector: Mutex<usize>,     // runtime_core.hpp: injector_ under inject_mu_ (a count here)
    idle: Mutex<Vec<usize>>,    // runtime_core.hpp: idle (worker indices) under idle_mu
    idle_count: AtomicUsize,    // runtime_core.hpp: idle_count
    searching: AtomicUsize,     // runtime_core.hpp: searching
    in_idle_list: Vec<Mutex<bool>>, // worker.hpp: in_idle_list (guarded by idle_mu in C++)
    wsearching: Vec<AtomicBool>, // worker.hpp: searching (set by a waker, under idle_mu)
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

    // runtime_core.cpp inject(): push under the lock, count it (seq_cst), then notify_parked.
    fn inject(&self) {
        {
            let mut q = self.injector.lock().unwrap();
            *q += 1;
            self.injected.fetch_add(1, SeqCst);
        }
        self.notify_parked();
    }

    // runtime_core.cpp take_injected(): one task, if any.
    fn take_injected(&self) -> bool {
        if self.injected.load(SeqCst) == 0 {
            return false; // injector_empty(): nothing to lock for
        }
        let mut q = self.injector.lock().unwrap();
        if *q == 0 {
            return false;
        }
        *q -= 1;
        self.injected.fetch_sub(1, SeqCst);
        true
    }

    // runtime_core.cpp:153 notify_parked()
    fn notify_parked(&self) {
        fence(SeqCst); // :156
        if self.searching.load(SeqCst) != 0 || self.idle_count.load(SeqCst) == 0 {
            return; // :157-159
        }
        let w;
        {
            let mut idle = self.idle.lock().unwrap(); // :163
            if idle.is_empty() || self.searching.load(Relaxed) != 0 {
                return; // :164-166
            }
            w = idle.pop().unwrap(); // :167-168
            *self.in_idle_list[w].lock().unwrap() = false; // :169
            self.idle_count.fetch_sub(1, SeqCst); // :170
            self.wsearching[w].store(true, Relaxed); // :174 (ordered by the unpark)
            self.searching.fetch_add(1, SeqCst); // :175
        }
        self.drivers[w].unpark(); // :177
    }

    // worker.cpp sched_worker::park(); `searching` is the worker's own flag.
    fn park(&self, me: usize) {
        if self.wsearching[me].swap(false, Relaxed) {
            self.searching.fetch_sub(1, SeqCst); // worker.cpp park(): leave searching first
        }
        {
            let mut idle = self.idle.lock().unwrap();
            idle.push(me);
            *self.in_idle_list[me].lock().unwrap() = true;
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
        // has_work_for(): the injector (the model's only queue), seq_cst.
        if self.injected.load(SeqCst) != 0 {
            unlist();
            return;
        }
        self.drivers[me].park();
        unlist();
    }
}

// A worker runs until the workers took `want` tasks together (the shared `done`): the loop of
// worker.cpp run() with the injector as its only source of work.
fn worker(rt: &Runtime, me: usize, done: &AtomicUsize, want: usize) {
    loop {
        if done.load(SeqCst) == want {
            return;
        }
        if rt.take_injected() {
            if rt.wsearching[me].swap(false, Relaxed) {
                // worker.cpp run(): the last searcher to find work wakes another.
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
