#include "weft/http/parse_error.hpp"

#include <string>

namespace weft::http {

auto status_of(parse_error e) noexcept -> int {
    switch (e) {
        case parse_error::none:
            return 0;
        case parse_error::body_too_large:
            return 413;
        case parse_error::request_line_too_long:
            return 414;
        case parse_error::unsupported_expectation:
            return 417;
        case parse_error::header_block_too_large:
        case parse_error::too_many_fields:
            return 431;
        case parse_error::unsupported_transfer_coding:
            return 501;
        case parse_error::unsupported_version:
            return 505;
        case parse_error::input_shrank:
            return 500;
        default:
            return 400;
    }
}

auto describe(parse_error e) noexcept -> std::string_view {
    switch (e) {
        case parse_error::none:
            return "no error";
        case parse_error::bad_request_line:
            return "malformed request line";
        case parse_error::bad_method:
            return "method is not a token";
        case parse_error::bad_target:
            return "invalid request target";
        case parse_error::bad_version:
            return "malformed HTTP version";
        case parse_error::bare_cr:
            return "CR not followed by LF";
        case parse_error::bare_lf:
            return "LF without CR";
        case parse_error::whitespace_before_first_field:
            return "whitespace before the first header field";
        case parse_error::obs_fold:
            return "obsolete line folding";
        case parse_error::bad_field_name:
            return "invalid header field name";
        case parse_error::whitespace_before_colon:
            return "whitespace between field name and colon";
        case parse_error::bad_field_value:
            return "control character in a header field value";
        case parse_error::missing_host:
            return "missing Host";
        case parse_error::repeated_host:
            return "more than one Host";
        case parse_error::bad_host:
            return "invalid Host";
        case parse_error::bad_content_length:
            return "invalid Content-Length";
        case parse_error::conflicting_content_length:
            return "differing Content-Length values";
        case parse_error::content_length_with_transfer_encoding:
            return "both Content-Length and Transfer-Encoding";
        case parse_error::transfer_encoding_in_http10:
            return "Transfer-Encoding in an HTTP/1.0 request";
        case parse_error::bad_transfer_encoding:
            return "invalid Transfer-Encoding";
        case parse_error::chunked_not_last:
            return "Transfer-Encoding does not end in chunked";
        case parse_error::bad_chunk_size:
            return "invalid chunk size";
        case parse_error::chunk_size_overflow:
            return "chunk size overflows";
        case parse_error::bad_chunk_extension:
            return "invalid chunk extension";
        case parse_error::chunk_extensions_too_large:
            return "chunk extensions too large";
        case parse_error::missing_chunk_crlf:
            return "chunk data not followed by CRLF";
        case parse_error::body_too_large:
            return "body too large";
        case parse_error::request_line_too_long:
            return "request line too long";
        case parse_error::unsupported_expectation:
            return "unsupported expectation";
        case parse_error::header_block_too_large:
            return "header section too large";
        case parse_error::too_many_fields:
            return "too many header fields";
        case parse_error::unsupported_transfer_coding:
            return "unsupported transfer coding";
        case parse_error::unsupported_version:
            return "unsupported HTTP version";
        case parse_error::input_shrank:
            return "input shorter than the bytes already parsed (caller bug)";
    }
    return "unknown error";
}

namespace {

class category final : public std::error_category {
public:
    [[nodiscard]] auto name() const noexcept -> const char* override { return "weft.http"; }
    [[nodiscard]] auto message(int ev) const -> std::string override {
        return std::string{describe(static_cast<parse_error>(ev))};
    }
};

}  // namespace

auto http_category() noexcept -> const std::error_category& {
    static const category c;
    return c;
}

}  // namespace weft::http
