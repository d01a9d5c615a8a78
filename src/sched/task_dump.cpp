#include "weft/sched/task_dump.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "runtime_core.hpp"
#include "weft/core/task.hpp"
#include "weft/sched/runtime.hpp"

namespace weft {

namespace {

// How long a dump waits for the workers to stop in their loops; one still inside a task then
// is listed as unresponsive.
constexpr std::chrono::milliseconds stop_wait{100};
// Longest chain walked (a bound against a corrupt frame, not a limit anyone should reach).
constexpr std::size_t max_chain = 256;

auto site_text(const std::source_location& s) -> std::string {
    if (s.line() == 0) {
        return "?";
    }
    std::string out = s.file_name();
    out += ':';
    out += std::to_string(s.line());
    if (s.function_name()[0] != '\0') {
        out += " (";
        out += s.function_name();
        out += ')';
    }
    return out;
}

auto symbol_of(const void* addr) -> std::string {
    Dl_info info{};
    if (::dladdr(addr, &info) == 0 || info.dli_sname == nullptr) {
        return {};
    }
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> d(
        abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status), &std::free);
    return status == 0 && d ? std::string(d.get()) : std::string(info.dli_sname);
}

auto hex(const void* p) -> std::string {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%p", p);
    return buf;
}

}  // namespace

auto to_string(task_state s) noexcept -> const char* {
    switch (s) {
        case task_state::running:
            return "running";
        case task_state::queued:
            return "queued";
        case task_state::suspended:
            return "suspended";
        case task_state::done:
            return "done";
    }
    return "?";
}

auto to_string(wait_kind k) noexcept -> const char* {
    switch (k) {
        case wait_kind::none:
            return "none";
        case wait_kind::channel:
            return "channel";
        case wait_kind::io:
            return "io";
        case wait_kind::timer:
            return "timer";
        case wait_kind::join:
            return "join";
        case wait_kind::scope:
            return "scope";
        case wait_kind::event:
            return "event";
    }
    return "?";
}

auto task_dump::to_string() const -> std::string {
    std::string out = task_records ? "weft: " + std::to_string(tasks.size()) + " live task(s)"
                                   : std::string("weft: tasks not recorded (task_records off)");
    for (unsigned w : unresponsive_workers) {
        out += "; worker " + std::to_string(w) + " did not stop (inside a task)";
    }
    out += '\n';
    for (const task_info& t : tasks) {
        out += "task " + std::to_string(t.id);
        if (!t.name.empty()) {
            out += " '" + t.name + "'";
        }
        out += ' ';
        out += weft::to_string(t.state);
        if (t.state == task_state::suspended && t.waiting_on != wait_kind::none) {
            out += " on ";
            out += weft::to_string(t.waiting_on);
        }
        if (t.worker) {
            out += " on worker " + std::to_string(*t.worker);
        }
        out += ", spawned at " + site_text(t.site) + '\n';
        for (const coroutine_info& c : t.chain) {
            out += "    in " + (c.function.empty() ? "coroutine" : c.function) + " [resume " +
                   hex(c.resume) + ", frame " + hex(c.frame) + "]";
            if (c.site.line() != 0) {
                out += " started at " + site_text(c.site);
            }
            out += '\n';
        }
    }
    return out;
}

void task_dump::print(std::FILE* out) const {
    const std::string text = to_string();
    std::fwrite(text.data(), 1, text.size(), out);
    std::fflush(out);
}

auto stall_report::to_string() const -> std::string {
    std::string out = "weft: worker " + std::to_string(worker) +
                      " stalled: inside one task for over " + std::to_string(threshold.count()) +
                      " ms";
    if (task_id) {
        out += ", task " + std::to_string(*task_id);
        if (!task_name.empty()) {
            out += " '" + task_name + "'";
        }
        out += " spawned at " + site_text(task_site);
    }
    out += '\n';
    if (!stack.empty()) {
        std::unique_ptr<char*, decltype(&std::free)> names(
            ::backtrace_symbols(stack.data(), static_cast<int>(stack.size())), &std::free);
        for (std::size_t i = 0; i < stack.size(); ++i) {
            out +=
                "    #" + std::to_string(i) + ' ' + (names ? names.get()[i] : hex(stack[i])) + '\n';
        }
    }
    return out;
}

auto runtime::dump() -> task_dump { return core_->dump(); }

void runtime::record(detail::promise_base& p,
                     void* frame,
                     std::source_location site,
                     const char* name) {
    if (!core_->opts.task_records) {
        p.set_site(site);
        return;
    }
    detail::sched_worker* w = detail::tl_sched_worker;
    if (w != nullptr && &w->runtime() == core_.get()) {
        p.set_record(w->tasks.open(frame, site, name));
        return;
    }
    std::lock_guard lock(core_->outside_mu);
    p.set_record(core_->outside_tasks.open(frame, site, name));
}

namespace detail {

auto runtime_core::dump() -> task_dump {
    sched_worker* self = tl_sched_worker;
    if (self != nullptr && &self->runtime() != this) {
        self = nullptr;  // a worker of another runtime: an outsider here
    }
    // One dump at a time. A worker waiting for its turn keeps stopping for the dump under way
    // (it would otherwise wait for a dumper that waits for it).
    std::unique_lock lock(dump_mu, std::defer_lock);
    while (!lock.try_lock()) {
        if (self != nullptr) {
            self->stop_for_dump();
        }
        std::this_thread::sleep_for(std::chrono::microseconds{100});
    }
    const std::uint64_t gen = stop_gen.fetch_add(1, std::memory_order_acq_rel) + 1;  // odd
    loop_attention.fetch_add(1, std::memory_order_acq_rel);
    std::vector<sched_worker*> stopped;
    std::vector<unsigned> unresponsive;
    const auto until = std::chrono::steady_clock::now() + stop_wait;
    for (;;) {
        stopped.clear();
        unresponsive.clear();
        for (auto& w : workers) {
            if (w.get() == self || w->stopped_gen.load(std::memory_order_acquire) == gen) {
                stopped.push_back(w.get());
            } else {
                unresponsive.push_back(w->index());
                w->unpark();  // a parked worker comes round its loop
            }
        }
        if (unresponsive.empty() || std::chrono::steady_clock::now() >= until) {
            break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds{200});
    }
    const bool all_stopped = unresponsive.empty();

    task_dump out;
    out.unresponsive_workers = unresponsive;
    out.task_records = opts.task_records;
    std::unordered_set<const void*> queued;
    for (sched_worker* w : stopped) {
        w->for_each_queued([&](void* h) { queued.insert(h); });
    }
    {
        std::lock_guard ilock(inject_mu_);
        for (void* h : injector_) {
            queued.insert(h);
        }
    }
    std::unordered_map<const void*, unsigned> running;
    if (self != nullptr) {
        running.emplace(self->running.load(std::memory_order_relaxed), self->index());
    }
    for (unsigned i : unresponsive) {
        running.emplace(workers[i]->running.load(std::memory_order_relaxed), i);
    }

    for_each_record([&](const task_record& r) {
        void* frame = r.frame.load(std::memory_order_acquire);
        if (frame == nullptr) {
            return;
        }
        task_info t;
        t.id = r.id.load(std::memory_order_relaxed);
        const char* name = r.name.load(std::memory_order_relaxed);
        t.name = name != nullptr ? name : "";
        t.site = r.site.load(std::memory_order_relaxed);
        void* leaf = r.leaf.load(std::memory_order_relaxed);
        void* woken = r.woken.load(std::memory_order_relaxed);
        const wait_kind kind = r.wait.load(std::memory_order_relaxed);
        auto is_running = [&](const void* h) -> std::optional<unsigned> {
            if (h == nullptr) {
                return std::nullopt;
            }
            auto it = running.find(h);
            return it == running.end() ? std::nullopt : std::optional<unsigned>(it->second);
        };
        if (r.done.load(std::memory_order_relaxed)) {
            t.state = task_state::done;
        } else if (auto w = is_running(frame)  ? is_running(frame)
                            : is_running(leaf) ? is_running(leaf)
                                               : is_running(woken)) {
            t.state = task_state::running;
            t.worker = w;
        } else if (queued.contains(frame) || (leaf != nullptr && queued.contains(leaf))) {
            t.state = task_state::queued;
        } else {
            t.state = task_state::suspended;
            t.waiting_on = leaf != nullptr ? kind : wait_kind::none;
        }
        // The chain: only while every worker is stopped (nothing resumes or frees a frame),
        // and only from a coroutine still suspended on its primitive.
        if (all_stopped && t.state != task_state::running && leaf != nullptr) {
            promise_base* p = &std::coroutine_handle<promise_base>::from_address(leaf).promise();
            void* addr = leaf;
            while (t.chain.size() < max_chain) {
                coroutine_info c;
                c.frame = addr;
                c.resume = *static_cast<void* const*>(addr);  // the frame's resume function
                c.function = symbol_of(c.resume);
                c.site = p->site();
                t.chain.push_back(std::move(c));
                if (p->mode_ != task_mode::awaited || !p->continuation_) {
                    break;
                }
                addr = p->continuation_.address();
                p = &std::coroutine_handle<promise_base>::from_address(addr).promise();
            }
        }
        out.tasks.push_back(std::move(t));
    });
    std::sort(out.tasks.begin(), out.tasks.end(),
              [](const task_info& a, const task_info& b) { return a.id < b.id; });

    stop_gen.fetch_add(1, std::memory_order_release);  // even: the workers go on
    loop_attention.fetch_sub(1, std::memory_order_release);
    stop_gen.notify_all();
    return out;
}

}  // namespace detail
}  // namespace weft
