#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <source_location>
#include <vector>

namespace weft {

/// What a suspended task waits on, as runtime::dump() names it: set by the awaiters of those
/// primitives (a channel's send or recv, a socket or descriptor wait, a sleep, a join_handle, a
/// scope's join, an event), cleared when they resume.
enum class wait_kind : std::uint8_t { none, channel, io, timer, join, scope, event };

}  // namespace weft

namespace weft::detail {

/// The dump's view of one spawned task (weft::spawn, scope::spawn, runtime::spawn, block_on).
/// Lives in its registry's storage, never in the task's frame, so that a dump can read it while
/// the frame is being freed on another thread. Every field is an atomic read and written
/// relaxed, except `frame`: the owner's release store at open publishes the other fields to a
/// reader's acquire load, and the closing release store (any thread, when the frame is freed)
/// publishes the task's last writes to the owner's acquire load before it reuses the record.
/// State: frame == nullptr: free (or on the owner's free list); else live.
struct task_record {
    std::atomic<void*> frame{nullptr};
    /// The coroutine of this task suspended on `wait` (nullptr: none). Its frame, and those of
    /// every coroutine awaiting it up to this task's own, stay alive until it resumes.
    std::atomic<void*> leaf{nullptr};
    /// The wait_tag that set `leaf` (compared, never followed: only its owner clears `leaf`).
    std::atomic<const void*> waiter{nullptr};
    /// The last `leaf` to resume (the stall detector matches it with what a worker runs).
    std::atomic<void*> woken{nullptr};
    std::atomic<wait_kind> wait{wait_kind::none};
    std::atomic<bool> done{false};  // finished, its join_handle not yet joined
    std::atomic<std::uint64_t> id{0};
    std::atomic<const char*> name{nullptr};
    std::atomic<std::source_location> site{};
    // Owner only.
    task_record* next_free = nullptr;
    bool listed = false;  // on the owner's free list
};

/// The records of the tasks spawned on one thread: fixed-size chunks that never move or shrink
/// (a record's address is kept by its task), a free list the owner alone pops and refills.
/// Cost: open() pops the free list and fills the record (plain stores and one release store, no
/// read-modify-write); close() is one release store from whichever thread frees the frame.
/// When the free list is empty, refill() sweeps the next chunk_size records (round the chunks,
/// from where the last sweep stopped) for closed ones; if fewer than half of them were closed
/// it adds a chunk. A sweep that found none closed makes the next refills skip the sweep (1, 2,
/// 4, then 8 chunks added without one) while the tasks stay live. So an open pays for at most
/// one record swept and one record made, and far less than a sweep while most tasks live long.
/// Readers (runtime::dump) walk the chunks from any thread: a chunk is published by a release
/// store of `chunks_` and never freed before the registry.
class task_registry {
public:
    /// `tag`: the top 16 bits of every id opened here (ids of different registries differ).
    explicit task_registry(std::uint16_t tag) noexcept : next_id_((std::uint64_t{tag} << 48) + 1) {}
    task_registry(const task_registry&) = delete;
    auto operator=(const task_registry&) -> task_registry& = delete;
    ~task_registry();

    /// Owner thread: a record for the task whose root frame is `frame`.
    auto open(void* frame, std::source_location site, const char* name) -> task_record* {
        task_record* r = free_;
        if (r == nullptr) [[unlikely]] {
            r = refill();
        }
        free_ = r->next_free;
        r->listed = false;
        r->id.store(next_id_++, std::memory_order_relaxed);
        r->name.store(name, std::memory_order_relaxed);
        r->site.store(site, std::memory_order_relaxed);
        r->leaf.store(nullptr, std::memory_order_relaxed);
        r->woken.store(nullptr, std::memory_order_relaxed);
        r->waiter.store(nullptr, std::memory_order_relaxed);
        r->wait.store(wait_kind::none, std::memory_order_relaxed);
        r->done.store(false, std::memory_order_relaxed);
        r->frame.store(frame, std::memory_order_release);
        return r;
    }

    /// Any thread, as the task's frame is freed.
    static void close(task_record* r) noexcept {
        r->frame.store(nullptr, std::memory_order_release);
    }

    /// Any thread: calls f(record&) on every record of this registry (live or not: check
    /// `frame`).
    template <typename F>
    void for_each(F&& f) const {
        for (const chunk* c = chunks_.load(std::memory_order_acquire); c != nullptr; c = c->next) {
            for (std::size_t i = 0; i < c->size; ++i) {
                f(c->records[i]);
            }
        }
    }

private:
    struct chunk {
        explicit chunk(std::size_t n) : records(std::make_unique<task_record[]>(n)), size(n) {}
        std::unique_ptr<task_record[]> records;
        std::size_t size;
        const chunk* next = nullptr;
    };

    [[gnu::noinline, gnu::cold]] auto refill() -> task_record*;

    static constexpr std::size_t chunk_size = 256;

    task_record* free_ = nullptr;
    std::uint64_t next_id_;
    std::size_t total_ = 0;
    // The sweep's position: the next record to look at (owner only).
    const chunk* sweep_chunk_ = nullptr;
    std::size_t sweep_index_ = 0;
    unsigned skip_ = 0;     // refills left that add a chunk without sweeping
    unsigned backoff_ = 0;  // skip_ after the next futile sweep, doubled each time up to 8
    std::atomic<const chunk*> chunks_{nullptr};
};

}  // namespace weft::detail
