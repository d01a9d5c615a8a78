#pragma once

// Drives request_parser and body_decoder alone over a byte stream cut into pieces: the pieces
// are appended to one buffer (which may move as it grows), every complete request and its body
// are taken out in order (pipelining), and consumed bytes are dropped from the front. What it
// saw is recorded by value, so two runs over the same bytes cut differently can be compared:
// the parser's incremental contract, for the parser's tests. It is not the server's buffer
// code; test_connection_splits.cpp and fuzz_server_splits.cpp drive that one itself.

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/http/body_decoder.hpp"
#include "weft/http/request_parser.hpp"

namespace weft::http::test {

struct request_record {
    std::string method;
    std::string target;
    std::string path;
    std::string query;
    std::string authority;
    int version_minor = 0;
    bool keep_alive = false;
    bool expect_continue = false;
    body_kind framing = body_kind::none;
    std::vector<std::pair<std::string, std::string>> fields;
    std::string body;
    std::vector<std::pair<std::string, std::string>> trailers;

    auto operator==(const request_record&) const -> bool = default;
};

struct connection_record {
    std::vector<request_record> requests;   ///< complete requests, head and body
    parse_error error = parse_error::none;  ///< what stopped the connection, if anything
    bool partial = false;                   ///< the input ended inside a request

    [[nodiscard]] auto status() const -> int { return status_of(error); }
    /// Whether the server closes after what it received.
    [[nodiscard]] auto closes() const -> bool {
        return error != parse_error::none || (!requests.empty() && !requests.back().keep_alive);
    }
    auto operator==(const connection_record&) const -> bool = default;
};

[[nodiscard]] inline auto record_head(const request_head& h) -> request_record {
    request_record r;
    r.method = h.method_name();
    r.target = h.target();
    r.path = h.path();
    r.query = h.query();
    r.authority = h.authority();
    r.version_minor = h.version_minor();
    r.keep_alive = h.keep_alive();
    r.expect_continue = h.expect_continue();
    r.framing = h.framing().kind;
    for (header_field f : h.fields()) {
        r.fields.emplace_back(f.name, f.value);
    }
    return r;
}

/// Feeds `input` cut at the offsets in `cuts` (ascending, each in 1..size-1).
[[nodiscard]] inline auto run_connection(std::string_view input,
                                         const std::vector<std::size_t>& cuts,
                                         const request_limits& limits = {}) -> connection_record {
    connection_record out;
    request_parser parser{limits};
    std::optional<body_decoder> body;
    request_record current;
    std::string buf;  // unconsumed bytes; buf[0] is the current request's first byte
    bool stopped = false;

    const auto process = [&] {
        for (;;) {
            if (!body) {
                const parse_status st = parser.parse(buf);
                if (st == parse_status::incomplete) {
                    return;
                }
                if (st == parse_status::error) {
                    out.error = parser.error();
                    stopped = true;
                    return;
                }
                current = record_head(parser.head());
                buf.erase(0, parser.head().size());
                body.emplace(parser.head().framing(), limits);
            }
            const body_step s = body->decode(buf);
            switch (s.status) {
                case body_status::data:
                    current.body.append(s.data);
                    break;
                case body_status::trailer:
                    current.trailers.emplace_back(s.data, s.value);
                    break;
                case body_status::done:
                    out.requests.push_back(std::move(current));
                    current = {};
                    body.reset();
                    parser.reset();
                    break;
                case body_status::error:
                    out.error = body->error();
                    stopped = true;
                    return;
                case body_status::need_more:
                    buf.erase(0, s.consumed);
                    return;
            }
            buf.erase(0, s.consumed);
        }
    };

    std::size_t from = 0;
    for (std::size_t i = 0; i <= cuts.size() && !stopped; ++i) {
        const std::size_t to = i < cuts.size() ? cuts[i] : input.size();
        buf.append(input.substr(from, to - from));
        from = to;
        process();
    }
    if (!stopped) {
        out.partial = body.has_value() || !buf.empty();
    }
    return out;
}

}  // namespace weft::http::test
