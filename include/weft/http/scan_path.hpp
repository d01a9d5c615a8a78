#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace weft::http {

/// The instruction set the request parser scans with. The widest the CPU has is chosen once,
/// at the first parse; the environment variable `WEFT_HTTP_SCAN=avx2|sse2|scalar` (read at that
/// moment) forces one, so that tests and benchmarks can run each. Every path gives the same
/// results: they differ only in how many bytes one step looks at (32, 16, or 8 with SWAR).
/// The library is built without -mavx2: the AVX2 functions carry a target attribute and are
/// only called where the CPU reports AVX2.
enum class scan_path : std::uint8_t {
    avx2,
    sse2,
    scalar,  ///< portable: 8 bytes at a time in a 64-bit word (SWAR), then byte by byte
};

/// The path parsers use now.
[[nodiscard]] auto active_scan_path() noexcept -> scan_path;

/// Whether this CPU (and this build: avx2 and sse2 exist only on x86) can run `p`.
[[nodiscard]] auto scan_path_supported(scan_path p) noexcept -> bool;

/// Makes every parse that starts from now on use `p`; false (and nothing changes) when `p`
/// is not supported. For tests and benchmarks: call it while no other thread is parsing if the
/// results must come from one path (a parse already running may finish on the old one).
auto set_scan_path(scan_path p) noexcept -> bool;

/// "avx2", "sse2" or "scalar".
[[nodiscard]] auto to_string(scan_path p) noexcept -> std::string_view;

/// The inverse of to_string (the values WEFT_HTTP_SCAN accepts); nullopt for anything else.
[[nodiscard]] auto parse_scan_path(std::string_view name) noexcept -> std::optional<scan_path>;

}  // namespace weft::http
