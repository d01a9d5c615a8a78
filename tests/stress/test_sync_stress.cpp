// weft::sync stress tests, run under ThreadSanitizer in CI. They count: P producers x C
// consumers deliver every item exactly once over each channel kind while random operations are
// cancelled and the channel is closed half-way; every item is then either received once or
// known to its sender as not delivered.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "sync/announce_parked.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/channel.hpp"
#include "weft/sync/mutex.hpp"
#include "weft/sync/select.hpp"
#include "weft/sync/semaphore.hpp"
#include "weft/sync/worker_pool.hpp"

namespace {

using namespace std::chrono_literals;

using weft::test::scaled;

struct ledger {
    explicit ledger(int n)
        : n(n),
          seen(std::make_unique<std::atomic<std::uint8_t>[]>(static_cast<std::size_t>(n))),
          rejected(std::make_unique<std::atomic<std::uint8_t>[]>(static_cast<std::size_t>(n))) {}
    int n;
    std::unique_ptr<std::atomic<std::uint8_t>[]> seen;
    std::unique_ptr<std::atomic<std::uint8_t>[]> rejected;
    std::atomic<int> received{0};
    std::atomic<int> cancellations{0};

    void got(int id) {
        seen[static_cast<std::size_t>(id)].fetch_add(1, std::memory_order_relaxed);
        received.fetch_add(1, std::memory_order_relaxed);
    }
    void check() const {
        int bad = 0;
        int got_total = 0;
        for (int i = 0; i < n; ++i) {
            const int s = seen[static_cast<std::size_t>(i)].load();
            const int r = rejected[static_cast<std::size_t>(i)].load();
            got_total += s;
            bad += s + r == 1 ? 0 : 1;
        }
        EXPECT_EQ(bad, 0) << "items lost or duplicated";
        EXPECT_EQ(got_total, received.load());
    }
};

// Sends `id`, sometimes through a send that a sibling cancels at a random moment (then it
// retries: a cancelled send must not have delivered). Returns false once the channel is closed.
// NOTE: the helpers are noinline: their frame allocation inlined into the calling coroutine
// trips a core bug (frame_alloc's thread_local address reused after the caller migrated; see
// the sync hand-off report). Remove once core reads its thread_locals out of line.
[[gnu::noinline]] auto produce_one(weft::channel<int>& ch, int id, std::mt19937& rng, ledger& l)
    -> weft::task<bool> {
    if (rng() % 16 == 0) {
        bool sent = false;
        bool closed = false;
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                auto r = co_await ch.send(id);
                sent = r.has_value();
                closed = !r && r.error() == weft::sync_errc::closed;
            });
            s.spawn([&s]() -> weft::task<void> {
                co_await weft::yield();
                s.request_stop();
            });
            co_return;
        });
        if (sent) {
            co_return true;
        }
        if (closed) {
            l.rejected[static_cast<std::size_t>(id)].store(1);
            co_return false;
        }
        l.cancellations.fetch_add(1, std::memory_order_relaxed);
    }
    auto r = co_await ch.send(id);
    if (!r) {
        EXPECT_EQ(r.error(), weft::sync_errc::closed);
        l.rejected[static_cast<std::size_t>(id)].store(1);
        co_return false;
    }
    co_return true;
}

// One receive by a randomly chosen path: plain, batch, select, timed, or cancelled by a
// sibling. Returns false once the channel is closed and drained.
[[gnu::noinline]] auto consume_some(weft::channel<int>& ch,
                                    std::mt19937& rng,
                                    ledger& l,
                                    int close_at) -> weft::task<bool> {
    auto take = [&](int id) {
        l.got(id);
        if (l.received.load(std::memory_order_relaxed) == close_at) {
            ch.close();  // close in the middle
        }
    };
    const unsigned kind = rng() % 64;
    if (kind < 4) {
        std::vector<int> batch;
        auto r = co_await ch.recv_batch(batch, 16);
        for (int id : batch) {
            take(id);
        }
        co_return r.has_value();
    }
    if (kind < 8) {
        weft::recv_case<int> rc{ch};
        auto r = co_await weft::select(rc);
        auto v = rc.result();
        if (!v) {
            co_return false;
        }
        EXPECT_EQ(r.value(), 0U);
        take(*v);
        co_return true;
    }
    if (kind == 8) {
        auto r = co_await ch.recv_for(100us);
        if (r) {
            take(*r);
            co_return true;
        }
        if (r.error() == std::errc::timed_out) {
            l.cancellations.fetch_add(1, std::memory_order_relaxed);
            co_return true;
        }
        co_return false;
    }
    if (kind < 12) {
        bool open = true;
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                auto r = co_await ch.recv();
                if (r) {
                    take(*r);  // handed over concurrently with the stop: still ours
                } else if (r.error() == std::errc::operation_canceled) {
                    l.cancellations.fetch_add(1, std::memory_order_relaxed);
                } else {
                    open = false;
                }
            });
            s.spawn([&s]() -> weft::task<void> {
                co_await weft::yield();
                s.request_stop();
            });
            co_return;
        });
        co_return open;
    }
    auto r = co_await ch.recv();
    if (!r) {
        co_return false;
    }
    take(*r);
    co_return true;
}

void run_channel_stress(std::size_t capacity, bool is_unbounded) {
    const int producers = 4;
    const int consumers = 4;
    const int per_producer = scaled(1'000'000) / producers;
    const int n = per_producer * producers;
    ledger l(n);
    auto ch = is_unbounded ? std::make_unique<weft::channel<int>>(weft::unbounded)
                           : std::make_unique<weft::channel<int>>(capacity);
    weft::runtime rt{{.workers = 0}};
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int p = 0; p < producers; ++p) {
                s.spawn([&, p]() -> weft::task<void> {
                    std::mt19937 rng(static_cast<unsigned>(p) + 1);
                    for (int i = 0; i < per_producer; ++i) {
                        const int id = p * per_producer + i;
                        if (!co_await produce_one(*ch, id, rng, l)) {
                            // Closed: the rest of this producer's items are not delivered.
                            for (int j = i + 1; j < per_producer; ++j) {
                                l.rejected[static_cast<std::size_t>(p * per_producer + j)].store(1);
                            }
                            co_return;
                        }
                    }
                });
            }
            for (int c = 0; c < consumers; ++c) {
                s.spawn([&, c]() -> weft::task<void> {
                    std::mt19937 rng(static_cast<unsigned>(c) + 100);
                    while (co_await consume_some(*ch, rng, l, n / 2)) {
                    }
                });
            }
            co_return;
        });
    }());
    l.check();
    EXPECT_GE(l.received.load(), n / 2);
}

TEST(sync_stress, bounded_channel_exactly_once_with_cancels_and_close) {
    run_channel_stress(64, false);
}

TEST(sync_stress, rendezvous_channel_exactly_once_with_cancels_and_close) {
    run_channel_stress(0, false);
}

TEST(sync_stress, unbounded_channel_exactly_once_with_cancels_and_close) {
    run_channel_stress(0, true);
}

// Selects over two channels with senders and receivers on both sides, some cancelled by a
// timeout: every item sent is received exactly once.
TEST(sync_stress, selects_over_two_channels_exactly_once) {
    const int per = scaled(200'000);
    weft::channel<int> a{0};
    weft::channel<int> b{8};
    ledger l(2 * per);
    weft::runtime rt{{.workers = 0}};
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {  // selects between sending to a and to b
                for (int i = 0; i < per; ++i) {
                    for (;;) {
                        weft::send_case<int> sa{a, 2 * i};
                        weft::send_case<int> sb{b, 2 * i + 1};
                        auto r = i % 97 == 0 ? co_await weft::select_for(50us, sa, sb)
                                             : co_await weft::select(sa, sb);
                        if (r) {
                            // The other case did not happen: account for its item now.
                            l.rejected[static_cast<std::size_t>(*r == 0 ? 2 * i + 1 : 2 * i)].store(
                                1);
                            break;
                        }
                        l.cancellations.fetch_add(1, std::memory_order_relaxed);
                    }
                }
                a.close();
                b.close();
            });
            for (int c = 0; c < 3; ++c) {
                s.spawn([&, c]() -> weft::task<void> {
                    std::mt19937 rng(static_cast<unsigned>(c));
                    bool a_open = true;
                    bool b_open = true;
                    while (a_open || b_open) {
                        weft::recv_case<int> ra{a};
                        weft::recv_case<int> rb{b};
                        auto r = rng() % 50 == 0 ? co_await weft::select_for(20us, ra, rb)
                                                 : co_await weft::select(ra, rb);
                        if (!r) {
                            continue;
                        }
                        auto v = *r == 0 ? ra.result() : rb.result();
                        if (v) {
                            l.got(*v);
                        } else {
                            (*r == 0 ? a_open : b_open) = false;
                            if (!a_open && !b_open) {
                                break;
                            }
                            // One side closed: keep draining the other with plain recv.
                            auto& other = a_open ? a : b;
                            while (auto w = co_await other.recv()) {
                                l.got(*w);
                            }
                            break;
                        }
                    }
                });
            }
            co_return;
        });
    }());
    l.check();
}

TEST(sync_stress, mutex_and_semaphore_under_contention) {
    weft::runtime rt{{.workers = 0}};
    weft::mutex m;
    weft::semaphore sem{2};
    long counter = 0;
    std::atomic<int> in_sem{0};
    std::atomic<int> over{0};
    const int tasks = 16;
    const int iters = scaled(20'000);
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int t = 0; t < tasks; ++t) {
                s.spawn([&]() -> weft::task<void> {
                    for (int i = 0; i < iters; ++i) {
                        {
                            auto g = (co_await m.lock()).value();
                            ++counter;
                        }
                        (co_await sem.acquire()).value();
                        if (in_sem.fetch_add(1) >= 2) {
                            over.fetch_add(1);
                        }
                        in_sem.fetch_sub(1);
                        sem.release();
                    }
                });
            }
            co_return;
        });
    }());
    EXPECT_EQ(counter, static_cast<long>(tasks) * iters);
    EXPECT_EQ(over.load(), 0);
}

TEST(sync_stress, worker_pool_many_callers) {
    weft::runtime rt{{.workers = 0}};
    const int callers = scaled(100'000);
    std::atomic<long> sum{0};
    rt.block_on([&]() -> weft::task<void> {
        weft::worker_pool<int, long> pool{4, [](int x) -> weft::task<long> { co_return x; }, 32};
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < callers; ++i) {
                s.spawn([&, i]() -> weft::task<void> {
                    // NOTE: a separate statement: g++ 12 mishandles a co_await on a temporary
                    // task inside a call's arguments.
                    const long r = co_await pool.map(i);
                    sum.fetch_add(r);
                });
            }
            co_return;
        });
        co_await pool.close();
    }());
    EXPECT_EQ(sum.load(), static_cast<long>(callers) * (callers - 1) / 2);
}

// ---- shutdown with waiters parked in every primitive ------------------------------------------

/// Counts live coroutine frames: a task takes one by value, so the copy lives in its frame and
/// dies only when the frame is destroyed (a parameter, unlike a local, outlives the body).
class frame_token {
public:
    explicit frame_token(std::atomic<int>& live) noexcept : live_(&live) { live.fetch_add(1); }
    frame_token(frame_token&& o) noexcept : live_(std::exchange(o.live_, nullptr)) {}
    frame_token(const frame_token&) = delete;
    auto operator=(const frame_token&) -> frame_token& = delete;
    auto operator=(frame_token&&) -> frame_token& = delete;
    ~frame_token() {
        if (live_ != nullptr) {
            live_->fetch_sub(1);
        }
    }

private:
    std::atomic<int>* live_;
};

/// What the waiters wait on; outlives the runtime (a primitive must outlive its waiters).
struct parking_lot {
    weft::channel<int> empty{4};       // receivers wait
    weft::channel<int> also_empty{4};  // the second case of the selects
    weft::channel<int> full{1};        // senders wait
    weft::channel<int> rendezvous{0};  // senders wait (nobody receives)
    weft::mutex m;                     // the first locker holds it while it waits on `empty`
    weft::semaphore sem{0};            // acquirers wait
    weft::latch parked;                // one count per waiter: parked (or done)
    explicit parking_lot(std::ptrdiff_t waiters) : parked(waiters) {}
};

auto wait_recv(frame_token /*unused*/, parking_lot& p) -> weft::task<void> {
    (void)co_await weft::test::announce_parked(p.parked, [&] { return p.empty.recv(); });
}
auto wait_send(frame_token /*unused*/, parking_lot& p, bool rendezvous) -> weft::task<void> {
    weft::channel<int>& ch = rendezvous ? p.rendezvous : p.full;
    (void)co_await weft::test::announce_parked(p.parked, [&] { return ch.send(1); });
}
auto wait_select(frame_token /*unused*/, parking_lot& p) -> weft::task<void> {
    weft::recv_case<int> a{p.empty};
    weft::recv_case<int> b{p.also_empty};
    (void)co_await weft::test::announce_parked(p.parked, [&] { return weft::select(a, b); });
}
auto wait_lock(frame_token /*unused*/, parking_lot& p) -> weft::task<void> {
    auto g = co_await weft::test::announce_parked(p.parked, [&] { return p.m.lock(); });
    if (g) {
        (void)co_await p.empty.recv();  // holds the lock until shutdown cancels this
    }
}
auto wait_acquire(frame_token /*unused*/, parking_lot& p) -> weft::task<void> {
    (void)co_await weft::test::announce_parked(p.parked, [&] { return p.sem.acquire(); });
}

// Runtimes shut down while many tasks wait in channel sends and receives, selects, a mutex and a
// semaphore (every other round before they have all parked): shutdown cancels every waiter and
// destroys every frame (frame_token counts them), none is stranded.
TEST(sync_stress, shutdown_destroys_every_parked_waiter) {
    const int rounds = scaled(40);
    const int per_kind = scaled(200);
    constexpr int kinds = 6;
    for (int round = 0; round < rounds; ++round) {
        std::atomic<int> live{0};
        parking_lot p{static_cast<std::ptrdiff_t>(kinds) * per_kind};
        ASSERT_TRUE(p.full.try_send(0));
        {
            weft::runtime rt{{.workers = 2}};
            for (int i = 0; i < per_kind; ++i) {
                rt.spawn(wait_recv(frame_token{live}, p)).detach();
                rt.spawn(wait_send(frame_token{live}, p, false)).detach();
                rt.spawn(wait_send(frame_token{live}, p, true)).detach();
                rt.spawn(wait_select(frame_token{live}, p)).detach();
                rt.spawn(wait_lock(frame_token{live}, p)).detach();
                rt.spawn(wait_acquire(frame_token{live}, p)).detach();
            }
            if (round % 2 == 0) {
                rt.block_on([](parking_lot& lot) -> weft::task<void> {
                    (void)co_await lot.parked.wait();
                }(p));
                ASSERT_EQ(live.load(), kinds * per_kind);  // all parked, none done
            }
        }
        ASSERT_EQ(live.load(), 0) << "round " << round << ": frames left after shutdown";
    }
}

}  // namespace
