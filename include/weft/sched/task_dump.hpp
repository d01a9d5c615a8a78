#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "weft/core/detail/task_registry.hpp"

namespace weft {

/// Where a task stands at the moment of a dump.
enum class task_state : std::uint8_t {
    running,    ///< on a worker now (the task that asked for the dump, or one a worker is stuck in)
    queued,     ///< runnable, waiting for a worker
    suspended,  ///< waiting (task_info::waiting_on says on what, when its primitive says)
    done,       ///< finished; its join_handle has not been joined yet
};

/// Names of the enums above, for printing ("suspended", "channel").
[[nodiscard]] auto to_string(task_state s) noexcept -> const char*;
[[nodiscard]] auto to_string(wait_kind k) noexcept -> const char*;

/// One coroutine of a waiting task, innermost first.
struct coroutine_info {
    const void* frame = nullptr;
    /// The coroutine's function, demangled, where the program exports its symbols (link with
    /// -rdynamic); else empty, and `resume` names it for addr2line.
    std::string function = {};
    const void* resume = nullptr;
    /// Where it was spawned or forked; empty (line 0) for a coroutine that was only awaited.
    std::source_location site = {};
};

/// One live task (spawned by weft::spawn, scope::spawn, runtime::spawn or block_on).
struct task_info {
    std::uint64_t id = 0;
    std::string name = {};           ///< task_name given at spawn, or empty
    std::source_location site = {};  ///< where it was spawned
    task_state state = task_state::suspended;
    wait_kind waiting_on = wait_kind::none;  ///< for suspended tasks
    std::optional<unsigned> worker = {};     ///< for running tasks
    /// For a task waiting on a primitive: the waiting coroutine, then each coroutine awaiting
    /// it, up to the task's own (or to a fork, or a coroutine of another kind). Empty for the
    /// others, and when some worker did not stop for the dump.
    std::vector<coroutine_info> chain = {};
};

/// What runtime::dump() saw. Every worker stops in its scheduler loop while the dump is taken
/// (they read nothing else meanwhile), so the tasks form one consistent picture; a worker that
/// does not stop within a moment (stuck inside a task) is listed in `unresponsive_workers`, its
/// running task is shown as running, and no chains are walked (they could change under the
/// walk).
struct task_dump {
    std::vector<task_info> tasks = {};
    std::vector<unsigned> unresponsive_workers = {};
    /// runtime_options::task_records of the runtime: false, `tasks` is empty (nothing records
    /// them) and only `unresponsive_workers` tells something.
    bool task_records = false;

    /// One line per task ("task 7 'fetch' suspended on channel, spawned at f.cpp:12 (main)"),
    /// then one indented line per coroutine of its chain.
    [[nodiscard]] auto to_string() const -> std::string;
    void print(std::FILE* out = stderr) const;
};

/// A worker that stayed inside one task for longer than runtime_options::stall_threshold.
struct stall_report {
    unsigned worker = 0;
    std::chrono::milliseconds threshold{0};
    /// The spawned task the worker last resumed, or that task's coroutine it resumed (empty if
    /// it was neither, e.g. a fork's parent taken from the queue).
    std::optional<std::uint64_t> task_id = {};
    std::string task_name = {};
    std::source_location task_site = {};
    /// The worker's native stack when the stall was seen (return addresses, innermost first);
    /// empty if it could not be captured.
    std::vector<void*> stack = {};

    /// "weft: worker 1 stalled for over 100 ms in task 7 spawned at f.cpp:12 (main)" and the
    /// stack symbolised (backtrace_symbols), one frame per line.
    [[nodiscard]] auto to_string() const -> std::string;
};

}  // namespace weft
