#pragma once

// An HTTP/2 client for tests, at the level of frames: it writes whatever frames a test builds
// (well-formed or hostile), encodes header blocks with nghttp2's HPACK deflater (or takes
// hand-made ones) and reads the server's frames one at a time, decoding header blocks with
// nghttp2's inflater. Over a tcp_stream or a tls_stream (anything with receive and write_all).

#include <nghttp2/nghttp2.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/bytes.hpp"
#include "weft/io/error.hpp"
#include "weft/sched/timer.hpp"

namespace weft::http::test {

using header_list = std::vector<std::pair<std::string, std::string>>;

struct h2_frame {
    std::uint8_t type = 0;
    std::uint8_t flags = 0;
    std::int32_t stream = 0;
    std::string payload;
};

// Frame types and flags (RFC 9113 6).
constexpr std::uint8_t f_data = 0, f_headers = 1, f_rst = 3, f_settings = 4, f_ping = 6,
                       f_goaway = 7, f_window_update = 8, f_continuation = 9;
constexpr std::uint8_t end_stream = 0x1, end_headers = 0x4, ack = 0x1;

inline auto u32(std::uint32_t v) -> std::string {
    return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
            static_cast<char>(v)};
}
inline auto get_u32(std::string_view p, std::size_t at = 0) -> std::uint32_t {
    return (std::uint32_t{static_cast<std::uint8_t>(p[at])} << 24) |
           (std::uint32_t{static_cast<std::uint8_t>(p[at + 1])} << 16) |
           (std::uint32_t{static_cast<std::uint8_t>(p[at + 2])} << 8) |
           std::uint32_t{static_cast<std::uint8_t>(p[at + 3])};
}

/// One frame's bytes.
inline auto frame(std::uint8_t type, std::uint8_t flags, std::int32_t stream, std::string_view p)
    -> std::string {
    std::string f;
    f.reserve(9 + p.size());
    f += static_cast<char>(p.size() >> 16);
    f += static_cast<char>(p.size() >> 8);
    f += static_cast<char>(p.size());
    f += static_cast<char>(type);
    f += static_cast<char>(flags);
    f += u32(static_cast<std::uint32_t>(stream) & 0x7fffffffU);
    f.append(p);
    return f;
}

inline auto settings(std::vector<std::pair<std::uint16_t, std::uint32_t>> entries = {})
    -> std::string {
    std::string p;
    for (auto [id, v] : entries) {
        p += static_cast<char>(id >> 8);
        p += static_cast<char>(id);
        p += u32(v);
    }
    return frame(f_settings, 0, 0, p);
}

inline auto window_update(std::int32_t stream, std::uint32_t n) -> std::string {
    return frame(f_window_update, 0, stream, u32(n));
}

inline auto rst_stream(std::int32_t stream, std::uint32_t code) -> std::string {
    return frame(f_rst, 0, stream, u32(code));
}

constexpr std::string_view client_preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

template <typename Stream>
class h2_peer {
public:
    explicit h2_peer(Stream& s) : s_(s) {
        (void)nghttp2_hd_deflate_new(&deflater_, 4096);
        (void)nghttp2_hd_inflate_new(&inflater_);
    }
    h2_peer(const h2_peer&) = delete;
    auto operator=(const h2_peer&) -> h2_peer& = delete;
    ~h2_peer() {
        nghttp2_hd_deflate_del(deflater_);
        nghttp2_hd_inflate_del(inflater_);
    }

    /// The HPACK block of a request for `path` (plus `extra` fields).
    auto request_block(std::string_view method,
                       std::string_view path,
                       const header_list& extra = {}) -> std::string {
        header_list h = {{":method", std::string{method}},
                         {":scheme", "http"},
                         {":authority", "localhost"},
                         {":path", std::string{path}}};
        h.insert(h.end(), extra.begin(), extra.end());
        std::vector<nghttp2_nv> nv;
        for (auto& [n, v] : h) {
            nv.push_back({reinterpret_cast<std::uint8_t*>(n.data()),
                          reinterpret_cast<std::uint8_t*>(v.data()), n.size(), v.size(),
                          NGHTTP2_NV_FLAG_NONE});
        }
        std::string out(nghttp2_hd_deflate_bound(deflater_, nv.data(), nv.size()), '\0');
        const auto n = nghttp2_hd_deflate_hd(deflater_, reinterpret_cast<std::uint8_t*>(out.data()),
                                             out.size(), nv.data(), nv.size());
        out.resize(n < 0 ? 0 : static_cast<std::size_t>(n));
        return out;
    }

    /// Preface and SETTINGS (`entries`).
    auto start(std::vector<std::pair<std::uint16_t, std::uint32_t>> entries = {})
        -> task<result<void>> {
        co_return co_await send(std::string{client_preface} + settings(std::move(entries)));
    }

    /// Reads until the server's SETTINGS has arrived and is acknowledged. A test that then
    /// writes from one task while another reads must call it first: the reader's ack is a
    /// write of its own, and one between a HEADERS frame and its CONTINUATION frames is a
    /// PROTOCOL_ERROR (RFC 9113 section 6.10).
    auto settle() -> task<result<void>> {
        for (;;) {
            auto f = co_await read_frame();
            if (!f) {
                co_return f.error();
            }
            if (auto r = co_await on_frame(*f); !r) {
                co_return r;
            }
            if (f->type == f_settings && (f->flags & ack) == 0) {
                co_return result<void>{};
            }
        }
    }

    auto send(std::string_view bytes) -> task<result<void>> {
        co_return co_await s_.write_all(std::span<const std::byte>{
            reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()});
    }

    /// A GET (or `method` with `body`) on `stream`.
    auto send_request(std::int32_t stream,
                      std::string_view method,
                      std::string_view path,
                      std::string_view body = {}) -> task<result<void>> {
        const std::string block = request_block(method, path);
        std::string out =
            frame(f_headers, end_headers | (body.empty() ? end_stream : 0), stream, block);
        co_return co_await send(out);
    }

    /// The next frame; an error when the server closed (eof, reset) or after `timeout`.
    auto read_frame(std::chrono::milliseconds timeout = std::chrono::seconds{10})
        -> task<result<h2_frame>> {
        while (in_.size() < 9 || in_.size() < 9 + frame_len()) {
            auto got = co_await with_timeout(timeout, s_.receive());
            if (!got) {
                co_return got.error();
            }
            if (!*got) {
                co_return got->error();
            }
            in_.append(reinterpret_cast<const char*>((*got)->data()), (*got)->size());
        }
        h2_frame f;
        const std::size_t len = frame_len();
        f.type = static_cast<std::uint8_t>(in_[3]);
        f.flags = static_cast<std::uint8_t>(in_[4]);
        f.stream = static_cast<std::int32_t>(get_u32(in_, 5) & 0x7fffffffU);
        f.payload = in_.substr(9, len);
        in_.erase(0, 9 + len);
        co_return f;
    }

    /// Decodes a response header block (in order; fields appended to `out`).
    auto decode(std::string_view block, header_list& out) -> bool {
        auto* p = reinterpret_cast<const std::uint8_t*>(block.data());
        std::size_t left = block.size();
        for (;;) {
            nghttp2_nv nv;
            int flags = 0;
            const auto n = nghttp2_hd_inflate_hd2(inflater_, &nv, &flags, p, left, 1);
            if (n < 0) {
                return false;
            }
            p += n;
            left -= static_cast<std::size_t>(n);
            if ((flags & NGHTTP2_HD_INFLATE_EMIT) != 0) {
                out.emplace_back(std::string{reinterpret_cast<char*>(nv.name), nv.namelen},
                                 std::string{reinterpret_cast<char*>(nv.value), nv.valuelen});
            }
            if ((flags & NGHTTP2_HD_INFLATE_FINAL) != 0) {
                nghttp2_hd_inflate_end_headers(inflater_);
                return true;
            }
            if (n == 0 && left == 0) {
                return true;
            }
        }
    }

    struct response {
        int status = 0;
        header_list fields;
        std::string body;
        std::uint32_t reset = UINT32_MAX;  ///< RST_STREAM's code, if the stream was reset
    };

    /// Reads frames until `stream` ends (or is reset), answering SETTINGS and opening the
    /// windows as the body arrives. Frames of other streams are kept for later calls.
    auto read_response(std::int32_t stream) -> task<result<response>> {
        if (auto it = done_.find(stream); it != done_.end()) {
            response r = std::move(it->second);
            done_.erase(it);
            co_return r;
        }
        for (;;) {
            auto f = co_await read_frame();
            if (!f) {
                co_return f.error();
            }
            const auto ended = co_await on_frame(*f);
            if (!ended) {
                co_return ended.error();
            }
            if (auto it = done_.find(stream); it != done_.end()) {
                response r = std::move(it->second);
                done_.erase(it);
                co_return r;
            }
        }
    }

    /// Handles one frame of the server (see read_response).
    auto on_frame(const h2_frame& f) -> task<result<void>> {
        if (f.type == f_settings && (f.flags & ack) == 0) {
            co_return co_await send(frame(f_settings, ack, 0, ""));
        }
        if (f.type == f_goaway) {
            goaway_code = get_u32(f.payload, 4);
            goaway_last = static_cast<std::int32_t>(get_u32(f.payload) & 0x7fffffffU);
            co_return result<void>{};
        }
        if (f.stream == 0) {
            co_return result<void>{};
        }
        response& r = partial_[f.stream];
        bool ended = false;
        if (f.type == f_headers) {
            std::string_view block = f.payload;
            std::size_t pad = 0;
            if ((f.flags & 0x8) != 0) {
                pad = static_cast<std::uint8_t>(block[0]);
                block.remove_prefix(1);
            }
            if ((f.flags & 0x20) != 0) {
                block.remove_prefix(5);
            }
            block.remove_suffix(pad);
            header_list h;
            if (!decode(block, h)) {
                co_return make_error_code(std::errc::protocol_error);
            }
            for (auto& [n, v] : h) {
                if (n == ":status") {
                    r.status = std::stoi(v);
                } else {
                    r.fields.emplace_back(n, v);
                }
            }
            ended = (f.flags & end_stream) != 0;
        } else if (f.type == f_data) {
            r.body += f.payload;
            ended = (f.flags & end_stream) != 0;
            if (!f.payload.empty()) {
                const auto n = static_cast<std::uint32_t>(f.payload.size());
                auto w = co_await send(window_update(0, n) + window_update(f.stream, n));
                if (!w) {
                    co_return w.error();
                }
            }
        } else if (f.type == f_rst) {
            r.reset = get_u32(f.payload);
            ended = true;
        }
        if (ended) {
            done_[f.stream] = std::move(r);
            partial_.erase(f.stream);
        }
        co_return result<void>{};
    }

    /// Reads until the server closes the connection (handling frames as read_response does):
    /// true once it has, false when it is still open after `timeout`.
    auto read_until_close(std::chrono::milliseconds timeout = std::chrono::seconds{20})
        -> task<bool> {
        for (;;) {
            auto f = co_await read_frame(timeout);
            if (!f) {
                co_return f.error() != std::errc::timed_out;
            }
            (void)co_await on_frame(*f);
        }
    }

    std::uint32_t goaway_code = UINT32_MAX;  ///< the last GOAWAY's code, if any
    std::int32_t goaway_last = -1;           ///< and its last stream id

private:
    auto frame_len() const -> std::size_t {
        return (std::size_t{static_cast<std::uint8_t>(in_[0])} << 16) |
               (std::size_t{static_cast<std::uint8_t>(in_[1])} << 8) |
               std::size_t{static_cast<std::uint8_t>(in_[2])};
    }

    Stream& s_;
    std::string in_;
    nghttp2_hd_deflater* deflater_ = nullptr;
    nghttp2_hd_inflater* inflater_ = nullptr;
    std::map<std::int32_t, response> partial_;
    std::map<std::int32_t, response> done_;
};

}  // namespace weft::http::test
