//! Model of the channel hand-off to a select (include/weft/sync/select.hpp select_awaiter, the
//! claim of include/weft/sync/detail/waiter.hpp wait_sync::try_claim, and channel.hpp's sender
//! path). A select receives from channel A or B; one sender sends on each; a third party
//! requests stop. Each step names the C++ it follows.
//! Properties: the select's sync is claimed exactly once (by one sender or by the stop) and the
//! waiter is resumed exactly once; no value is lost or delivered twice (what the select got plus
//! what stayed buffered is exactly {1, 2}); nothing deadlocks.
use loom::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering::*};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

const PENDING: i32 = -1; // waiter.hpp wait_pending
const CANCELLED: i32 = -2; // waiter.hpp wait_cancelled

/// A rendezvous-with-one-slot channel: a parked receiver node, or one buffered value.
#[derive(Default)]
struct Chan {
    parked: Option<usize>, // the case index of the select's node parked here (wait_node)
    buffered: Option<u32>,
}

struct Select {
    st: AtomicI32,            // wait_sync::st
    got: Mutex<Option<u32>>,  // what the winning case handed over (the awaiter's slot)
    resumed: Mutex<usize>,    // times resume_waiter ran for it
    cv: Condvar,
    parked: AtomicBool,       // select_awaiter::parked_ (written and read under all the locks)
    suspended: AtomicBool,    // the model's record: await_suspend returned true
}

struct World {
    chans: [Mutex<Chan>; 2], // the channels' locks (biased_lock) and state
    sel: Select,
}

impl World {
    // select.hpp: locks in address order; here A then B.
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

    // channel.hpp send on channel i: under its lock, claim the front receiver node
    // (wait_list::claim_front -> try_claim, a CAS: a select's nodes sit in two lists); if
    // claimed, hand the value over and resume it after unlocking; else buffer the value.
    fn send(&self, i: usize, v: u32) {
        let mut claimed = false;
        {
            let mut c = self.chans[i].lock().unwrap();
            if let Some(case) = c.parked.take() {
                if self
                    .sel
                    .st
                    .compare_exchange(PENDING, case as i32, AcqRel, Acquire)
                    .is_ok()
                {
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

    // select.hpp:252 on_stop: takes every lock, claims (CAS); resumes only a parked waiter (one
    // still in await_suspend sees the claim there and does not suspend).
    fn stop(&self) {
        let resume;
        {
            let (mut a, mut b) = self.lock_all(); // :256
            if self.sel.st.compare_exchange(PENDING, CANCELLED, AcqRel, Acquire).is_err() {
                return; // :257-259 a case completed first; its waker resumes
            }
            resume = self.sel.parked.load(Relaxed); // :261
            if resume {
                a.parked = None; // :263-265 unpark every case
                b.parked = None;
            }
        } // :269
        if resume {
            self.resume(); // :270-272
        }
    }

    // select.hpp await_suspend + await_resume for `select(recv A, recv B)`.
    fn select(&self) -> i32 {
        let parked;
        {
            let (mut a, mut b) = self.lock_all(); // :196
            if self.sel.st.load(Relaxed) != PENDING {
                return self.sel.st.load(Relaxed); // :197-199 stopped meanwhile
            }
            // try_now from a fixed start (the C++ picks a random one; both orders are the same
            // shape): a buffered value completes the case at once, nobody can claim us.
            if let Some(v) = a.buffered.take() {
                self.sel.st.store(0, Relaxed); // :208
                *self.sel.got.lock().unwrap() = Some(v);
                return 0;
            }
            if let Some(v) = b.buffered.take() {
                self.sel.st.store(1, Relaxed);
                *self.sel.got.lock().unwrap() = Some(v);
                return 1;
            }
            a.parked = Some(0); // :214-216 park one node per case
            b.parked = Some(1);
            self.sel.parked.store(true, Relaxed); // :217
            self.sel.suspended.store(true, Relaxed);
            parked = true;
        } // :218 unlock_all
        // suspended: wait to be resumed
        {
            let mut r = self.sel.resumed.lock().unwrap();
            while *r == 0 {
                r = self.sel.cv.wait(r).unwrap();
            }
        }
        if parked {
            // await_resume :226-228: every lock again, stale nodes unlinked, before the frame
            // (the awaiter) may go away.
            let (mut a, mut b) = self.lock_all();
            a.parked = None;
            b.parked = None;
        }
        self.sel.st.load(Acquire)
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
