#pragma once

// What bench_bus and bench_outbox (weft-bench's eventbus programs) share: reading their
// key=value options, naming a run's topics, the brokers' addresses, timing a run (wall clock
// and this process's CPU), stopping on a failed result, and deleting the JetStream streams a
// run made. Header-only: each program is one translation unit plus bench/scenarios.
//
// The NATS part needs cnats: it is compiled where the including program was built with
// weft::bus_nats (WEFT_BENCH_BUS_NATS or WEFT_BENCH_OUTBOX_NATS).

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "../scenarios/scenario.hpp"
#include "weft/core/result.hpp"
#if WEFT_BENCH_BUS_NATS || WEFT_BENCH_OUTBOX_NATS
#include <nats/nats.h>
#endif

namespace weft::bench::bus {

/// What a key that names no option does: exit 2, or pass (the suite gives every program of a
/// suite the same list, some keys for other programs).
enum class unknown_key { reject, skip };

/// Sets each option named by a key=value argument (argv[2] on) to its integer value. A
/// malformed argument or a value that is not an integer: exit 2.
inline void read_options(int argc,
                         char** argv,
                         const std::map<std::string, std::int64_t*>& options,
                         unknown_key unknown) {
    for (int i = 2; i < argc; ++i) {
        const std::string arg = argv[i];
        const auto eq = arg.find('=');
        auto k = options.find(arg.substr(0, eq));
        if (eq == std::string::npos || (k == options.end() && unknown == unknown_key::reject)) {
            fail("bad parameter '" + arg + "'", 2);
        }
        if (k == options.end()) {
            continue;
        }
        try {
            *k->second = std::stoll(arg.substr(eq + 1));
        } catch (const std::exception&) {
            fail("bad value in '" + arg + "' (want an integer)", 2);
        }
    }
}

/// The row of `scenario` in a program's table of scenarios; an unknown one: exit 2.
template <typename Row>
auto scenario_row(const std::map<std::string, Row>& table, const std::string& scenario)
    -> const Row& {
    auto it = table.find(scenario);
    if (it == table.end()) {
        fail("unknown scenario '" + scenario + "'", 2);
    }
    return it->second;
}

/// "weftbench-SCENARIO-PID-MS": a topic name no earlier run used, so nothing of an earlier
/// run is counted or waited for.
inline auto run_topic(const std::string& scenario) -> std::string {
    return "weftbench-" + scenario + "-" + std::to_string(::getpid()) + "-" +
           std::to_string(std::chrono::system_clock::now().time_since_epoch() /
                          std::chrono::milliseconds(1));
}

inline auto nats_url(std::int64_t port) -> std::string {
    return "nats://127.0.0.1:" + std::to_string(port);
}

inline auto kafka_brokers(std::int64_t port) -> std::string {
    return "127.0.0.1:" + std::to_string(port);
}

/// Wall clock and process CPU (every thread, user + system) since construction.
class stopwatch {
public:
    [[nodiscard]] auto elapsed_s() const -> double {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    }
    [[nodiscard]] auto cpu_s() const -> double { return process_cpu_seconds() - cpu0_; }

private:
    std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
    double cpu0_ = process_cpu_seconds();
};

/// Exit 1 with "WHAT: <error>" when `r` holds an error.
template <typename T>
void expect_ok(const result<T>& r, const std::string& what) {
    if (!r) {
        fail(what + ": " + r.error().message());
    }
}

#if WEFT_BENCH_BUS_NATS || WEFT_BENCH_OUTBOX_NATS
/// Deletes a run's streams (the broker's memory store is bounded; a suite publishes millions).
/// One that cannot be deleted is a warning on stderr, not a failed run.
inline void delete_streams(std::int64_t nats_port, const std::vector<std::string>& streams) {
    natsConnection* nc = nullptr;
    jsCtx* js = nullptr;
    if (natsConnection_ConnectTo(&nc, nats_url(nats_port).c_str()) == NATS_OK &&
        natsConnection_JetStream(&js, nc, nullptr) == NATS_OK) {
        for (const auto& stream : streams) {
            jsErrCode code{};
            if (js_DeleteStream(js, stream.c_str(), nullptr, &code) != NATS_OK) {
                std::fprintf(stderr, "warning: stream %s not deleted\n", stream.c_str());
            }
        }
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
}
#endif

}  // namespace weft::bench::bus
