#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "announce_parked.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/select.hpp"

namespace {

using namespace std::chrono_literals;

TEST(select, picks_the_ready_recv) {
    weft::runtime rt{{.workers = 1}};
    weft::channel<int> a{1};
    weft::channel<int> b{1};
    rt.block_on([&]() -> weft::task<void> {
        (co_await b.send(7)).value();
        weft::recv_case<int> ra{a};
        weft::recv_case<int> rb{b};
        auto r = co_await weft::select(ra, rb);
        EXPECT_EQ(r.value(), 1U);
        EXPECT_EQ(rb.result().value(), 7);
        EXPECT_EQ(a.size(), 0U);
    }());
}

TEST(select, waits_then_completes_exactly_one_case) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> a{0};
    weft::channel<int> b{0};
    weft::latch parked{1};
    rt.block_on([&]() -> weft::task<void> {
        auto h = weft::spawn([&]() -> weft::task<void> {
            (co_await parked.wait()).value();
            (co_await b.send(3)).value();
        });
        weft::recv_case<int> ra{a};
        weft::recv_case<int> rb{b};
        auto r = co_await weft::test::announce_parked(parked, [&] { return weft::select(ra, rb); });
        EXPECT_EQ(r.value(), 1U);
        EXPECT_EQ(rb.result().value(), 3);
        co_await std::move(h);
        // The losing case left channel a: a rendezvous send finds no receiver.
        EXPECT_EQ(a.try_send(1).error(), std::errc::operation_would_block);
    }());
}

TEST(select, send_case_delivers_only_when_chosen) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> full{1};
    weft::channel<int> out{0};
    rt.block_on([&]() -> weft::task<void> {
        (co_await full.send(0)).value();
        auto h = weft::spawn([&]() -> weft::task<int> { co_return (co_await out.recv()).value(); });
        weft::send_case<int> s1{full, 1};
        weft::send_case<int> s2{out, 2};
        auto r = co_await weft::select(s1, s2);
        EXPECT_EQ(r.value(), 1U);
        EXPECT_TRUE(s2.result());
        EXPECT_EQ(co_await std::move(h), 2);
        EXPECT_EQ(full.size(), 1U);  // s1 did not deliver
        EXPECT_EQ(full.try_recv().value(), 0);
    }());
}

TEST(select, closed_channel_case_is_ready_with_closed) {
    weft::runtime rt{{.workers = 1}};
    weft::channel<int> a{1};
    weft::channel<int> b{1};
    b.close();
    rt.block_on([&]() -> weft::task<void> {
        weft::recv_case<int> ra{a};
        weft::recv_case<int> rb{b};
        auto r = co_await weft::select(ra, rb);
        EXPECT_EQ(r.value(), 1U);
        EXPECT_EQ(rb.result().error(), weft::sync_errc::closed);
    }());
}

TEST(select, close_wakes_a_waiting_select) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> a{0};
    weft::latch parked{1};
    rt.block_on([&]() -> weft::task<void> {
        auto h = weft::spawn([&]() -> weft::task<void> {
            (co_await parked.wait()).value();
            a.close();
        });
        weft::recv_case<int> ra{a};
        auto r = co_await weft::test::announce_parked(parked, [&] { return weft::select(ra); });
        EXPECT_EQ(r.value(), 0U);
        EXPECT_EQ(ra.result().error(), weft::sync_errc::closed);
        co_await std::move(h);
    }());
}

TEST(select, timeout_takes_nothing) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> a{0};
    weft::channel<int> b{1};
    rt.block_on([&]() -> weft::task<void> {
        (co_await b.send(1)).value();
        weft::recv_case<int> ra{a};
        weft::send_case<int> sb{b, 2};
        auto r = co_await weft::select_for(3ms, ra, sb);
        EXPECT_EQ(r.error(), std::errc::timed_out);
        EXPECT_EQ(b.size(), 1U);
        EXPECT_EQ(a.try_send(5).error(), std::errc::operation_would_block);
    }());
}

TEST(select, cancelled_select_returns_operation_canceled) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> a{0};
    weft::channel<int> b{0};
    weft::latch parked{1};
    std::error_code ec;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                weft::recv_case<int> ra{a};
                weft::recv_case<int> rb{b};
                ec = (co_await weft::test::announce_parked(parked, [&] {
                         return weft::select(ra, rb);
                     })).error();
            });
            (co_await parked.wait()).value();
            s.request_stop();
            co_return;
        });
    }());
    EXPECT_EQ(ec, std::errc::operation_canceled);
    EXPECT_EQ(a.try_send(1).error(), std::errc::operation_would_block);
    EXPECT_EQ(b.try_send(1).error(), std::errc::operation_would_block);
}

TEST(select, same_channel_recv_and_send) {
    weft::runtime rt{{.workers = 1}};
    weft::channel<int> a{1};
    rt.block_on([&]() -> weft::task<void> {
        weft::recv_case<int> r{a};
        weft::send_case<int> s{a, 4};
        auto res = co_await weft::select(r, s);
        EXPECT_EQ(res.value(), 1U);  // empty buffer: only the send can proceed
        EXPECT_EQ(a.try_recv().value(), 4);
    }());
}

// Both channels always ready: the random start must spread the choices.
TEST(select, fairness_between_ready_cases) {
    weft::runtime rt{{.workers = 1}};
    weft::channel<int> a{weft::unbounded};
    weft::channel<int> b{weft::unbounded};
    const int n = 4000;
    std::array<int, 2> count{};
    rt.block_on([&]() -> weft::task<void> {
        for (int i = 0; i < n; ++i) {
            (co_await a.send(i)).value();
            (co_await b.send(i)).value();
        }
        for (int i = 0; i < n; ++i) {
            weft::recv_case<int> ra{a};
            weft::recv_case<int> rb{b};
            auto r = co_await weft::select(ra, rb);
            ++count[r.value()];
        }
    }());
    EXPECT_EQ(count[0] + count[1], n);
    EXPECT_GT(count[0], n / 4);
    EXPECT_GT(count[1], n / 4);
}

// Many selects racing on shared channels: every item is taken exactly once.
TEST(select, concurrent_selects_lose_nothing) {
    weft::runtime rt{{.workers = 2}};
    weft::channel<int> a{0};
    weft::channel<int> b{4};
    const int per = 2000;
    std::atomic<long> sum{0};
    std::atomic<int> got{0};
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int c = 0; c < 4; ++c) {
                s.spawn([&]() -> weft::task<void> {
                    for (;;) {
                        weft::recv_case<int> ra{a};
                        weft::recv_case<int> rb{b};
                        auto r = co_await weft::select(ra, rb);
                        auto v = r.value() == 0 ? ra.result() : rb.result();
                        if (!v) {
                            co_return;  // a closed channel ends this consumer
                        }
                        sum.fetch_add(*v);
                        got.fetch_add(1);
                    }
                });
            }
            for (int i = 1; i <= per; ++i) {
                (co_await a.send(i)).value();
                (co_await b.send(i)).value();
            }
            while (b.size() != 0) {
                co_await weft::yield();
            }
            a.close();
            b.close();
        });
    }());
    EXPECT_EQ(got.load(), 2 * per);
    EXPECT_EQ(sum.load(), 2L * per * (per + 1) / 2);
}

}  // namespace
