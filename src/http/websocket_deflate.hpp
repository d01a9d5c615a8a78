#pragma once

// permessage-deflate (RFC 7692) for weft::http::websocket: the negotiation of its four
// parameters and the zlib streams that compress and inflate messages. Internal to weft::http.
//
// A compressed message is the raw deflate stream of its payload flushed with Z_SYNC_FLUSH, the
// flush's empty stored block tail 0x00 0x00 0xff 0xff removed (RFC 7692 7.2.1); the receiver
// appends that tail again before it inflates (7.2.2).

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "weft/http/websocket.hpp"

namespace weft::http::detail {

/// The parameters of one permessage-deflate offer or response, as written.
struct deflate_params {
    bool server_no_context_takeover = false;
    bool client_no_context_takeover = false;
    std::optional<int> server_max_window_bits{};
    bool client_max_window_bits = false;  // present (with or without a value)
    std::optional<int> client_max_window_bits_value{};
};

enum class deflate_parse : std::uint8_t {
    ok,               // a permessage-deflate element, every parameter valid
    other_extension,  // another extension's element
    invalid,          // permessage-deflate with an unknown, repeated or ill-valued parameter
};

/// Parses one element of a Sec-WebSocket-Extensions list ("permessage-deflate; p; p=v").
/// RFC 7692 7: a server declines an invalid offer, a client fails on an invalid response.
[[nodiscard]] auto parse_deflate(std::string_view element, deflate_params& out) -> deflate_parse;

/// What one side of a connection uses, once agreed.
struct deflate_agreement {
    bool send_takeover = false;
    bool receive_takeover = false;
    int send_bits = 15;     // our compressor's window, 9..15
    int receive_bits = 15;  // the peer's largest window, 8..15
    int mem_level = 8;
};

/// Server: the answer (a Sec-WebSocket-Extensions value) to the first acceptable
/// permessage-deflate offer in `offers` (every field value joined with ", "); nullopt when none
/// is (invalid ones and other extensions are declined, never fatal).
[[nodiscard]] auto answer_deflate_offers(const websocket_deflate_options& o,
                                         std::string_view offers) -> std::optional<std::string>;

/// Server: what an answer made by answer_deflate_offers() agreed to.
[[nodiscard]] auto server_agreement(const websocket_deflate_options& o, std::string_view answer)
    -> deflate_agreement;

/// Client: the offer to send.
[[nodiscard]] auto deflate_offer(const websocket_deflate_options& o) -> std::string;

/// Client: what the server's Sec-WebSocket-Extensions `answer` to our offer agreed to; nullopt
/// when the answer is not one valid permessage-deflate response to it (the client then fails
/// the connection, RFC 6455 4.1 and RFC 7692 7).
[[nodiscard]] auto client_agreement(const websocket_deflate_options& o, std::string_view answer)
    -> std::optional<deflate_agreement>;

/// The compressor and the decompressor of one connection. Without context takeover a direction
/// uses zlib state of the calling thread, reset after each message: compress() and
/// decompress() run to their end without suspending, so no other message can interleave. With
/// takeover the direction owns its state, created by its first message.
/// Not thread-safe: compress() is called under the connection's write lock, decompress() by
/// its one reader.
class ws_deflate {
public:
    explicit ws_deflate(const deflate_agreement& a) noexcept;
    ws_deflate(const ws_deflate&) = delete;
    auto operator=(const ws_deflate&) -> ws_deflate& = delete;
    ~ws_deflate();

    /// Replaces `out` with the payload of the compressed message `in`. Throws std::bad_alloc
    /// when zlib cannot allocate its state.
    void compress(std::string_view in, std::string& out);

    enum class status : std::uint8_t {
        ok,
        too_big,  // the message inflates past the limit: inflating stopped there
        bad,      // not a deflate stream (or one past the agreed window)
    };
    /// Replaces `out` with the message whose compressed payload is `in`, inflating at most
    /// limit + 1 bytes.
    [[nodiscard]] auto decompress(std::string_view in, std::string& out, std::size_t limit)
        -> status;

    struct zstate;
    struct zstate_free {
        void operator()(zstate* z) const noexcept;
    };

private:
    deflate_agreement a_;
    std::unique_ptr<zstate, zstate_free> tx_;  // with send takeover
    std::unique_ptr<zstate, zstate_free> rx_;  // with receive takeover
};

}  // namespace weft::http::detail
