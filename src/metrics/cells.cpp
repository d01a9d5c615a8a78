#include "weft/metrics/detail/cells.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "registry_state.hpp"

namespace weft::metrics::detail {

namespace {

// Set once the calling thread's shards were retired (thread exit): a recording made later, from
// another thread_local's destructor, must not touch them again.
thread_local bool tl_exited = false;

/// The calling thread's shards, one per registry it recorded into; on thread exit each is
/// retired into its registry (see the invariant of registry_state).
struct thread_shards {
    struct entry {
        std::shared_ptr<registry_state> state;
        std::unique_ptr<shard> s;
    };
    std::vector<entry> entries;

    thread_shards() = default;
    thread_shards(const thread_shards&) = delete;
    auto operator=(const thread_shards&) -> thread_shards& = delete;
    ~thread_shards() {
        tl_exited = true;
        tl_last_shard = {};
        for (entry& e : entries) {
            {
                std::lock_guard lock(e.state->mu);
                e.state->retire(*e.s);
            }
            for (auto& c : e.s->chunks) {
                delete c.load(std::memory_order_relaxed);
            }
        }
    }
};

thread_local thread_shards tl_shards;

auto new_shard(registry_state& r) -> shard* {
    auto* s = new shard;
    std::lock_guard lock(r.mu);
    r.shards.push_back(s);
    return s;
}

}  // namespace

auto this_thread_last_shard() noexcept -> last_shard& { return tl_last_shard; }

auto local_cells_slow(const std::shared_ptr<registry_state>& r,
                      std::uint64_t id,
                      std::uint32_t cell) noexcept -> std::atomic<std::uint64_t>* {
    shard* s = nullptr;
    if (tl_exited) {
        // Recorded from a thread-exit destructor after this thread's shards were retired: a
        // shard that stays registered (read by every collection) and is never freed. Rare: one
        // per such thread and registry.
        s = tl_last_shard.registry_id == id ? tl_last_shard.s : new_shard(*r);
    } else {
        thread_shards& ts = tl_shards;
        for (auto& e : ts.entries) {
            if (e.state->id == id) {
                s = e.s.get();
                break;
            }
        }
        if (s == nullptr) {
            ts.entries.reserve(ts.entries.size() + 1);  // so that push_back cannot throw
            s = new_shard(*r);
            ts.entries.push_back({r, std::unique_ptr<shard>(s)});
        }
    }
    std::atomic<cell_chunk*>& slot = s->chunks[cell / chunk_cells];
    cell_chunk* c = slot.load(std::memory_order_relaxed);
    if (c == nullptr) {
        c = new cell_chunk;
        slot.store(c, std::memory_order_release);  // pairs with registry_state::read_*'s acquire
    }
    tl_last_shard = {id, s};
    return &c->cells[cell % chunk_cells];
}

}  // namespace weft::metrics::detail
