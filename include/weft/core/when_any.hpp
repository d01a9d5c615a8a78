#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "weft/core/join_handle.hpp"
#include "weft/core/task.hpp"
#include "weft/core/when_all.hpp"

namespace weft {

/// The winner of when_any: its position among the arguments and its value.
template <typename T>
struct when_any_result {
    std::size_t index;
    detail::non_void_t<T> value;
};

namespace detail {
template <typename T>
struct race {
    explicit race(stop_state* parent) noexcept : group(parent) {}
    linked_stop_state group;
    std::atomic<bool> decided{false};
    std::size_t winner = 0;
    std::optional<non_void_t<T>> value;
    std::exception_ptr error;
};

template <typename T>
auto run_racer(task<T> t, std::size_t index, race<T>& r) -> task<void> {
    std::optional<non_void_t<T>> v;
    std::exception_ptr e;
    try {
        if constexpr (std::is_void_v<T>) {
            co_await std::move(t);
            v.emplace();
        } else {
            v.emplace(co_await std::move(t));
        }
    } catch (...) {
        e = std::current_exception();
    }
    // relaxed is enough: the winner's writes reach the awaiting parent through the join of this
    // racer (acq_rel on the join word).
    if (!r.decided.exchange(true, std::memory_order_relaxed)) {
        r.winner = index;
        r.value = std::move(v);
        r.error = std::move(e);
        r.group.request_stop();
    }
}
}  // namespace detail

/// Runs the tasks concurrently; the first to finish wins, the others are cancelled (through
/// their stop token) and awaited before this returns. Rethrows the winner's exception, if it
/// failed.
///
///     auto r = co_await weft::when_any(read_from(a), read_from(b));
///     // r.index, r.value
template <typename T>
auto when_any(std::vector<task<T>> tasks) -> task<when_any_result<T>> {
    if (tasks.empty()) {
        throw std::invalid_argument("weft::when_any: no tasks");
    }
    detail::race<T> r(co_await detail::current_stop{});
    std::vector<join_handle<void>> racers;
    racers.reserve(tasks.size());
    for (std::size_t i = 0; i < tasks.size(); ++i) {
        auto racer = detail::run_racer(std::move(tasks[i]), i, r);
        detail::set_stop(racer, &r.group);
        racers.push_back(co_await fork(std::move(racer)));
    }
    for (auto& h : racers) {
        co_await std::move(h);  // racers never throw
    }
    if (r.error) {
        std::rethrow_exception(r.error);
    }
    co_return when_any_result<T>{r.winner, std::move(*r.value)};
}

template <typename T, typename... More>
    requires(std::is_same_v<task<T>, More> && ...)
auto when_any(task<T> first, More... more) -> task<when_any_result<T>> {
    std::vector<task<T>> v;
    v.reserve(1 + sizeof...(More));
    v.push_back(std::move(first));
    (v.push_back(std::move(more)), ...);
    return when_any(std::move(v));
}

}  // namespace weft
