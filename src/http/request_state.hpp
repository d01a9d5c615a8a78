#pragma once

// What a connection holds only while it serves a request, and the per-thread pool that reuses
// it. Internal to weft::http.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "output_buffer.hpp"
#include "weft/http/body_decoder.hpp"
#include "weft/http/request_limits.hpp"
#include "weft/http/request_parser.hpp"
#include "weft/http/response.hpp"
#include "weft/io/bytes.hpp"
#include "weft/sched/runtime_clock.hpp"

namespace weft::http::detail {

/// The waiting a body read or a response write has done on its client, against
/// server_options::min_rate: `waited` <= min_rate_grace + `bytes` / min_rate must hold.
struct transfer_pace {
    std::chrono::nanoseconds waited{0};
    std::uint64_t bytes = 0;
};

/// A piece of the pending output: [off, off + len) of request_state::out when `ptr` is null,
/// else `len` bytes at `ptr` (a large body, sent from where it is).
struct out_segment {
    const char* ptr;
    std::size_t off;
    std::size_t len;
};

/// What a connection needs only while it holds bytes of a request: the parser (its head keeps
/// request_head::inline_fields fields inline), the body decoder, the carry buffers of a request
/// that spans receives and the output waiting for one vectored write. A connection takes one
/// when a request's first bytes arrive and gives it back when it goes idle (nothing received
/// and unanswered, nothing left to write), so an idle connection holds none, nor the request's
/// deadlines and held-apart head kept here. They are kept per thread for reuse
/// (take_request_state / give_back_request_state): no allocation per request.
struct request_state {
    explicit request_state(const request_limits& limits) noexcept : parser(limits) {}

    request_parser parser;
    body_decoder body;
    request_limits body_limits;
    // The bytes of a request that spans receives: one gathers them; the other holds, untouched,
    // the head of a request whose body is being gathered (see connection's input).
    std::string carry[2];
    output_buffer out;  // response heads and small bodies, in order
    std::vector<out_segment> segs;
    std::vector<response> held;  // responses whose bodies segs points into
    // The block of a head whose body is gathered apart (see the connection's input).
    bytes head_block;
    transfer_pace body_pace;                      // of the current request's body
    runtime_clock::time_point header_deadline{};  // the current request's head is due by then
};

/// A request_state from this thread's pool (or a new one when it is empty), its parser reset
/// to `limits`.
///
/// NOTE: both are ordinary functions, never inlined into a coroutine: one that may have moved
/// threads since it last looked must compute the pool's thread_local address here, never cache
/// it in its frame (as this_thread_frame_lists() is).
[[gnu::noinline]] auto take_request_state(const request_limits& limits) -> request_state*;

/// Empties `p` (large buffers are released) and keeps it in this thread's pool, or frees it
/// when the pool is full. A state taken on one thread may be given back on another.
[[gnu::noinline]] void give_back_request_state(request_state* p) noexcept;

}  // namespace weft::http::detail
