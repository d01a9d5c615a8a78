#pragma once

// The IO tests run every case once per backend: a fixture parameterised on the backend (an
// io_uring run is skipped where the kernel has none) and the instantiation that names the runs
// after it (…/io_uring, …/epoll).

#include <gtest/gtest.h>

#include <string>
#include <system_error>

#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"

namespace weft::test {

class backend_test : public ::testing::TestWithParam<io_backend> {
protected:
    void SetUp() override {
        try {
            (void)resolve_io_backend(GetParam());
        } catch (const std::system_error&) {
            GTEST_SKIP() << "io_uring unavailable here";
        }
    }
    /// A runtime with reactors of the backend under test.
    auto options(unsigned workers = 2) -> runtime_options {
        return io_runtime_options(workers, GetParam());
    }
};

}  // namespace weft::test

/// Runs every TEST_P of `fixture` (derived from weft::test::backend_test) on both backends.
#define WEFT_TEST_ON_BOTH_BACKENDS(fixture)                                                        \
    INSTANTIATE_TEST_SUITE_P(                                                                      \
        backends, fixture, ::testing::Values(weft::io_backend::io_uring, weft::io_backend::epoll), \
        [](const auto& info) { return std::string(weft::to_string(info.param)); })
