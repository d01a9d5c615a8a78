//! Model of the Chase-Lev deque (bounded). Each step quotes the C++ it follows (`@"..."`,
//! checked by check_anchors.py). Capacity is 2 so the indices wrap.
//! Property: every pushed item is taken exactly once (owner pop or thief steal), none lost.
//! Follows: include/weft/core/detail/work_deque.hpp
use loom::sync::atomic::{fence, AtomicI64, AtomicUsize, Ordering::*};
use loom::sync::Arc;
use loom::thread;
use std::cell::Cell;

const CAP: i64 = 2;

// MUTANT (feature "mutant"): steal claims its item with a check of top_ and a store instead of
// the CAS: between the two the owner's pop or another thief takes the same item.
const MUTANT: bool = cfg!(feature = "mutant");

// SEQCST: loom 0.7 models SeqCst loads and stores as AcqRel (documented limitation), which allows
// the store-buffering outcome C++ forbids between pop's `bottom_.exchange(seq_cst)` +
// `top_.load(seq_cst)` and steal's `top_.load(seq_cst)` + `bottom_.load(seq_cst)`. Without the
// fences loom reports item 2 taken twice (owner pop and thief steal of the same last element),
// which is that false outcome. loom does model SeqCst fences, so the model places one where the
// PPoPP'13 algorithm has its fences; the C++ replaces them by seq_cst accesses, which are equally
// strong in the C++ model (all four accesses are in the single total order S).

struct Deque {
    top: AtomicI64,            // @"std::atomic<std::int64_t> top_{0};"
    bottom: AtomicI64,         // @"std::atomic<std::int64_t> bottom_{0};"
    top_cache: Cell<i64>,      // @"std::int64_t top_cache_ = 0;" owner only
    slots: [AtomicUsize; 2],   // @"std::array<std::atomic<void*>, capacity> slots_{};" (0 = nullptr)
}
unsafe impl Sync for Deque {}

// @"static_cast<std::size_t>(i) & static_cast<std::size_t>(capacity - 1)"
fn index(i: i64) -> usize { (i & (CAP - 1)) as usize }

impl Deque {
    fn new() -> Self {
        Deque { top: AtomicI64::new(0), bottom: AtomicI64::new(0), top_cache: Cell::new(0),
                slots: [AtomicUsize::new(0), AtomicUsize::new(0)] }
    }
    fn push(&self, item: usize) -> bool {
        let b = self.bottom.load(Relaxed); // @"const std::int64_t b = bottom_.load(std::memory_order_relaxed);"
        if b - self.top_cache.get() >= CAP { // @"if (b - top_cache_ >= capacity) {"
            self.top_cache.set(self.top.load(Acquire)); // @"top_cache_ = top_.load(std::memory_order_acquire);"
            if b - self.top_cache.get() >= CAP { return false; }
        }
        self.slots[index(b)].store(item, Relaxed); // @"slots_[index(b)].store(item, std::memory_order_relaxed);"
        self.bottom.store(b + 1, Release); // @"bottom_.store(b + 1, std::memory_order_release);"
        true
    }
    fn pop(&self) -> usize {
        let b = self.bottom.load(Relaxed) - 1; // @"const std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;"
        self.bottom.swap(b, SeqCst); // @"bottom_.exchange(b, std::memory_order_seq_cst);"
        fence(SeqCst); // loom treats SeqCst loads/stores as AcqRel; see SEQCST above
        let t = self.top.load(SeqCst); // @"std::int64_t t = top_.load(std::memory_order_seq_cst);"
        if t > b { // @"if (t > b) {"
            self.bottom.store(b + 1, Relaxed); // @"bottom_.store(b + 1, std::memory_order_relaxed);"
            return 0;
        }
        let mut item = self.slots[index(b)].load(Relaxed); // @"void* item = slots_[index(b)].load(std::memory_order_relaxed);"
        if t == b { // @"if (t == b) {"
            // @"if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) { item = nullptr; }"
            if self.top.compare_exchange(t, t + 1, SeqCst, Relaxed).is_err() { item = 0; }
            self.bottom.store(b + 1, Relaxed);
        }
        item
    }
    fn peek_bottom(&self) -> usize {
        // @"auto peek_bottom() const noexcept -> void* {"
        let b = self.bottom.load(Relaxed);
        if b == self.top.load(Relaxed) { return 0; } // @"if (b == top_.load(std::memory_order_relaxed)) {"
        self.slots[index(b - 1)].load(Relaxed) // @"return slots_[index(b - 1)].load(std::memory_order_relaxed);"
    }
    fn steal(&self) -> usize {
        // @"auto steal() noexcept -> void* { std::int64_t t = top_.load(std::memory_order_seq_cst); const std::int64_t b = bottom_.load(std::memory_order_seq_cst);"
        let t = self.top.load(SeqCst);
        fence(SeqCst); // SEQCST above
        let b = self.bottom.load(SeqCst);
        if t >= b { return 0; } // @"if (t >= b) {"
        let item = self.slots[index(t)].load(Relaxed); // @"void* item = slots_[index(t)].load(std::memory_order_relaxed);"
        // @"if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) { return nullptr; }"
        if MUTANT {
            if self.top.load(SeqCst) != t { return 0; }
            self.top.store(t + 1, SeqCst);
        } else if self.top.compare_exchange(t, t + 1, SeqCst, Relaxed).is_err() { return 0; }
        item
    }
    fn steal_batch(&self, out: &mut Vec<usize>, max: i64) -> i64 {
        // @"auto steal_batch(void** out, std::int64_t max) noexcept -> std::int64_t { std::int64_t t = top_.load(std::memory_order_seq_cst); const std::int64_t b = bottom_.load(std::memory_order_seq_cst);"
        let t = self.top.load(SeqCst);
        fence(SeqCst); // SEQCST above
        let b = self.bottom.load(SeqCst);
        let mut n = b - t; // @"std::int64_t n = b - t;"
        if n <= 0 { return 0; }
        n = (n + 1) / 2; // @"n = (n + 1) / 2;"
        if n > max { n = max; }
        let start = out.len();
        for i in 0..n { out.push(self.slots[index(t + i)].load(Relaxed)); } // @"out[i] = slots_[index(t + i)].load(std::memory_order_relaxed);"
        if self.top.compare_exchange(t, t + n, SeqCst, Relaxed).is_err() { // @"if (!top_.compare_exchange_strong(t, t + n, std::memory_order_seq_cst,"
            out.truncate(start);
            return 0;
        }
        n
    }
    fn peek_top(&self) -> (usize, i64) {
        let t = self.top.load(Acquire); // @"t = top_.load(std::memory_order_acquire);"
        let b = self.bottom.load(Acquire); // @"const std::int64_t b = bottom_.load(std::memory_order_acquire);"
        if t >= b { return (0, t); }
        (self.slots[index(t)].load(Relaxed), t) // @"return slots_[index(t)].load(std::memory_order_relaxed);"
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
