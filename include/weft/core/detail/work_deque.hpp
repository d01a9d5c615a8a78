#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace weft::detail {

/// A bounded Chase–Lev work-stealing deque of coroutine frame addresses.
///
/// One owner thread pushes and pops at the bottom (LIFO: the continuation it just pushed is the
/// next thing it runs, which keeps fork-join depth-first and cache-warm); any thread steals from
/// the top (FIFO: thieves take the oldest, largest pieces of work). Capacity is fixed: `push`
/// reports a full deque and the owner moves half of it to the runtime's injector.
///
/// Memory orderings (Lê, Pop, Cohen, Zappa Nardelli, PPoPP'13, with the two standalone seq_cst
/// fences turned into seq_cst read-modify-writes / loads because ThreadSanitizer does not model
/// fences):
/// - push: the slot store is published by the release store of `bottom_`, which pairs with the
///   thief's seq_cst (hence acquire) load of `bottom_`.
/// - pop: `bottom_.exchange(b, seq_cst)` then `top_.load(seq_cst)`: in the single total order,
///   either the thief's load of `bottom_` sees the decrement, or the owner's load of `top_`
///   sees the thief's increment; when both go for the last element they race on the CAS.
/// - steal: `top_` and `bottom_` are read seq_cst; the CAS on `top_` claims the element.
///
/// Invariant: 0 <= bottom_ - top_ <= capacity (between operations).
class work_deque {
public:
    static constexpr std::int64_t capacity = 1024;

    /// Owner only. False when full.
    auto push(void* item) noexcept -> bool {
        const std::int64_t b = bottom_.load(std::memory_order_relaxed);
        // top_ only grows, so a stale copy only under-estimates the free room: re-read it (a
        // cache miss when thieves are active) only when the copy says the deque is full.
        if (b - top_cache_ >= capacity) {
            top_cache_ = top_.load(std::memory_order_acquire);
            if (b - top_cache_ >= capacity) {
                return false;
            }
        }
        slots_[index(b)].store(item, std::memory_order_relaxed);
        bottom_.store(b + 1, std::memory_order_release);
        return true;
    }

    /// Owner only; thieves may be active.
    auto pop() noexcept -> void* {
        const std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;
        bottom_.exchange(b, std::memory_order_seq_cst);
        std::int64_t t = top_.load(std::memory_order_seq_cst);
        if (t > b) {
            bottom_.store(b + 1, std::memory_order_relaxed);
            return nullptr;
        }
        void* item = slots_[index(b)].load(std::memory_order_relaxed);
        if (t == b) {
            // Last element: race the thieves for it.
            if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                              std::memory_order_relaxed)) {
                item = nullptr;
            }
            bottom_.store(b + 1, std::memory_order_relaxed);
        }
        return item;
    }

    /// Owner only, and only on a deque nobody steals from (the inline executor): no fence.
    auto pop_unshared() noexcept -> void* {
        const std::int64_t b = bottom_.load(std::memory_order_relaxed);
        if (b == top_.load(std::memory_order_relaxed)) {
            return nullptr;
        }
        bottom_.store(b - 1, std::memory_order_relaxed);
        return slots_[index(b - 1)].load(std::memory_order_relaxed);
    }

    /// Owner only: the bottom element without removing it (a thief may take it meanwhile; the
    /// caller confirms with pop()).
    [[nodiscard]] auto peek_bottom() const noexcept -> void* {
        const std::int64_t b = bottom_.load(std::memory_order_relaxed);
        if (b == top_.load(std::memory_order_relaxed)) {
            return nullptr;
        }
        return slots_[index(b - 1)].load(std::memory_order_relaxed);
    }

    /// Any thread (including the owner, for fairness and overflow). nullptr when empty or when
    /// it lost a race (the caller may retry).
    auto steal() noexcept -> void* {
        std::int64_t t = top_.load(std::memory_order_seq_cst);
        const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
        if (t >= b) {
            return nullptr;
        }
        void* item = slots_[index(t)].load(std::memory_order_relaxed);
        if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                          std::memory_order_relaxed)) {
            return nullptr;
        }
        return item;
    }

    /// OWNER ONLY (it moves half of a full deque to the injector): takes up to `max` of the
    /// oldest items, at most half of what is there, with a single CAS on top_; returns how many
    /// landed in `out` (0 if a thief won the race). Thieves must not use it: the owner's pop()
    /// only races thieves for the last element, so a thief claiming a range could meet the
    /// owner coming down from the bottom inside it and both would run the same task. Thieves
    /// take one at a time with steal().
    auto steal_batch(void** out, std::int64_t max) noexcept -> std::int64_t {
        std::int64_t t = top_.load(std::memory_order_seq_cst);
        const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
        std::int64_t n = b - t;
        if (n <= 0) {
            return 0;
        }
        n = (n + 1) / 2;
        if (n > max) {
            n = max;
        }
        for (std::int64_t i = 0; i < n; ++i) {
            out[i] = slots_[index(t + i)].load(std::memory_order_relaxed);
        }
        if (!top_.compare_exchange_strong(t, t + n, std::memory_order_seq_cst,
                                          std::memory_order_relaxed)) {
            return 0;
        }
        return n;
    }

    /// Any thread: the oldest element, and its position in `t` (a snapshot; nullptr when
    /// empty). The same `t` later means nobody took that element meanwhile (top_ only grows).
    [[nodiscard]] auto peek_top(std::int64_t& t) const noexcept -> void* {
        t = top_.load(std::memory_order_acquire);
        const std::int64_t b = bottom_.load(std::memory_order_acquire);
        if (t >= b) {
            return nullptr;
        }
        return slots_[index(t)].load(std::memory_order_relaxed);
    }

    /// Any thread, for a worker deciding whether to sleep: the size with seq_cst loads, so that
    /// they take part in the parking protocol's single total order (see sched's runtime_core).
    [[nodiscard]] auto size_seq_cst() const noexcept -> std::int64_t {
        const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
        const std::int64_t t = top_.load(std::memory_order_seq_cst);
        return b > t ? b - t : 0;
    }

    /// Any thread, while neither the owner nor any thief touches the deque (runtime::dump stops
    /// them all first): calls f(entry) on every queued entry, still tagged.
    template <typename F>
    void for_each_quiescent(F&& f) const {
        const std::int64_t t = top_.load(std::memory_order_acquire);
        const std::int64_t b = bottom_.load(std::memory_order_acquire);
        for (std::int64_t i = t; i < b; ++i) {
            f(slots_[index(i)].load(std::memory_order_relaxed));
        }
    }

    /// Approximate, any thread.
    [[nodiscard]] auto size() const noexcept -> std::int64_t {
        const std::int64_t b = bottom_.load(std::memory_order_relaxed);
        const std::int64_t t = top_.load(std::memory_order_relaxed);
        return b > t ? b - t : 0;
    }

private:
    static constexpr auto index(std::int64_t i) noexcept -> std::size_t {
        return static_cast<std::size_t>(i) & static_cast<std::size_t>(capacity - 1);
    }
    alignas(64) std::atomic<std::int64_t> top_{0};
    alignas(64) std::atomic<std::int64_t> bottom_{0};
    std::int64_t top_cache_ = 0;  // owner only: a recent value of top_
    alignas(64) std::array<std::atomic<void*>, capacity> slots_{};
};

}  // namespace weft::detail
