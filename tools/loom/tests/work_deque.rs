//! Model of include/weft/core/detail/work_deque.hpp (Chase-Lev, bounded). Each step names the
//! C++ line it follows (work_deque.hpp:N). Capacity is 2 so the indices wrap.
//! Property: every pushed item is taken exactly once (owner pop or thief steal), none lost.
use loom::sync::atomic::{fence, AtomicI64, AtomicUsize, Ordering::*};
use loom::sync::Arc;
use loom::thread;
use std::cell::Cell;

const CAP: i64 = 2;

// SEQCST: loom 0.7 models SeqCst loads and stores as AcqRel (documented limitation), which allows
// the store-buffering outcome C++ forbids between pop's `bottom_.exchange(seq_cst)` +
// `top_.load(seq_cst)` and steal's `top_.load(seq_cst)` + `bottom_.load(seq_cst)`. Without the
// fences loom reports item 2 taken twice (owner pop and thief steal of the same last element),
// which is that false outcome. loom does model SeqCst fences, so the model places one where the
// PPoPP'13 algorithm has its fences; the C++ replaces them by seq_cst accesses, which are equally
// strong in the C++ model (all four accesses are in the single total order S).

struct Deque {
    top: AtomicI64,            // :154
    bottom: AtomicI64,         // :155
    top_cache: Cell<i64>,      // :156 owner only
    slots: [AtomicUsize; 2],   // :157 (item 0 = nullptr)
}
unsafe impl Sync for Deque {}

fn index(i: i64) -> usize { (i & (CAP - 1)) as usize } // :151

impl Deque {
    fn new() -> Self {
        Deque { top: AtomicI64::new(0), bottom: AtomicI64::new(0), top_cache: Cell::new(0),
                slots: [AtomicUsize::new(0), AtomicUsize::new(0)] }
    }
    fn push(&self, item: usize) -> bool {
        let b = self.bottom.load(Relaxed); // :34
        if b - self.top_cache.get() >= CAP { // :37
            self.top_cache.set(self.top.load(Acquire)); // :38
            if b - self.top_cache.get() >= CAP { return false; } // :39-40
        }
        self.slots[index(b)].store(item, Relaxed); // :43
        self.bottom.store(b + 1, Release); // :44
        true
    }
    fn pop(&self) -> usize {
        let b = self.bottom.load(Relaxed) - 1; // :50
        self.bottom.swap(b, SeqCst); // :51
        fence(SeqCst); // loom treats SeqCst loads/stores as AcqRel; see SEQCST below
        let t = self.top.load(SeqCst); // :52
        if t > b { // :53
            self.bottom.store(b + 1, Relaxed); // :54
            return 0;
        }
        let mut item = self.slots[index(b)].load(Relaxed); // :57
        if t == b { // :58
            if self.top.compare_exchange(t, t + 1, SeqCst, Relaxed).is_err() { item = 0; } // :60-62
            self.bottom.store(b + 1, Relaxed); // :64
        }
        item
    }
    fn peek_bottom(&self) -> usize {
        let b = self.bottom.load(Relaxed); // :82
        if b == self.top.load(Relaxed) { return 0; } // :83
        self.slots[index(b - 1)].load(Relaxed) // :86
    }
    fn steal(&self) -> usize {
        let t = self.top.load(SeqCst); // :92
        fence(SeqCst); // SEQCST below
        let b = self.bottom.load(SeqCst); // :93
        if t >= b { return 0; } // :94
        let item = self.slots[index(t)].load(Relaxed); // :97
        if self.top.compare_exchange(t, t + 1, SeqCst, Relaxed).is_err() { return 0; } // :98
        item
    }
    fn steal_batch(&self, out: &mut Vec<usize>, max: i64) -> i64 {
        let t = self.top.load(SeqCst); // :112
        fence(SeqCst); // SEQCST below
        let b = self.bottom.load(SeqCst); // :113
        let mut n = b - t; // :114
        if n <= 0 { return 0; }
        n = (n + 1) / 2; // :118
        if n > max { n = max; }
        let start = out.len();
        for i in 0..n { out.push(self.slots[index(t + i)].load(Relaxed)); } // :122-123
        if self.top.compare_exchange(t, t + n, SeqCst, Relaxed).is_err() { // :125
            out.truncate(start);
            return 0;
        }
        n
    }
    fn peek_top(&self) -> (usize, i64) {
        let t = self.top.load(Acquire); // :135
        let b = self.bottom.load(Acquire); // :136
        if t >= b { return (0, t); }
        (self.slots[index(t)].load(Relaxed), t) // :140
    }
}

/// Bit per item: taking an item twice or never fails.
fn check(taken: &[usize], pushed: &[usize]) {
    let mut seen = 0u32;
    for &i in taken {
        assert!(i != 0);
        assert!(seen & (1 << i) == 0, "item {} taken twice: {:?}", i, taken);
        seen |= 1 << i;
    }
    for &i in pushed { assert!(seen & (1 << i) != 0, "item {} lost: {:?}", i, taken); }
}

/// Owner pushes 3 items into a capacity-2 deque (wrap; a full push is retried after a pop, as the
/// runtime moves work out) and pops; one thief steals concurrently.
#[test]
fn owner_and_one_thief() {
    loom::model(|| {
        let d = Arc::new(Deque::new());
        let d2 = d.clone();
        let thief = thread::spawn(move || {
            let mut got = vec![];
            for _ in 0..2 { let x = d2.steal(); if x != 0 { got.push(x); } }
            got
        });
        let mut got = vec![];
        let mut pushed = vec![];
        for item in 1..=3usize {
            if !d.push(item) {
                let x = d.pop(); if x != 0 { got.push(x); }
                if !d.push(item) { let x = d.pop(); if x != 0 { got.push(x); } assert!(d.push(item)); }
            }
            pushed.push(item);
            let pb = d.peek_bottom();
            assert!(pb == 0 || pb <= item);
        }
        loop { let x = d.pop(); if x == 0 { break; } got.push(x); }
        got.extend(thief.join().unwrap());
        // the deque is empty: nothing left for anyone
        assert_eq!(d.steal(), 0);
        check(&got, &pushed);
    });
}

/// Owner with two thieves; the owner also moves half out with steal_batch (owner only).
#[test]
fn owner_two_thieves_and_batch() {
    loom::model(|| {
        let d = Arc::new(Deque::new());
        assert!(d.push(1));
        assert!(d.push(2));
        let mut thieves = vec![];
        for _ in 0..2 {
            let d2 = d.clone();
            thieves.push(thread::spawn(move || {
                let (p, _) = d2.peek_top();
                let x = d2.steal();
                assert!(p == 0 || p == 1 || p == 2);
                if x != 0 { vec![x] } else { vec![] }
            }));
        }
        let mut got = vec![];
        d.steal_batch(&mut got, 4);
        let x = d.pop(); if x != 0 { got.push(x); }
        let x = d.pop(); if x != 0 { got.push(x); }
        for t in thieves { got.extend(t.join().unwrap()); }
        check(&got, &[1, 2]);
    });
}
