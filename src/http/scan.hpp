#pragma once

// The parser's byte scanners, one table of functions per scan_path. Each returns the first
// byte in [p, end) that the parser must look at (or `end`): everything before it is known to be
// ordinary, so the parser skips it in one step and never looks at it again.

namespace weft::http::detail {

struct scan_ops {
    /// The first byte that ends or breaks a request-target: outside 0x21..0x7E (SP, CR, LF,
    /// controls, DEL, non-ASCII), or '?' or '#' (the parser splits the query and rejects
    /// fragments there).
    const char* (*target_stop)(const char* p, const char* end) noexcept;
    /// The first byte that ends or breaks a field value: a control byte other than HT
    /// (0x00..0x08, 0x0A..0x1F, 0x7F). Bytes 0x80..0xFF are obs-text, allowed in values.
    const char* (*value_stop)(const char* p, const char* end) noexcept;
};

extern const scan_ops scalar_scan;
#if defined(__x86_64__) || defined(__i386__)
extern const scan_ops sse2_scan;
extern const scan_ops avx2_scan;
#endif

/// The table in use: chosen at the first call (CPU and WEFT_HTTP_SCAN), set_scan_path after.
[[nodiscard]] auto active_scan() noexcept -> const scan_ops&;

}  // namespace weft::http::detail
