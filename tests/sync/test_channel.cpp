#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "announce_parked.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/core/sync_wait.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/channel.hpp"
#include "weft/sync/detail/biased_lock.hpp"

namespace {

using namespace std::chrono_literals;

auto is_closed(const std::error_code& ec) -> bool { return ec == weft::sync_errc::closed; }

TEST(channel, error_category_names_closed) {
    std::error_code ec = weft::sync_errc::closed;
    EXPECT_STREQ(ec.category().name(), "weft.sync");
    EXPECT_EQ(ec.message(), "channel closed");
}

TEST(channel, buffered_send_then_recv_in_order) {
    weft::channel<int> ch{4};
    auto got = weft::sync_wait([&]() -> weft::task<std::vector<int>> {
        for (int i = 0; i < 4; ++i) {
            (co_await ch.send(i)).value();
        }
        std::vector<int> v;
        for (int i = 0; i < 4; ++i) {
            v.push_back((co_await ch.recv()).value());
        }
        co_return v;
    }());
    EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3}));
}

TEST(channel, try_ops_report_would_block_and_closed) {
    weft::channel<std::string> ch{1};
    EXPECT_EQ(ch.try_recv().error(), std::errc::operation_would_block);
    std::string a = "a";
    EXPECT_TRUE(ch.try_send(std::move(a)));
    std::string b = "b";
    auto r = ch.try_send(std::move(b));
    EXPECT_EQ(r.error(), std::errc::operation_would_block);
    EXPECT_EQ(b, "b");  // not moved from on failure
    ch.close();
    EXPECT_TRUE(is_closed(ch.try_send(std::string("c")).error()));
    EXPECT_EQ(ch.try_recv().value(), "a");  // drains first
    EXPECT_TRUE(is_closed(ch.try_recv().error()));
}

TEST(channel, rendezvous_try_send_needs_a_waiting_receiver) {
    weft::channel<int> ch{0};
    EXPECT_EQ(ch.try_send(1).error(), std::errc::operation_would_block);
    weft::runtime rt{{.workers = 2}};
    auto v = rt.block_on([&]() -> weft::task<int> {
        auto h = weft::spawn([&]() -> weft::task<int> { co_return (co_await ch.recv()).value(); });
        while (!ch.try_send(7)) {
            co_await weft::yield();
        }
        co_return co_await std::move(h);
    }());
    EXPECT_EQ(v, 7);
}

TEST(channel, send_suspends_when_full) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> ch{1};
    std::atomic<int> sent{0};
    weft::latch second_parked{1};
    rt.block_on([&]() -> weft::task<void> {
        auto h = weft::spawn([&]() -> weft::task<void> {
            (co_await ch.send(0)).value();
            sent.fetch_add(1);
            (co_await weft::test::announce_parked(second_parked, [&] {
                return ch.send(1);
            })).value();
            sent.fetch_add(1);
            (co_await ch.send(2)).value();
            sent.fetch_add(1);
        });
        (co_await second_parked.wait()).value();
        EXPECT_EQ(sent.load(), 1);  // the second send waits for space
        for (int i = 0; i < 3; ++i) {
            EXPECT_EQ((co_await ch.recv()).value(), i);
        }
        co_await std::move(h);
    }());
    EXPECT_EQ(sent.load(), 3);
}

TEST(channel, rendezvous_send_waits_for_receiver) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> ch{0};
    std::atomic<bool> delivered{false};
    weft::latch parked{1};
    rt.block_on([&]() -> weft::task<void> {
        auto h = weft::spawn([&]() -> weft::task<void> {
            (co_await weft::test::announce_parked(parked, [&] { return ch.send(5); })).value();
            delivered.store(true);
        });
        (co_await parked.wait()).value();
        EXPECT_FALSE(delivered.load());
        EXPECT_EQ((co_await ch.recv()).value(), 5);
        co_await std::move(h);
    }());
    EXPECT_TRUE(delivered.load());
}

TEST(channel, unbounded_never_blocks_sender) {
    weft::channel<int> ch{weft::unbounded};
    const int n = 10'000;
    weft::sync_wait([&]() -> weft::task<void> {
        for (int i = 0; i < n; ++i) {
            (co_await ch.send(i)).value();
        }
        co_return;
    }());
    EXPECT_EQ(ch.size(), static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(ch.try_recv().value(), i);
    }
}

TEST(channel, move_only_items) {
    weft::channel<std::unique_ptr<int>> ch{0};
    weft::runtime rt{{.workers = 2}};
    auto v = rt.block_on([&]() -> weft::task<int> {
        auto h = weft::spawn(
            [&]() -> weft::task<void> { (co_await ch.send(std::make_unique<int>(42))).value(); });
        auto p = (co_await ch.recv()).value();
        co_await std::move(h);
        co_return *p;
    }());
    EXPECT_EQ(v, 42);
}

TEST(channel, close_wakes_waiting_receivers_with_closed) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> ch{2};
    std::atomic<int> closed{0};
    weft::latch parked{4};
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < 4; ++i) {
                s.spawn([&]() -> weft::task<void> {
                    auto r =
                        co_await weft::test::announce_parked(parked, [&] { return ch.recv(); });
                    if (!r && is_closed(r.error())) {
                        closed.fetch_add(1);
                    }
                });
            }
            (co_await parked.wait()).value();
            ch.close();
        });
    }());
    EXPECT_EQ(closed.load(), 4);
}

TEST(channel, close_fails_waiting_senders_and_keeps_buffered_items) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> ch{1};
    std::atomic<int> failed{0};
    weft::latch parked{3};
    rt.block_on([&]() -> weft::task<void> {
        (co_await ch.send(100)).value();
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < 3; ++i) {
                s.spawn([&, i]() -> weft::task<void> {
                    auto r =
                        co_await weft::test::announce_parked(parked, [&] { return ch.send(i); });
                    if (!r && is_closed(r.error())) {
                        failed.fetch_add(1);
                    }
                });
            }
            (co_await parked.wait()).value();
            ch.close();
        });
        EXPECT_EQ((co_await ch.recv()).value(), 100);
        EXPECT_TRUE(is_closed((co_await ch.recv()).error()));
        EXPECT_TRUE(is_closed((co_await ch.send(1)).error()));
    }());
    EXPECT_EQ(failed.load(), 3);
}

TEST(channel, cancelled_recv_returns_operation_canceled) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> ch{1};
    weft::latch parked{1};
    auto ec = rt.block_on([&]() -> weft::task<std::error_code> {
        std::error_code out;
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                out = (co_await weft::test::announce_parked(parked, [&] {
                          return ch.recv();
                      })).error();
            });
            (co_await parked.wait()).value();
            s.request_stop();
            co_return;
        });
        co_return out;
    }());
    EXPECT_EQ(ec, std::errc::operation_canceled);
    EXPECT_TRUE(ch.try_send(1));  // the cancelled receiver left the list: the item stays
    EXPECT_EQ(ch.try_recv().value(), 1);
}

TEST(channel, cancelled_send_does_not_deliver) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> ch{0};
    weft::latch parked{1};
    auto ec = rt.block_on([&]() -> weft::task<std::error_code> {
        std::error_code out;
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                out = (co_await weft::test::announce_parked(parked, [&] {
                          return ch.send(9);
                      })).error();
            });
            (co_await parked.wait()).value();
            s.request_stop();
            co_return;
        });
        co_return out;
    }());
    EXPECT_EQ(ec, std::errc::operation_canceled);
    EXPECT_EQ(ch.try_recv().error(), std::errc::operation_would_block);
}

TEST(channel, already_cancelled_task_fails_at_once_when_it_would_wait) {
    weft::runtime rt{{.workers = 1}};
    weft::channel<int> ch{1};
    auto ec = rt.block_on([&]() -> weft::task<std::error_code> {
        std::error_code out;
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.request_stop();
            s.spawn([&]() -> weft::task<void> { out = (co_await ch.recv()).error(); });
            co_return;
        });
        co_return out;
    }());
    EXPECT_EQ(ec, std::errc::operation_canceled);
}

TEST(channel, recv_for_times_out_and_returns_items) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> ch{1};
    rt.block_on([&]() -> weft::task<void> {
        auto r = co_await ch.recv_for(5ms);
        EXPECT_EQ(r.error(), std::errc::timed_out);
        (co_await ch.send(3)).value();
        auto r2 = co_await ch.recv_for(1s);
        EXPECT_EQ(r2.value(), 3);
        ch.close();
        EXPECT_TRUE(is_closed((co_await ch.recv_for(1s)).error()));
    }());
}

TEST(channel, recv_batch_takes_what_is_ready) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> ch{8};
    rt.block_on([&]() -> weft::task<void> {
        for (int i = 0; i < 5; ++i) {
            (co_await ch.send(i)).value();
        }
        std::vector<int> out;
        EXPECT_EQ((co_await ch.recv_batch(out, 3)).value(), 3U);
        EXPECT_EQ((co_await ch.recv_batch(out, 10)).value(), 2U);
        EXPECT_EQ(out, (std::vector<int>{0, 1, 2, 3, 4}));
        weft::latch parked{1};
        auto h = weft::spawn([&]() -> weft::task<void> {
            (co_await parked.wait()).value();
            (co_await ch.send(9)).value();
        });
        std::vector<int> more;
        // waited for one
        EXPECT_EQ(
            (co_await weft::test::announce_parked(parked, [&] { return ch.recv_batch(more, 10); }))
                .value(),
            1U);
        EXPECT_EQ(more, (std::vector<int>{9}));
        co_await std::move(h);
        ch.close();
        EXPECT_TRUE(is_closed((co_await ch.recv_batch(more, 4)).error()));
    }());
}

TEST(channel, recv_batch_refills_from_waiting_senders) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> ch{2};
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                for (int i = 0; i < 6; ++i) {
                    (co_await ch.send(i)).value();
                }
            });
            std::vector<int> out;
            while (out.size() < 6) {
                (co_await ch.recv_batch(out, 6)).value();
            }
            EXPECT_EQ(out, (std::vector<int>{0, 1, 2, 3, 4, 5}));
        });
    }());
}

TEST(channel, waiting_receivers_are_served_fifo) {
    weft::runtime rt{{.workers = 1}};
    weft::channel<int> ch{0};
    std::vector<int> got(4, -1);  // receiver i parked i-th: it must get the i-th item
    std::deque<weft::latch> parking;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < 4; ++i) {
                weft::latch& parked = parking.emplace_back(1);  // outlives the receivers
                s.spawn([&, i]() -> weft::task<void> {
                    auto r =
                        co_await weft::test::announce_parked(parked, [&] { return ch.recv(); });
                    got[static_cast<std::size_t>(i)] = r.value();
                });
                (co_await parked.wait()).value();  // parked before the next one starts
            }
            for (int i = 0; i < 4; ++i) {
                (co_await ch.send(i)).value();
            }
        });
    }());
    EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3}));
}

TEST(channel, ping_pong_across_workers) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> a{0};
    weft::channel<int> b{0};
    const int n = 10'000;
    auto last = rt.block_on([&]() -> weft::task<int> {
        auto echo = weft::spawn([&]() -> weft::task<void> {
            for (;;) {
                auto r = co_await a.recv();
                if (!r) {
                    co_return;
                }
                (co_await b.send(*r + 1)).value();
            }
        });
        int v = 0;
        for (int i = 0; i < n; ++i) {
            (co_await a.send(v)).value();
            v = (co_await b.recv()).value();
        }
        a.close();
        co_await std::move(echo);
        co_return v;
    }());
    EXPECT_EQ(last, n);
}

// A channel used by one thread long enough to be biased, then by three threads at once (plain
// try_ operations, no runtime): every item is received exactly once.
TEST(channel, biased_channel_shared_later_delivers_every_item_once) {
    weft::channel<long> ch{64};
    const int solo = 4 * static_cast<int>(weft::detail::biased_lock::bias_after);
    for (int i = 0; i < solo; ++i) {
        ASSERT_TRUE(ch.try_send(i));
        ASSERT_EQ(ch.try_recv().value(), i);
    }
    const long per_producer = 20'000;
    std::atomic<long> received{0};
    std::atomic<long> sum{0};
    auto produce = [&](long base) {
        for (long i = 0; i < per_producer; ++i) {
            while (!ch.try_send(base + i)) {
                std::this_thread::yield();
            }
        }
    };
    auto consume = [&] {
        while (received.load(std::memory_order_relaxed) < 2 * per_producer) {
            if (auto v = ch.try_recv()) {
                sum.fetch_add(*v, std::memory_order_relaxed);
                received.fetch_add(1, std::memory_order_relaxed);
            } else {
                std::this_thread::yield();
            }
        }
    };
    std::thread p1(produce, 0L);
    std::thread c(consume);
    produce(per_producer);  // the biased owner, now one of three
    p1.join();
    c.join();
    const long n = 2 * per_producer;
    EXPECT_EQ(received.load(), n);
    EXPECT_EQ(sum.load(), n * (n - 1) / 2);
}

}  // namespace
