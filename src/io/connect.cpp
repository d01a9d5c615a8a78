#include "weft/io/connect.hpp"

#include <atomic>
#include <utility>

#include "weft/core/when_any.hpp"
#include "weft/sched/timer.hpp"

namespace weft {
namespace {

/// IPv6 first, then the families alternate (RFC 8305 §4, First Address Family Count 1); the
/// order within a family is the resolver's.
auto interleave(std::vector<socket_address> all) -> std::vector<socket_address> {
    std::vector<socket_address> v6;
    std::vector<socket_address> v4;
    for (auto& a : all) {
        (a.family() == AF_INET6 ? v6 : v4).push_back(a);
    }
    std::vector<socket_address> out;
    out.reserve(all.size());
    for (std::size_t i = 0; i < std::max(v6.size(), v4.size()); ++i) {
        if (i < v6.size()) {
            out.push_back(v6[i]);
        }
        if (i < v4.size()) {
            out.push_back(v4[i]);
        }
    }
    return out;
}

/// `while (co_await until_cancelled()) {}` suspends until the task's stop is requested (the
/// race's when_any cancels the loser). An awaiter, not a task of its own: the wait must observe
/// a stop that was requested before it began.
auto until_cancelled() noexcept -> sleep_awaiter { return sleep_for(std::chrono::hours(24)); }

/// One step of the staggered race, between the attempt on address i ("first") and the race
/// over the addresses after it ("rest", which starts after attempt_delay). `bits` decides who
/// ends the step when an attempt fails:
///   first_failed  the attempt on address i failed
///   rest_started  the delay passed and the rest began
///   rest_failed   every attempt of the rest failed
/// The first side to fail waits (until cancelled) while the other side may still succeed; the
/// second to fail returns the error. A first failure before the rest began ends the step at
/// once (`first_failed_early`) and the caller goes on to the rest without the delay; the rest,
/// seeing first_failed when its delay ends, never starts. One fetch_or per side orders them,
/// acq_rel so that each side sees the other's flag in a single modification order.
struct step_state {
    static constexpr unsigned first_failed = 1;
    static constexpr unsigned rest_started = 2;
    static constexpr unsigned rest_failed = 4;
    std::atomic<unsigned> bits{0};
    bool first_failed_early = false;  // written by the first side, read after when_any joined it
};

auto race_from(const std::vector<socket_address>& a, std::size_t i, const connect_options& o)
    -> task<result<tcp_stream>>;

auto first_side(const socket_address& addr, const connect_options& o, step_state& st)
    -> task<result<tcp_stream>> {
    auto r = co_await tcp_stream::connect(addr, o.attempt_timeout);
    if (r || r.error() == std::errc::operation_canceled) {
        co_return r;
    }
    const unsigned old = st.bits.fetch_or(step_state::first_failed, std::memory_order_acq_rel);
    if ((old & step_state::rest_started) == 0) {
        st.first_failed_early = true;
        co_return r;
    }
    if ((old & step_state::rest_failed) != 0) {
        co_return r;
    }
    while (co_await until_cancelled()) {
    }
    co_return std::errc::operation_canceled;
}

auto rest_side(const std::vector<socket_address>& a,
               std::size_t i,
               const connect_options& o,
               step_state& st) -> task<result<tcp_stream>> {
    if (!co_await sleep_for(o.attempt_delay)) {
        co_return std::errc::operation_canceled;
    }
    if ((st.bits.fetch_or(step_state::rest_started, std::memory_order_acq_rel) &
         step_state::first_failed) != 0) {
        while (co_await until_cancelled()) {  // the first side has ended the step
        }
        co_return std::errc::operation_canceled;
    }
    auto r = co_await race_from(a, i, o);
    if (r || r.error() == std::errc::operation_canceled) {
        co_return r;
    }
    if ((st.bits.fetch_or(step_state::rest_failed, std::memory_order_acq_rel) &
         step_state::first_failed) != 0) {
        co_return r;
    }
    while (co_await until_cancelled()) {
    }
    co_return std::errc::operation_canceled;
}

auto race_from(const std::vector<socket_address>& a, std::size_t i, const connect_options& o)
    -> task<result<tcp_stream>> {
    for (;; ++i) {
        if (i + 1 == a.size()) {
            co_return co_await tcp_stream::connect(a[i], o.attempt_timeout);
        }
        step_state st;
        auto w = co_await when_any(first_side(a[i], o, st), rest_side(a, i + 1, o, st));
        if (!st.first_failed_early) {
            co_return std::move(w.value);
        }
        // The attempt on a[i] failed before the rest began: go on at once with a[i + 1].
    }
}

}  // namespace

auto connect(std::vector<socket_address> addresses, connect_options options)
    -> task<result<tcp_stream>> {
    if (addresses.empty()) {
        co_return make_error_code(resolve_errc::no_address);
    }
    auto order = interleave(std::move(addresses));
    const bool both_families = order.size() > 1 && order[0].family() != order[1].family();
    if (both_families) {
        co_return co_await race_from(order, 0, options);
    }
    std::error_code last;
    for (const auto& a : order) {
        auto r = co_await tcp_stream::connect(a, options.attempt_timeout);
        if (r || r.error() == std::errc::operation_canceled) {
            co_return r;
        }
        last = r.error();
    }
    co_return last;
}

auto connect(std::string host, std::uint16_t port, connect_options options)
    -> task<result<tcp_stream>> {
    auto r = co_await resolve(std::move(host), port, options.resolve);
    if (!r) {
        co_return r.error();
    }
    co_return co_await connect(std::move(r).value(), options);
}

}  // namespace weft
