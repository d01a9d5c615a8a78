//! Model of the channel hand-off to a select (select_awaiter, the claim of
//! wait_sync::try_claim, and the channel's sender path). A select receives from channel A or B;
//! one sender sends on each; a third party requests stop. Each step quotes the C++ it follows
//! (`@"..."`, checked by check_anchors.py).
//! Properties: the select's sync is claimed exactly once (by one sender or by the stop) and the
//! waiter is resumed exactly once; no value is lost or delivered twice (what the select got plus
//! what stayed buffered is exactly {1, 2}); nothing deadlocks.
//! Follows: include/weft/sync/select.hpp
//! Follows: include/weft/sync/detail/waiter.hpp
//! Follows: include/weft/sync/channel.hpp
use loom::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering::*};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

const PENDING: i32 = -1; // @"inline constexpr int wait_pending = -1;"
// MUTANT (feature "mutant"): a sender claims the select with a check and a store (try_claim's
// shortcut for a sync held under one lock) instead of the CAS: the select's nodes sit in two
// channels' lists under two different locks, so both senders can claim it.
const MUTANT: bool = cfg!(feature = "mutant");

const CANCELLED: i32 = -2; // @"inline constexpr int wait_cancelled = -2;"

/// A rendezvous-with-one-slot channel: a parked receiver node, or one buffered value.
#[derive(Default)]
struct Chan {
    parked: Option<usize>, // the case index of the select's node parked here (wait_node)
    buffered: Option<u32>,
}

struct Select {
    st: AtomicI32,            // @"std::atomic<int> st{wait_pending};"
    got: Mutex<Option<u32>>,  // what the winning case handed over (the awaiter's slot)
    resumed: Mutex<usize>,    // times resume_waiter ran for it
    cv: Condvar,
    parked: AtomicBool,       // @"bool parked_ = false;  // written under all the locks"
    suspended: AtomicBool,    // the model's record: await_suspend returned true
}

struct World {
    chans: [Mutex<Chan>; 2], // the channels' locks (biased_lock) and state
    sel: Select,
}

impl World {
    // @"// sorted, the first nlocks_ distinct": locks in address order; here A then B.
    fn lock_all(&self) -> (loom::sync::MutexGuard<'_, Chan>, loom::sync::MutexGuard<'_, Chan>) {
        let a = self.chans[0].lock().unwrap();
        let b = self.chans[1].lock().unwrap();
        (a, b)
    }

    fn resume(&self) {
        // wake_chain::resume_all -> resume_waiter, after the lock is released.
        let mut r = self.sel.resumed.lock().unwrap();
        *r += 1;
        self.sel.cv.notify_all();
    }

    // The channel's send on channel i: under its lock, claim the front receiver node
    // (@"if (detail::wait_node* n = receivers_.claim_front()) {" -> try_claim, a CAS: a
    // select's nodes sit in two lists); if claimed, hand the value over and resume it after
    // unlocking (@"woken.add(n);"); else buffer the value (@"buf_.push_back(std::move(v));").
    fn send(&self, i: usize, v: u32) {
        let mut claimed = false;
        {
            let mut c = self.chans[i].lock().unwrap();
            if let Some(case) = c.parked.take() {
                // @"return st.compare_exchange_strong(expected, outcome, std::memory_order_acq_rel, std::memory_order_acquire);"
                let won = if MUTANT {
                    // @"if (st.load(std::memory_order_relaxed) != wait_pending) { return false; } st.store(outcome, std::memory_order_relaxed);"
                    let free = self.sel.st.load(Relaxed) == PENDING;
                    if free {
                        self.sel.st.store(case as i32, Relaxed);
                    }
                    free
                } else {
                    self.sel.st.compare_exchange(PENDING, case as i32, AcqRel, Acquire).is_ok()
                };
                if won {
                    *self.sel.got.lock().unwrap() = Some(v);
                    claimed = true;
                }
                // else: a stale node (the other case or the stop won): unlinked, skipped.
            }
            if !claimed {
                assert!(c.buffered.is_none(), "one value per channel in this model");
                c.buffered = Some(v);
            }
        }
        if claimed {
            self.resume();
        }
    }

    // @"static void on_stop(detail::stop_callback_node* n) noexcept {": takes every lock, claims
    // (CAS); resumes only a parked waiter (one still in await_suspend sees the claim there and
    // does not suspend).
    fn stop(&self) {
        let resume;
        {
            // @"lock_all(locks, nlocks); if (!self->try_claim(detail::wait_cancelled)) {"
            let (mut a, mut b) = self.lock_all();
            if self.sel.st.compare_exchange(PENDING, CANCELLED, AcqRel, Acquire).is_err() {
                return; // @"a case completed first; its waker resumes us"
            }
            resume = self.sel.parked.load(Relaxed); // @"const bool parked = self->parked_;"
            if resume {
                a.parked = None; // @"for (auto* c : self->cases_) { c->unpark(); }"
                b.parked = None;
            }
        } // @"unlock_all(locks, nlocks); if (parked) { detail::resume_waiter(h, home); }"
        if resume {
            self.resume();
        }
    }

    // select_awaiter's await_suspend and await_resume for `select(recv A, recv B)`.
    fn select(&self) -> i32 {
        let parked;
        {
            // @"lock_all(locks, nlocks); if (st.load(std::memory_order_relaxed) != detail::wait_pending) {  // stopped meanwhile"
            let (mut a, mut b) = self.lock_all();
            if self.sel.st.load(Relaxed) != PENDING {
                return self.sel.st.load(Relaxed);
            }
            // try_now from a fixed start (the C++ picks a random one; both orders are the same
            // shape): a buffered value completes the case at once, nobody can claim us.
            if let Some(v) = a.buffered.take() {
                self.sel.st.store(0, Relaxed); // @"st.store(static_cast<int>(i), std::memory_order_relaxed);"
                *self.sel.got.lock().unwrap() = Some(v);
                return 0;
            }
            if let Some(v) = b.buffered.take() {
                self.sel.st.store(1, Relaxed);
                *self.sel.got.lock().unwrap() = Some(v);
                return 1;
            }
            a.parked = Some(0); // @"cases_[i]->park(this, static_cast<int>(i));"
            b.parked = Some(1);
            self.sel.parked.store(true, Relaxed); // @"parked_ = true;"
            self.sel.suspended.store(true, Relaxed);
            parked = true;
        } // @"parked_ = true; unlock_all(locks, nlocks); return true;"
        // suspended: wait to be resumed
        {
            let mut r = self.sel.resumed.lock().unwrap();
            while *r == 0 {
                r = self.sel.cv.wait(r).unwrap();
            }
        }
        if parked {
            // await_resume: every lock again, stale nodes unlinked, before the frame (the
            // awaiter) may go away (@"if (parked_) { lock_all(locks_, nlocks_); for (auto* c : cases_) { c->unpark(); }").
            let (mut a, mut b) = self.lock_all();
            a.parked = None;
            b.parked = None;
        }
        self.sel.st.load(Acquire) // @"const int s = st.load(std::memory_order_acquire);"
    }
}

#[test]
fn select_over_two_channels_with_two_senders_and_a_stop() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(|| {
        let w = Arc::new(World {
            chans: [Mutex::new(Chan::default()), Mutex::new(Chan::default())],
            sel: Select {
                st: AtomicI32::new(PENDING),
                got: Mutex::new(None),
                resumed: Mutex::new(0),
                cv: Condvar::new(),
                parked: AtomicBool::new(false),
                suspended: AtomicBool::new(false),
            },
        });
        let sent = Arc::new(AtomicUsize::new(0));
        let senders: Vec<_> = (0..2)
            .map(|i| {
                let (w, sent) = (w.clone(), sent.clone());
                thread::spawn(move || {
                    w.send(i, i as u32 + 1);
                    sent.fetch_add(1, SeqCst);
                })
            })
            .collect();
        let stopper = {
            let w = w.clone();
            thread::spawn(move || w.stop())
        };
        let outcome = w.select();
        for s in senders {
            s.join().unwrap();
        }
        stopper.join().unwrap();

        let resumed = *w.sel.resumed.lock().unwrap();
        let got = *w.sel.got.lock().unwrap();
        let mut values: Vec<u32> = w.chans.iter().filter_map(|c| c.lock().unwrap().buffered).collect();
        match outcome {
            CANCELLED => assert!(got.is_none(), "a cancelled select took a value"),
            0 | 1 => {
                assert_eq!(got, Some(outcome as u32 + 1), "the value of the winning case");
                values.push(got.unwrap());
            }
            other => panic!("outcome {other}"),
        }
        let suspended = w.sel.suspended.load(Relaxed);
        assert_eq!(resumed, usize::from(suspended), "resumed {resumed} times (suspended: {suspended})");
        values.sort_unstable();
        assert_eq!(values, vec![1, 2], "every value delivered once or still buffered");
    });
}
