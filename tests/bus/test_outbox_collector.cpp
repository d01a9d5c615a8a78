#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "weft/bus/outbox_collector.hpp"
#include "weft/metrics/registry.hpp"

namespace {

auto value_of(const std::vector<weft::metrics::family_snapshot>& fs,
              std::string_view name,
              const std::string& outbox) -> double {
    for (const auto& f : fs) {
        if (f.name == name) {
            for (const auto& s : f.series) {
                if (s.label_values == std::vector<std::string>{outbox}) {
                    return s.value;
                }
            }
        }
    }
    return -1;
}

// Each outbox's counters under its own label; pending is what was staged and has not ended
// (published or dead-lettered), never below 0; the lag is the oldest pending age in seconds.
TEST(outbox_collector, reads_each_outbox_at_collection) {
    weft::metrics::registry reg;
    weft::bus::outbox_metrics orders{.staged = 10,
                                     .published = 6,
                                     .retries = 2,
                                     .dead_lettered = 1,
                                     .oldest_pending_age = std::chrono::milliseconds{1500}};
    const weft::bus::outbox_metrics audit{.staged = 3, .published = 5};  // staged elsewhere
    auto a = weft::bus::collect_outbox(reg, "orders", [&] { return orders; });
    auto b = weft::bus::collect_outbox(reg, "audit", [&] { return audit; });
    auto fs = reg.collect();
    EXPECT_EQ(value_of(fs, "weft_outbox_staged", "orders"), 10);
    EXPECT_EQ(value_of(fs, "weft_outbox_published", "audit"), 5);
    EXPECT_EQ(value_of(fs, "weft_outbox_retries", "orders"), 2);
    EXPECT_EQ(value_of(fs, "weft_outbox_dead_lettered", "orders"), 1);
    EXPECT_EQ(value_of(fs, "weft_outbox_pending", "orders"), 3);
    EXPECT_EQ(value_of(fs, "weft_outbox_pending", "audit"), 0);
    EXPECT_EQ(value_of(fs, "weft_outbox_relay_lag_seconds", "orders"), 1.5);
    orders.published = 9;  // read again at the next collection
    fs = reg.collect();
    EXPECT_EQ(value_of(fs, "weft_outbox_pending", "orders"), 0);
    const std::string text = reg.render(weft::metrics::exposition_format::prometheus_text);
    EXPECT_NE(text.find("weft_outbox_published_total{outbox=\"orders\"} 9\n"), std::string::npos)
        << text;
}

}  // namespace
