#include "weft/metrics/runtime_collector.hpp"

#include <string>
#include <vector>

namespace weft::metrics {

namespace {

auto scalar(std::string name, std::string help, metric_type t, double v) -> family_snapshot {
    return {.name = std::move(name),
            .help = std::move(help),
            .type = t,
            .series = {series_snapshot{.value = v}}};
}

auto per_worker(std::string name, std::string help, metric_type t) -> family_snapshot {
    return {.name = std::move(name), .help = std::move(help), .type = t, .label_names = {"worker"}};
}

}  // namespace

auto collect_runtime(registry& reg, const runtime& rt) -> collector_handle {
    return reg.add_collector([&rt](std::vector<family_snapshot>& out) {
        const runtime_metrics m = rt.metrics();
        const auto g = metric_type::gauge;
        out.push_back(scalar("weft_runtime_workers", "Worker threads.", g, m.workers));
        out.push_back(scalar("weft_runtime_workers_parked", "Workers parked with nothing to run.",
                             g, m.parked));
        out.push_back(scalar("weft_runtime_workers_searching", "Workers looking for work to steal.",
                             g, m.searching));
        out.push_back(scalar("weft_runtime_injector_depth",
                             "Tasks queued from outside the workers, not yet taken.", g,
                             static_cast<double>(m.injected)));
        out.push_back(scalar("weft_runtime_blocking_threads",
                             "Threads of the blocking pool (spawn_blocking).", g,
                             m.blocking_threads));
        out.push_back(scalar("weft_runtime_blocking_busy", "Blocking pool threads inside a call.",
                             g, m.blocking_busy));
        out.push_back(scalar("weft_runtime_blocking_in_flight", "Blocking calls queued or running.",
                             g, static_cast<double>(m.blocking_in_flight)));
        auto queued = per_worker("weft_runtime_queue_depth", "Tasks queued on the worker.", g);
        auto timers = per_worker("weft_runtime_timers", "Timers armed on the worker.", g);
        auto parks = per_worker("weft_runtime_park_attempts", "Times the worker ran out of tasks.",
                                metric_type::counter);
        auto sleeps = per_worker("weft_runtime_sleeps", "Times the worker slept in its driver.",
                                 metric_type::counter);
        auto wakes = per_worker("weft_runtime_wakes",
                                "Times the worker woke a parked worker for work it queued.",
                                metric_type::counter);
        auto stalls =
            per_worker("weft_worker_stalls",
                       "Times the worker stayed inside one task past the stall threshold.",
                       metric_type::counter);
        for (unsigned i = 0; i < rt.worker_count(); ++i) {
            const worker_metrics w = rt.worker_metrics(i);
            std::vector<std::string> label{std::to_string(i)};
            queued.series.push_back(
                {.label_values = label, .value = static_cast<double>(w.queued)});
            timers.series.push_back(
                {.label_values = label, .value = static_cast<double>(w.timers)});
            parks.series.push_back(
                {.label_values = label, .value = static_cast<double>(w.park_attempts)});
            sleeps.series.push_back(
                {.label_values = label, .value = static_cast<double>(w.sleeps)});
            stalls.series.push_back(
                {.label_values = label, .value = static_cast<double>(w.stalls)});
            wakes.series.push_back(
                {.label_values = std::move(label), .value = static_cast<double>(w.wakes)});
        }
        out.push_back(std::move(queued));
        out.push_back(std::move(timers));
        out.push_back(std::move(parks));
        out.push_back(std::move(sleeps));
        out.push_back(std::move(wakes));
        out.push_back(std::move(stalls));
    });
}

}  // namespace weft::metrics
