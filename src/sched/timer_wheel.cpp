#include "timer_wheel.hpp"

#include <algorithm>
#include <bit>

namespace weft::detail {
namespace {
constexpr unsigned bits_per_level = 6;
constexpr std::uint64_t slot_mask = 63;

auto level_for(std::uint64_t elapsed, std::uint64_t when) noexcept -> unsigned {
    const std::uint64_t masked = (elapsed ^ when) | slot_mask;
    const unsigned significant = 63U - static_cast<unsigned>(std::countl_zero(masked));
    const unsigned level = significant / bits_per_level;
    return level < timer_wheel::levels ? level : timer_wheel::levels - 1;
}
}  // namespace

void timer_wheel::insert(timer_op* op) noexcept {
    if (op->when_ms < elapsed_) {
        op->when_ms = elapsed_;  // already due: file it in the current slot
    }
    // A deadline past the horizon is filed at the horizon, and keeps its own when_ms: its slot
    // comes up within one revolution of the top level and advance() files it again, nearer.
    const std::uint64_t at = std::min(op->when_ms, horizon());
    const unsigned level = level_for(elapsed_, at);
    const unsigned slot = static_cast<unsigned>((at >> (bits_per_level * level)) & slot_mask);
    op->level = static_cast<std::uint8_t>(level);
    op->slot = static_cast<std::uint8_t>(slot);
    op->wheel_prev = nullptr;
    op->wheel_next = heads_[level][slot];
    if (op->wheel_next != nullptr) {
        op->wheel_next->wheel_prev = op;
    }
    heads_[level][slot] = op;
    occupied_[level] |= std::uint64_t{1} << slot;
    ++size_;
}

void timer_wheel::remove(timer_op* op) noexcept {
    if (op->wheel_prev != nullptr) {
        op->wheel_prev->wheel_next = op->wheel_next;
    } else {
        heads_[op->level][op->slot] = op->wheel_next;
        if (op->wheel_next == nullptr) {
            occupied_[op->level] &= ~(std::uint64_t{1} << op->slot);
        }
    }
    if (op->wheel_next != nullptr) {
        op->wheel_next->wheel_prev = op->wheel_prev;
    }
    op->wheel_prev = op->wheel_next = nullptr;
    --size_;
}

auto timer_wheel::horizon() const noexcept -> std::uint64_t {
    constexpr unsigned top_shift = bits_per_level * (levels - 1);
    constexpr std::uint64_t top_slot_width = std::uint64_t{1} << top_shift;
    constexpr std::uint64_t span = top_slot_width << bits_per_level;
    // elapsed_ < 2^64 - span: a runtime's clock (milliseconds since it started) never gets there.
    return (elapsed_ & ~(top_slot_width - 1)) + span - 1;
}

auto timer_wheel::take(unsigned level, unsigned slot) noexcept -> timer_op* {
    timer_op* list = heads_[level][slot];
    heads_[level][slot] = nullptr;
    occupied_[level] &= ~(std::uint64_t{1} << slot);
    return list;
}

auto timer_wheel::next_slot() const noexcept -> std::optional<slot_ref> {
    for (unsigned level = 0; level < levels; ++level) {
        const std::uint64_t occ = occupied_[level];
        if (occ == 0) {
            continue;
        }
        const unsigned shift = bits_per_level * level;
        const std::uint64_t slot_width = std::uint64_t{1} << shift;
        const std::uint64_t level_span = slot_width << bits_per_level;
        const unsigned now_slot = static_cast<unsigned>((elapsed_ >> shift) & slot_mask);
        // Slots before now_slot at this level belong to the next revolution.
        const std::uint64_t rotated = std::rotr(occ, static_cast<int>(now_slot));
        const unsigned slot = (now_slot + static_cast<unsigned>(std::countr_zero(rotated))) & 63U;
        const std::uint64_t level_start = elapsed_ & ~(level_span - 1);
        std::uint64_t deadline = level_start + slot * slot_width;
        if (slot < now_slot) {
            deadline += level_span;
        }
        if (deadline < elapsed_) {
            deadline = elapsed_;  // the slot containing elapsed_ itself (higher levels)
        }
        return slot_ref{level, slot, deadline};
    }
    return std::nullopt;
}

auto timer_wheel::next_deadline() const noexcept -> std::optional<std::uint64_t> {
    auto s = next_slot();
    if (!s) {
        return std::nullopt;
    }
    return s->deadline;
}

}  // namespace weft::detail
