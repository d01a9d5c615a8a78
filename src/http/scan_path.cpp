#include "weft/http/scan_path.hpp"

#include <atomic>
#include <cstdlib>

#include "scan.hpp"

namespace weft::http {

namespace {

auto table(scan_path p) noexcept -> const detail::scan_ops* {
    switch (p) {
#if defined(__x86_64__) || defined(__i386__)
        case scan_path::avx2:
            return &detail::avx2_scan;
        case scan_path::sse2:
            return &detail::sse2_scan;
#else
        case scan_path::avx2:
        case scan_path::sse2:
            return nullptr;
#endif
        case scan_path::scalar:
            return &detail::scalar_scan;
    }
    return nullptr;
}

// The table parsers use. relaxed everywhere: the tables are constant-initialised (constinit)
// before any code runs, so a pointer to one publishes nothing; racing first calls pick the same
// table, and set_scan_path's callers order themselves (scan_path.hpp).
constinit std::atomic<const detail::scan_ops*> active{nullptr};

auto choose() noexcept -> const detail::scan_ops* {
    if (const char* env = std::getenv("WEFT_HTTP_SCAN")) {
        if (auto p = parse_scan_path(env); p && scan_path_supported(*p)) {
            return table(*p);
        }
    }
    for (scan_path p : {scan_path::avx2, scan_path::sse2}) {
        if (scan_path_supported(p)) {
            return table(p);
        }
    }
    return &detail::scalar_scan;
}

}  // namespace

auto detail::active_scan() noexcept -> const scan_ops& {
    const scan_ops* t = active.load(std::memory_order_relaxed);
    if (t == nullptr) [[unlikely]] {
        const scan_ops* chosen = choose();
        // A set_scan_path that raced with this first use wins.
        active.compare_exchange_strong(t, chosen, std::memory_order_relaxed);
        return t != nullptr ? *t : *chosen;
    }
    return *t;
}

auto active_scan_path() noexcept -> scan_path {
    const detail::scan_ops* t = &detail::active_scan();
    for (scan_path p : {scan_path::avx2, scan_path::sse2}) {
        if (t == table(p)) {
            return p;
        }
    }
    return scan_path::scalar;
}

auto scan_path_supported(scan_path p) noexcept -> bool {
    switch (p) {
#if defined(__x86_64__) || defined(__i386__)
        case scan_path::avx2:
            __builtin_cpu_init();
            return __builtin_cpu_supports("avx2") != 0;
        case scan_path::sse2:
            __builtin_cpu_init();
            return __builtin_cpu_supports("sse2") != 0;
#else
        case scan_path::avx2:
        case scan_path::sse2:
            return false;
#endif
        case scan_path::scalar:
            return true;
    }
    return false;
}

auto set_scan_path(scan_path p) noexcept -> bool {
    if (!scan_path_supported(p)) {
        return false;
    }
    active.store(table(p), std::memory_order_relaxed);
    return true;
}

auto to_string(scan_path p) noexcept -> std::string_view {
    switch (p) {
        case scan_path::avx2:
            return "avx2";
        case scan_path::sse2:
            return "sse2";
        case scan_path::scalar:
            return "scalar";
    }
    return "?";
}

auto parse_scan_path(std::string_view name) noexcept -> std::optional<scan_path> {
    for (scan_path p : {scan_path::avx2, scan_path::sse2, scan_path::scalar}) {
        if (name == to_string(p)) {
            return p;
        }
    }
    return std::nullopt;
}

}  // namespace weft::http
