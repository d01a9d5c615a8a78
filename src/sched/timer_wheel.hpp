#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "weft/sched/detail/timer_op.hpp"

namespace weft::detail {

/// A hierarchical timing wheel (6 levels x 64 slots, 1 ms resolution: level l's slots are
/// 64^l ms wide, so it spans 64^6 ms ~ 2.2 years). Insert, remove: O(1); finding the next
/// deadline: one bit scan per level.
///
/// Placement invariant: an entry is filed at `p = min(when_ms, horizon())`, at the level of the
/// highest 6-bit group in which `p` and `elapsed_` differ, in slot `(p >> 6*level) & 63`. So
/// everything at level l expires after everything at levels < l, and `advance` cascades an
/// entry down a level when its slot comes up.
///
/// The horizon is the last millisecond of the top-level slot before the current one, one
/// revolution on: the latest instant the top level can name without its slot index wrapping
/// onto the current slot (which would come up at once, be filed back into itself, and spin
/// advance() for ever). An entry beyond it waits in the horizon's slot and, when that comes up,
/// is filed again against the new horizon: one re-filing per ~2.1 years of its wait, never
/// fired early. `time_point::max()` (a sleep or deadline_timer for "never") is such an entry.
///
/// Not thread-safe: its timer_queue holds the lock.
class timer_wheel {
public:
    static constexpr unsigned levels = 6;
    static constexpr unsigned slots = 64;

    void insert(timer_op* op) noexcept;
    void remove(timer_op* op) noexcept;
    [[nodiscard]] auto next_deadline() const noexcept -> std::optional<std::uint64_t>;
    [[nodiscard]] auto size() const noexcept -> std::size_t { return size_; }
    [[nodiscard]] auto elapsed() const noexcept -> std::uint64_t { return elapsed_; }

    /// Moves time to `now` (ms) and calls `fire(op)` for every entry due at or before it, with
    /// the entry already unlinked.
    template <typename Fire>
    void advance(std::uint64_t now, Fire&& fire) noexcept {
        for (;;) {
            auto next = next_slot();
            if (!next || next->deadline > now) {
                break;
            }
            if (next->deadline > elapsed_) {
                elapsed_ = next->deadline;
            }
            timer_op* list = take(next->level, next->slot);
            while (list != nullptr) {
                timer_op* op = list;
                list = op->wheel_next;
                op->wheel_prev = op->wheel_next = nullptr;
                --size_;
                if (op->when_ms <= now) {
                    fire(op);
                } else {
                    insert(op);  // cascades to a lower level, or to the new horizon
                }
            }
        }
        if (now > elapsed_) {
            elapsed_ = now;
        }
    }

private:
    struct slot_ref {
        unsigned level;
        unsigned slot;
        std::uint64_t deadline;
    };
    [[nodiscard]] auto next_slot() const noexcept -> std::optional<slot_ref>;
    [[nodiscard]] auto horizon() const noexcept -> std::uint64_t;
    auto take(unsigned level, unsigned slot) noexcept -> timer_op*;

    std::uint64_t elapsed_ = 0;
    std::size_t size_ = 0;
    std::array<std::uint64_t, levels> occupied_{};
    std::array<std::array<timer_op*, slots>, levels> heads_{};
};

}  // namespace weft::detail
