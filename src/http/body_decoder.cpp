#include "weft/http/body_decoder.hpp"

#include <algorithm>

#include "char_class.hpp"

namespace weft::http {

namespace {

using detail::is_ows;
using detail::is_tchar;

[[nodiscard]] auto hex_value(char c) noexcept -> std::uint64_t {
    return c <= '9' ? static_cast<std::uint64_t>(c - '0')
                    : static_cast<std::uint64_t>((c | 0x20) - 'a' + 10);
}

[[nodiscard]] auto step(body_status s,
                        std::size_t consumed = 0,
                        std::string_view data = {},
                        std::string_view value = {}) noexcept -> body_step {
    body_step r;
    r.status = s;
    r.consumed = consumed;
    r.data = data;
    r.value = value;
    return r;
}

}  // namespace

body_decoder::body_decoder(body_framing framing, const request_limits& limits) noexcept
    : body_limit_(limits.body),
      ext_limit_(limits.chunk_extensions),
      block_limit_(std::min(limits.header_block, std::size_t{1} << 30)),
      field_limit_(limits.fields) {
    switch (framing.kind) {
        case body_kind::none:
            state_ = state::done;
            break;
        case body_kind::content_length:
            if (framing.length > limits.body) {
                state_ = state::failed;
                error_ = parse_error::body_too_large;
            } else {
                state_ = state::length;
                remaining_ = framing.length;
            }
            break;
        case body_kind::chunked:
            state_ = state::size;
            break;
    }
}

auto body_decoder::fail(parse_error e) noexcept -> body_step {
    state_ = state::failed;
    error_ = e;
    return step(body_status::error);
}

auto body_decoder::decode(std::string_view input) noexcept -> body_step {
    const char* const base = input.data();
    const char* const end = base + input.size();
    const char* p = base;
    // The trailer line being read starts at `line`: while one is incomplete it is kept
    // unconsumed, so it is the input's first byte, and line_scanned_ of it were examined.
    const char* line = base;
    // While in a trailer line: where the line must end by (the trailer section's size limit)
    // or the input ends; `lend_is_limit` says which. Reaching it unfinished is 431 or
    // need_more, respectively, so the error never depends on how the input was cut.
    const char* lend = end;
    bool lend_is_limit = false;
    const auto start_line = [&] {
        const std::size_t allowed = block_limit_ - trailer_bytes_;  // trailer_bytes_ <= limit
        const auto have = static_cast<std::size_t>(end - line);
        lend_is_limit = allowed <= have;
        lend = line + (lend_is_limit ? allowed : have);
    };
    if (state_ >= state::trailer_name && state_ <= state::trailer_lf) {
        if (input.size() < line_scanned_) {
            // The incomplete trailer line must be given again whole: fewer bytes than were
            // examined of it is a caller bug, reported rather than read past.
            return fail(parse_error::input_shrank);
        }
        p += line_scanned_;
        start_line();
    }
    const auto at = [base](const char* q) { return static_cast<std::size_t>(q - base); };

    for (;;) {
        switch (state_) {
            case state::length: {
                if (remaining_ == 0) {
                    state_ = state::done;
                    return step(body_status::done);
                }
                if (p == end) {
                    return step(body_status::need_more);
                }
                const auto n =
                    static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, input.size()));
                remaining_ -= n;
                received_ += n;
                return step(body_status::data, n, {p, n});
            }
            case state::size:
                while (p != end && detail::is_hex(*p)) {
                    if ((size_ >> 60) != 0) {
                        return fail(parse_error::chunk_size_overflow);
                    }
                    size_ = size_ << 4 | hex_value(*p);
                    digits_ = 1;
                    ++p;
                }
                if (p == end) {
                    goto out;
                }
                if (digits_ == 0) {
                    return fail(*p == '\n' ? parse_error::bare_lf : parse_error::bad_chunk_size);
                }
                // Decided from the size, before any of the chunk's data (sizes_ <= body_limit_).
                if (size_ > body_limit_ - sizes_) {
                    return fail(parse_error::body_too_large);
                }
                sizes_ += size_;
                if (*p == '\r') {
                    ++p;
                    state_ = state::size_lf;
                    continue;
                }
                if (*p == ';') {
                    state_ = state::ext_end;  // the ';' is read as an extension byte below
                    continue;
                }
                if (is_ows(*p)) {
                    state_ = state::ext_bws;
                    continue;
                }
                return fail(*p == '\n' ? parse_error::bare_lf : parse_error::bad_chunk_size);
            case state::ext_bws:
            case state::ext_name_start:
            case state::ext_name:
            case state::ext_after_name:
            case state::ext_value_start:
            case state::ext_token:
            case state::ext_quoted:
            case state::ext_escape:
            case state::ext_end:
                // chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] ), RFC 9112 7.1.1;
                // ext-val = token / quoted-string. Byte by byte: extensions are rare and short.
                while (p != end && state_ != state::size_lf) {
                    if (++ext_bytes_ > ext_limit_) {
                        return fail(parse_error::chunk_extensions_too_large);
                    }
                    const char c = *p++;
                    bool ok = true;
                    switch (state_) {
                        case state::ext_bws:
                            ok = is_ows(c) || c == ';';
                            if (c == ';') {
                                state_ = state::ext_name_start;
                            }
                            break;
                        case state::ext_name_start:
                            ok = is_ows(c) || is_tchar(c);
                            if (is_tchar(c)) {
                                state_ = state::ext_name;
                            }
                            break;
                        case state::ext_name:
                            if (c == '=') {
                                state_ = state::ext_value_start;
                            } else if (is_ows(c)) {
                                state_ = state::ext_after_name;
                            } else if (c == ';') {
                                state_ = state::ext_name_start;
                            } else if (c == '\r') {
                                state_ = state::size_lf;
                            } else {
                                ok = is_tchar(c);
                            }
                            break;
                        case state::ext_after_name:
                            if (c == '=') {
                                state_ = state::ext_value_start;
                            } else if (c == ';') {
                                state_ = state::ext_name_start;
                            } else {
                                ok = is_ows(c);
                            }
                            break;
                        case state::ext_value_start:
                            if (c == '"') {
                                state_ = state::ext_quoted;
                            } else if (is_tchar(c)) {
                                state_ = state::ext_token;
                            } else {
                                ok = is_ows(c);
                            }
                            break;
                        case state::ext_quoted:
                            if (c == '"') {
                                state_ = state::ext_end;
                            } else if (c == '\\') {
                                state_ = state::ext_escape;
                            } else {
                                ok = detail::has(c, detail::qdtext_bit);
                            }
                            break;
                        case state::ext_escape:
                            ok = detail::has(c, detail::value_bit);
                            state_ = state::ext_quoted;
                            break;
                        case state::ext_token:
                            if (is_tchar(c)) {
                                break;
                            }
                            [[fallthrough]];
                        default:  // ext_end
                            if (c == ';') {
                                state_ = state::ext_name_start;
                            } else if (is_ows(c)) {
                                state_ = state::ext_bws;
                            } else if (c == '\r') {
                                state_ = state::size_lf;
                            } else {
                                ok = false;
                            }
                            break;
                    }
                    if (!ok) {
                        return fail(c == '\n' ? parse_error::bare_lf
                                              : parse_error::bad_chunk_extension);
                    }
                }
                if (p == end && state_ != state::size_lf) {
                    goto out;
                }
                continue;
            case state::size_lf:
                if (p == end) {
                    goto out;
                }
                if (*p != '\n') {
                    return fail(parse_error::bare_cr);
                }
                ++p;
                if (size_ == 0) {
                    state_ = state::trailer;
                } else {
                    remaining_ = size_;
                    state_ = state::data;
                }
                continue;
            case state::data: {
                if (p == end) {
                    goto out;
                }
                const auto n = static_cast<std::size_t>(
                    std::min<std::uint64_t>(remaining_, static_cast<std::size_t>(end - p)));
                const std::string_view d{p, n};
                p += n;
                remaining_ -= n;
                received_ += n;
                if (remaining_ == 0) {
                    state_ = state::data_cr;
                }
                return step(body_status::data, at(p), d);
            }
            case state::data_cr:
                if (p == end) {
                    goto out;
                }
                if (*p != '\r') {
                    return fail(parse_error::missing_chunk_crlf);
                }
                ++p;
                state_ = state::data_lf;
                continue;
            case state::data_lf:
                if (p == end) {
                    goto out;
                }
                if (*p != '\n') {
                    return fail(parse_error::missing_chunk_crlf);
                }
                ++p;
                size_ = 0;
                digits_ = 0;
                state_ = state::size;
                continue;
            case state::trailer:
                line = p;
                line_scanned_ = 0;
                if (p == end) {
                    goto out;
                }
                start_line();
                if (*p == '\r') {
                    ++p;
                    state_ = state::end_lf;
                    continue;
                }
                if (!is_tchar(*p)) {
                    if (is_ows(*p)) {
                        return fail(trailer_fields_ == 0
                                        ? parse_error::whitespace_before_first_field
                                        : parse_error::obs_fold);
                    }
                    return fail(*p == '\n' ? parse_error::bare_lf : parse_error::bad_field_name);
                }
                state_ = state::trailer_name;
                [[fallthrough]];
            case state::trailer_name:
                while (p != lend && is_tchar(*p)) {
                    ++p;
                }
                if (p == lend) {
                    goto line_out;
                }
                if (*p != ':') {
                    return fail(is_ows(*p)   ? parse_error::whitespace_before_colon
                                : *p == '\n' ? parse_error::bare_lf
                                             : parse_error::bad_field_name);
                }
                colon_ = static_cast<std::uint32_t>(p - line);
                ++p;
                state_ = state::trailer_ows;
                [[fallthrough]];
            case state::trailer_ows:
                while (p != lend && is_ows(*p)) {
                    ++p;
                }
                if (p == lend) {
                    goto line_out;
                }
                vstart_ = static_cast<std::uint32_t>(p - line);
                state_ = state::trailer_value;
                [[fallthrough]];
            case state::trailer_value:
                while (p != lend && detail::has(*p, detail::value_bit)) {
                    ++p;
                }
                if (p == lend) {
                    goto line_out;
                }
                if (*p != '\r') {
                    return fail(*p == '\n' ? parse_error::bare_lf : parse_error::bad_field_value);
                }
                ++p;
                state_ = state::trailer_lf;
                [[fallthrough]];
            case state::trailer_lf: {
                if (p == lend) {
                    goto line_out;
                }
                if (*p != '\n') {
                    return fail(parse_error::bare_cr);
                }
                ++p;
                trailer_bytes_ += static_cast<std::size_t>(p - line);  // p <= lend: within
                if (++trailer_fields_ > field_limit_) {
                    return fail(parse_error::too_many_fields);
                }
                auto vend = static_cast<std::uint32_t>(p - line) - 2;
                while (vend > vstart_ && is_ows(line[vend - 1])) {
                    --vend;
                }
                line_scanned_ = 0;
                state_ = state::trailer;
                return step(body_status::trailer, at(p), {line, colon_},
                            {line + vstart_, vend - vstart_});
            }
            case state::end_lf:
                if (p == end) {
                    goto out;
                }
                if (*p != '\n') {
                    return fail(parse_error::bare_cr);
                }
                ++p;
                state_ = state::done;
                return step(body_status::done, at(p));
            case state::done:
                return step(body_status::done, at(p));
            case state::failed:
                return step(body_status::error);
        }
    }
line_out:
    if (lend_is_limit) {
        return fail(parse_error::header_block_too_large);
    }
    line_scanned_ = static_cast<std::uint32_t>(p - line);
    return step(body_status::need_more, at(line));
out:
    return step(body_status::need_more, at(p));
}

}  // namespace weft::http
