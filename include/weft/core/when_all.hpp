#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <exception>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "weft/core/join_handle.hpp"
#include "weft/core/task.hpp"

namespace weft {

namespace detail {
template <typename T>
using non_void_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

// The shared state of one when_all: the group's cancellation and its first failure.
struct all_group {
    explicit all_group(stop_state* parent) noexcept : stop(parent) {}
    linked_stop_state stop;
    std::atomic<bool> failed{false};
    std::exception_ptr first_error;
};

// Runs one member: stores its value, or records the group's first failure and cancels the
// other members at once (not when the parent gets round to joining it). Never throws, so every
// member is always joined.
template <typename T>
auto run_member(task<T> t, std::optional<non_void_t<T>>& out, all_group& g) -> task<void> {
    try {
        if constexpr (std::is_void_v<T>) {
            co_await std::move(t);
            out.emplace();
        } else {
            out.emplace(co_await std::move(t));
        }
    } catch (...) {
        // The exchange elects one writer; the parent reads first_error only after joining every
        // member (acq_rel on each join word), so relaxed suffices here.
        if (!g.failed.exchange(true, std::memory_order_relaxed)) {
            g.first_error = std::current_exception();
        }
        g.stop.request_stop();
    }
}

// Builds the member tasks of a variadic when_all (a plain function: no co_await inside a braced
// initialiser or a coroutine lambda, both of which g++ 12 miscompiles).
template <typename Values, typename... T, std::size_t... I>
auto make_members(all_group& g, Values& values, std::index_sequence<I...>, task<T>&... ts)
    -> std::vector<task<void>> {
    std::vector<task<void>> members;
    members.reserve(sizeof...(T));
    (members.push_back(run_member(std::move(ts), std::get<I>(values), g)), ...);
    return members;
}

// Forks every member (the first runs at once, the rest wait in the deque for this worker or a
// thief), then joins them all.
inline auto run_members(std::vector<task<void>> members, all_group& g) -> task<void> {
    std::vector<join_handle<void>> handles;
    handles.reserve(members.size());
    for (auto& m : members) {
        set_stop(m, &g.stop);
        handles.push_back(co_await fork(std::move(m)));
    }
    for (auto& h : handles) {
        co_await std::move(h);
    }
}
}  // namespace detail

/// Runs every task concurrently (forked: the first starts at once, the others are stealable)
/// and returns all their values (void becomes std::monostate). If one fails, the others are
/// cancelled at once, all are awaited, and the first exception is rethrown.
///
///     auto [a, b] = co_await weft::when_all(load(x), load(y));
template <typename... T>
auto when_all(task<T>... tasks) -> task<std::tuple<detail::non_void_t<T>...>> {
    detail::all_group g(co_await detail::current_stop{});
    std::tuple<std::optional<detail::non_void_t<T>>...> values;
    co_await detail::run_members(
        detail::make_members(g, values, std::index_sequence_for<T...>{}, tasks...), g);
    if (g.first_error) {
        std::rethrow_exception(g.first_error);
    }
    co_return std::apply(
        [](auto&... v) { return std::tuple<detail::non_void_t<T>...>{std::move(*v)...}; }, values);
}

/// when_all over a vector of tasks of one type.
template <typename T>
auto when_all(std::vector<task<T>> tasks) -> task<std::vector<detail::non_void_t<T>>> {
    detail::all_group g(co_await detail::current_stop{});
    std::vector<std::optional<detail::non_void_t<T>>> values(tasks.size());
    std::vector<task<void>> members;
    members.reserve(tasks.size());
    for (std::size_t i = 0; i < tasks.size(); ++i) {
        members.push_back(detail::run_member(std::move(tasks[i]), values[i], g));
    }
    co_await detail::run_members(std::move(members), g);
    if (g.first_error) {
        std::rethrow_exception(g.first_error);
    }
    std::vector<detail::non_void_t<T>> out;
    out.reserve(values.size());
    for (auto& v : values) {
        out.push_back(std::move(*v));
    }
    co_return out;
}

}  // namespace weft
