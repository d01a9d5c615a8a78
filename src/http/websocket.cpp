#include "weft/http/websocket.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

#include "server_state.hpp"
#include "transport.hpp"
#include "websocket_deflate.hpp"
#include "websocket_frame.hpp"
#include "websocket_route.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/tcp_stream.hpp"
#include "weft/sched/runtime_clock.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sync/event.hpp"
#include "weft/sync/mutex.hpp"
#include "weft/tls/tls_byte_stream.hpp"
#include "weft/tls/tls_stream.hpp"

// NOTE: as in connection.cpp, every co_await is a statement of its own, never inside a
// condition (g++ 12 loses the value of a co_await in an `if` condition).

namespace weft::http {

namespace {

class websocket_category_impl final : public std::error_category {
public:
    [[nodiscard]] auto name() const noexcept -> const char* override { return "weft.websocket"; }
    [[nodiscard]] auto message(int c) const -> std::string override {
        switch (static_cast<websocket_errc>(c)) {
            case websocket_errc::closed:
                return "the WebSocket connection is closed";
            case websocket_errc::protocol_error:
                return "the WebSocket peer broke the protocol";
            case websocket_errc::handshake_failed:
                return "the WebSocket handshake failed";
        }
        return "unknown WebSocket error";
    }
};

auto as_bytes(std::string_view s) -> std::span<const std::byte> {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

auto base64(const unsigned char* p, std::size_t n) -> std::string {
    std::string out(4 * ((n + 2) / 3), '\0');
    const int len =
        EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), p, static_cast<int>(n));
    out.resize(static_cast<std::size_t>(len));
    return out;
}

// Sec-WebSocket-Accept for `key` (RFC 6455 4.2.2): base64(SHA-1(key + the protocol's GUID)).
auto accept_key(std::string_view key) -> std::string {
    std::string s{key};
    s += "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_Digest(s.data(), s.size(), md, &len, EVP_sha1(), nullptr) != 1) {
        throw std::runtime_error("weft::http::websocket: SHA-1 unavailable");
    }
    return base64(md, len);
}

// Bytes from OpenSSL's CSPRNG: masking keys must be unpredictable to the page's script (RFC
// 6455 10.3), or a crafted payload could poison an intermediary's cache.
void random_bytes(unsigned char* p, std::size_t n) {
    if (RAND_bytes(p, static_cast<int>(n)) != 1) {
        throw std::runtime_error("weft::http::websocket: no random bytes");
    }
}

auto lower(std::string_view s) -> std::string {
    std::string out{s};
    for (char& c : out) {
        if (c >= 'A' && c <= 'Z') {
            c = static_cast<char>(c - 'A' + 'a');
        }
    }
    return out;
}

auto trim(std::string_view s) -> std::string_view {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

// Calls fn(token) for each comma-separated token of `list`, trimmed; stops when fn is true.
template <typename Fn>
auto any_token(std::string_view list, Fn fn) -> bool {
    while (!list.empty()) {
        const auto comma = list.find(',');
        const auto tok = trim(list.substr(0, comma));
        if (!tok.empty() && fn(tok)) {
            return true;
        }
        if (comma == std::string_view::npos) {
            break;
        }
        list.remove_prefix(comma + 1);
    }
    return false;
}

auto has_token(std::string_view list, std::string_view token) -> bool {
    return any_token(list, [&](std::string_view t) { return lower(t) == token; });
}

// A close code a peer may send (RFC 6455 7.4): the defined ones but 1004-1006 and 1015
// (reserved for reporting, never on the wire), and 3000-4999 (registered and private).
auto valid_close_code(std::uint16_t c) -> bool {
    return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014) || (c >= 3000 && c <= 4999);
}

// The runtime's clock, which the keepalive's sleeps follow: on a test clock the silence it
// measures is test time too.
auto now_ns() -> std::int64_t {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               runtime_clock::now().time_since_epoch())
        .count();
}

}  // namespace

auto websocket_category() noexcept -> const std::error_category& {
    static const websocket_category_impl c;
    return c;
}

/// The state of one connection, server or client side.
///
/// Reader side (receive(), the close wait): in_, in_pos_, the message being assembled; one
/// task at a time. Writer side: write_mu serialises whole frames, from any task. The flags
/// that both sides read are atomics: close_sent (set under write_mu, so no frame follows our
/// close), failed (the connection is done: set by either side, read by both), last_rx (the
/// keepalive task reads what the reader stores; relaxed: a time, it publishes nothing else).
struct websocket::impl {
    impl(detail::transport* t, const websocket_options* o, bool client) noexcept
        : t(t), opts(o), client(client) {}

    detail::transport* t;
    const websocket_options* opts;
    bool client;
    std::string protocol;
    stop_state* session_stop = nullptr;         // server: stops the handler's scope
    std::optional<detail::ws_deflate> deflate;  // set by the handshake when agreed

    // client: the streams and the options the transport and opts point into (heap: stable)
    std::optional<tcp_stream> own_tcp;
    std::optional<tls_stream> own_tls;
    std::unique_ptr<byte_stream> own_stream;  // connected over a byte_stream (TLS or not)
    std::optional<detail::transport> own_t;
    websocket_options own_opts;

    std::string in;
    std::size_t in_pos = 0;
    std::string message;
    bool in_message = false;
    bool message_text = false;
    bool message_compressed = false;  // `message` holds the compressed payload until FIN
    detail::utf8_check utf8;
    bool close_received = false;
    std::uint16_t peer_code = 0;
    std::string peer_reason;

    mutex write_mu;
    std::atomic<bool> close_sent{false};
    std::atomic<bool> failed{false};
    std::atomic<std::int64_t> last_rx{now_ns()};

    // -- writing ---------------------------------------------------------------------------
    auto write_frame(detail::ws_opcode op, std::string_view payload) -> task<result<void>> {
        if (failed.load(std::memory_order_acquire)) {
            co_return make_error_code(websocket_errc::closed);
        }
        auto g = co_await write_mu.lock();
        if (!g) {
            co_return g.error();
        }
        if (close_sent.load(std::memory_order_relaxed)) {
            co_return make_error_code(
                websocket_errc::closed);  // nothing follows a close frame (RFC 6455 5.5.1)
        }
        if (op == detail::ws_opcode::close) {
            close_sent.store(true, std::memory_order_release);
        }
        std::uint8_t head[14];
        std::string owned;  // the compressed or masked payload
        std::string_view body = payload;
        // Compressed under the write lock: with context takeover, messages must reach the
        // peer in the order their compressor saw them.
        const bool compress = deflate && !detail::is_control(op);
        if (compress) {
            deflate->compress(payload, owned);
            body = owned;
        }
        std::size_t n = 0;
        if (client) {
            std::uint8_t key[4];
            random_bytes(key, sizeof key);
            n = detail::write_frame_head(head, op, true, body.size(), key, compress);
            if (!compress) {
                owned.assign(payload);
            }
            detail::apply_mask(owned.data(), owned.size(), key);
            body = owned;
        } else {
            n = detail::write_frame_head(head, op, true, body.size(), nullptr, compress);
        }
        const std::span<const std::byte> pieces[2] = {{reinterpret_cast<const std::byte*>(head), n},
                                                      as_bytes(body)};
        auto w = co_await with_timeout(opts->send_timeout,
                                       t->write_all(std::span<const std::span<const std::byte>>{
                                           pieces, body.empty() ? 1U : 2U}));
        result<void> r = w ? *w : result<void>{w.error()};
        if (!r) {
            fail_transport();
        }
        co_return r;
    }

    auto send_close(std::uint16_t code, std::string_view reason) -> task<result<void>> {
        std::string p;
        if (code != close_code::no_status) {
            p.push_back(static_cast<char>(code >> 8));
            p.push_back(static_cast<char>(code & 0xFF));
            p.append(reason.substr(0, 123));
        }
        co_return co_await write_frame(detail::ws_opcode::close, p);
    }

    // The connection cannot go on (a write failed or timed out, a read failed): later calls
    // fail at once, and on the server the handler's waits are cancelled.
    void fail_transport() noexcept {
        failed.store(true, std::memory_order_release);
        if (session_stop != nullptr) {
            session_stop->request_stop();
        }
    }

    // The peer broke the protocol: our close with `code`, then the connection is done.
    auto fail(std::uint16_t code) -> task<result<websocket_message>> {
        (void)co_await send_close(code, {});
        failed.store(true, std::memory_order_release);
        co_return make_error_code(websocket_errc::protocol_error);
    }

    // -- reading ---------------------------------------------------------------------------
    // Until `n` bytes are held from in_pos.
    auto need(std::size_t n) -> task<result<void>> {
        while (in.size() - in_pos < n) {
            if (in_pos > 0 && in_pos >= in.size() / 2) {
                in.erase(0, in_pos);
                in_pos = 0;
            }
            auto got = co_await t->receive();
            if (!got) {
                fail_transport();
                co_return got.error();
            }
            last_rx.store(now_ns(), std::memory_order_relaxed);
            in.append(reinterpret_cast<const char*>(got->data()), got->size());
        }
        co_return result<void>{};
    }

    auto receive() -> task<result<websocket_message>> {
        if (failed.load(std::memory_order_acquire) || close_received) {
            co_return make_error_code(websocket_errc::closed);
        }
        for (;;) {
            detail::ws_frame_head h;
            int parsed = detail::parse_frame_head(std::string_view{in}.substr(in_pos), h);
            while (parsed == 0) {
                auto ok = co_await need(in.size() - in_pos + 1);
                if (!ok) {
                    co_return ok.error();
                }
                parsed = detail::parse_frame_head(std::string_view{in}.substr(in_pos), h);
            }
            const auto op = static_cast<detail::ws_opcode>(h.opcode);
            // RSV1 only with permessage-deflate agreed, and only on a message's first frame
            // (RFC 7692 6.1: never on a control frame or a continuation); RSV2 and RSV3 never.
            const bool rsv_ok =
                h.rsv == 0 || (h.rsv == detail::rsv1 && deflate && !detail::is_control(op) &&
                               op != detail::ws_opcode::continuation);
            if (parsed < 0 || !rsv_ok) {
                co_return co_await fail(close_code::protocol_error);
            }
            const bool known = h.opcode <= 2 || (h.opcode >= 8 && h.opcode <= 10);
            // Frames from a client are masked, frames from a server are not (RFC 6455 5.1).
            if (!known || h.masked == client) {
                co_return co_await fail(close_code::protocol_error);
            }
            if (detail::is_control(op)) {
                if (!h.fin || h.length > 125) {
                    co_return co_await fail(close_code::protocol_error);
                }
            } else if (h.length > opts->max_frame ||
                       (op == detail::ws_opcode::continuation &&
                        message.size() + h.length > opts->max_message) ||
                       (op != detail::ws_opcode::continuation && h.length > opts->max_message)) {
                co_return co_await fail(close_code::too_big);
            }
            if ((op == detail::ws_opcode::continuation) != in_message && !detail::is_control(op)) {
                // a continuation with no message begun, or a new message inside one
                co_return co_await fail(close_code::protocol_error);
            }
            const bool data_frame = !detail::is_control(op);
            if (data_frame && op != detail::ws_opcode::continuation) {
                in_message = true;
                message_text = op == detail::ws_opcode::text;
                message_compressed = h.rsv == detail::rsv1;
                message.clear();
                utf8.reset();
            }
            // The payload is unmasked, and a text message's UTF-8 checked, as its bytes arrive:
            // a bad sequence fails the connection before the rest of its frame is waited for
            // (RFC 6455 8.1, fail fast). A compressed message is checked once inflated.
            const bool check_utf8 = data_frame && message_text && !message_compressed;
            const auto len = static_cast<std::size_t>(h.length);
            std::size_t done = 0;  // payload bytes unmasked (and checked) so far
            for (;;) {
                const std::size_t held = std::min(len, in.size() - in_pos - h.size);
                if (held > done) {
                    char* from = in.data() + in_pos + h.size + done;
                    if (h.masked) {
                        detail::apply_mask(from, held - done, h.mask, done);
                    }
                    if (check_utf8 && !utf8.feed({from, held - done})) {
                        co_return co_await fail(close_code::invalid_data);
                    }
                    done = held;
                }
                if (done == len) {
                    break;
                }
                auto ok = co_await need(h.size + done + 1);
                if (!ok) {
                    co_return ok.error();
                }
            }
            const std::string_view data{in.data() + in_pos + h.size, len};
            in_pos += h.size + len;

            switch (op) {
                case detail::ws_opcode::ping: {
                    const std::string copy{data};
                    auto w = co_await write_frame(detail::ws_opcode::pong, copy);
                    if (!w && w.error() != websocket_errc::closed) {
                        co_return w.error();
                    }
                    continue;
                }
                case detail::ws_opcode::pong:
                    continue;
                case detail::ws_opcode::close:
                    co_return co_await on_close(data);
                default:
                    break;
            }
            message.append(data);
            if (h.fin) {
                in_message = false;
                if (message_compressed) {
                    // Inflated only up to max_message: a bomb is refused where it crosses it.
                    std::string plain;
                    const auto st = deflate->decompress(message, plain, opts->max_message);
                    if (st == detail::ws_deflate::status::too_big) {
                        co_return co_await fail(close_code::too_big);
                    }
                    if (st == detail::ws_deflate::status::bad) {
                        co_return co_await fail(close_code::invalid_data);
                    }
                    message = std::move(plain);
                    if (message_text && !utf8.feed(message)) {
                        co_return co_await fail(close_code::invalid_data);
                    }
                }
                if (message_text && !utf8.complete()) {
                    co_return co_await fail(close_code::invalid_data);
                }
                websocket_message m{message_text, std::move(message)};
                message = std::string{};
                co_return m;
            }
        }
    }

    // The peer's close: checked, answered with the same code (RFC 6455 5.5.1) unless ours
    // went first, and the connection is closed.
    auto on_close(std::string_view data) -> task<result<websocket_message>> {
        if (data.size() == 1) {
            co_return co_await fail(close_code::protocol_error);
        }
        std::uint16_t code = close_code::no_status;
        if (data.size() >= 2) {
            code = static_cast<std::uint16_t>((static_cast<std::uint8_t>(data[0]) << 8) |
                                              static_cast<std::uint8_t>(data[1]));
            if (!valid_close_code(code)) {
                co_return co_await fail(close_code::protocol_error);
            }
            detail::utf8_check reason;
            if (!reason.feed(data.substr(2)) || !reason.complete()) {
                co_return co_await fail(close_code::invalid_data);
            }
            peer_reason.assign(data.substr(2));
        }
        peer_code = code;
        close_received = true;
        (void)co_await send_close(code == close_code::no_status ? close_code::normal : code, {});
        co_return make_error_code(websocket_errc::closed);
    }

    // After our close: frames are read and dropped until the peer's close (or a failure).
    auto await_peer_close() -> task<void> {
        while (!close_received && !failed.load(std::memory_order_acquire)) {
            auto m = co_await receive();
            if (!m && m.error() != websocket_errc::closed) {
                co_return;
            }
        }
    }
};

websocket::websocket(std::unique_ptr<impl> p) noexcept : p_(std::move(p)) {}
websocket::websocket(websocket&&) noexcept = default;
auto websocket::operator=(websocket&&) noexcept -> websocket& = default;
websocket::~websocket() = default;

auto websocket::receive() -> task<result<websocket_message>> { return p_->receive(); }

auto websocket::send(std::string_view data, bool text) -> task<result<void>> {
    return p_->write_frame(text ? detail::ws_opcode::text : detail::ws_opcode::binary, data);
}

auto websocket::send_binary(std::span<const std::byte> data) -> task<result<void>> {
    return p_->write_frame(detail::ws_opcode::binary,
                           {reinterpret_cast<const char*>(data.data()), data.size()});
}

auto websocket::ping(std::string_view payload) -> task<result<void>> {
    return p_->write_frame(detail::ws_opcode::ping, payload.substr(0, 125));
}

auto websocket::close(std::uint16_t code, std::string_view reason) -> task<result<void>> {
    return p_->send_close(code, reason);
}

auto websocket::close_code() const noexcept -> std::uint16_t { return p_->peer_code; }
auto websocket::close_reason() const noexcept -> std::string_view { return p_->peer_reason; }
auto websocket::subprotocol() const noexcept -> std::string_view { return p_->protocol; }
auto websocket::compressed() const noexcept -> bool { return p_->deflate.has_value(); }

// ---- client -----------------------------------------------------------------------------

namespace {

// The client's side of the opening handshake on `p`'s transport: the upgrade request (Host:
// `host_field`), then the server's answer checked; the session once it agrees.
auto client_handshake(std::unique_ptr<websocket::impl> p,
                      std::string host_field,
                      std::string path,
                      std::vector<std::string> protocols) -> task<result<websocket>> {
    unsigned char raw[16];
    random_bytes(raw, sizeof raw);
    const std::string key = base64(raw, sizeof raw);
    std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + host_field +
                      "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: " + key +
                      "\r\nSec-WebSocket-Version: 13\r\n";
    if (!protocols.empty()) {
        req += "Sec-WebSocket-Protocol: ";
        for (std::size_t i = 0; i < protocols.size(); ++i) {
            req += (i == 0 ? "" : ", ") + protocols[i];
        }
        req += "\r\n";
    }
    if (p->own_opts.deflate.enabled) {
        req += "Sec-WebSocket-Extensions: " + detail::deflate_offer(p->own_opts.deflate) + "\r\n";
    }
    req += "\r\n";
    auto w = co_await p->t->write_all(as_bytes(req));
    if (!w) {
        co_return w.error();
    }

    // The answer's head: at most 16 KiB, then the server's first frames may follow.
    constexpr std::size_t head_max = 16 * 1024;
    std::size_t end = 0;
    for (;;) {
        end = p->in.find("\r\n\r\n");
        if (end != std::string::npos) {
            break;
        }
        if (p->in.size() > head_max) {
            co_return make_error_code(websocket_errc::handshake_failed);
        }
        auto ok = co_await p->need(p->in.size() + 1);
        if (!ok) {
            co_return ok.error();
        }
    }
    std::string_view head{p->in.data(), end};
    const auto line_end = head.find("\r\n");
    const auto status = head.substr(0, line_end);
    if (!status.starts_with("HTTP/1.1 101")) {
        co_return make_error_code(websocket_errc::handshake_failed);
    }
    bool upgrade = false;
    bool connection = false;
    bool accepted = false;
    std::string protocol;
    bool protocol_ok = true;
    std::optional<detail::deflate_agreement> agreed;
    bool extensions_ok = true;
    const std::string want = accept_key(key);
    std::string_view rest =
        line_end == std::string_view::npos ? std::string_view{} : head.substr(line_end + 2);
    while (!rest.empty()) {
        const auto e = rest.find("\r\n");
        const auto line = rest.substr(0, e);
        rest = e == std::string_view::npos ? std::string_view{} : rest.substr(e + 2);
        const auto colon = line.find(':');
        if (colon == std::string_view::npos) {
            co_return make_error_code(websocket_errc::handshake_failed);
        }
        const std::string name = lower(trim(line.substr(0, colon)));
        const auto value = trim(line.substr(colon + 1));
        if (name == "upgrade") {
            upgrade = upgrade || has_token(value, "websocket");
        } else if (name == "connection") {
            connection = connection || has_token(value, "upgrade");
        } else if (name == "sec-websocket-accept") {
            accepted = value == want;
        } else if (name == "sec-websocket-protocol") {
            protocol.assign(value);
            protocol_ok =
                std::find(protocols.begin(), protocols.end(), protocol) != protocols.end();
        } else if (name == "sec-websocket-extensions") {
            // Only what was offered, once (RFC 6455 4.1: else fail the connection).
            if (p->own_opts.deflate.enabled && !agreed) {
                agreed = detail::client_agreement(p->own_opts.deflate, value);
            } else {
                agreed.reset();
            }
            extensions_ok = extensions_ok && agreed.has_value();
        }
    }
    if (!upgrade || !connection || !accepted || !protocol_ok || !extensions_ok) {
        co_return make_error_code(websocket_errc::handshake_failed);
    }
    p->protocol = std::move(protocol);
    if (agreed) {
        p->deflate.emplace(*agreed);
    }
    p->in_pos = end + 4;
    co_return websocket{std::move(p)};
}

}  // namespace

auto websocket::connect(socket_address addr,
                        std::string host,
                        std::string path,
                        websocket_options o,
                        std::vector<std::string> protocols) -> task<result<websocket>> {
    auto tcp = co_await tcp_stream::connect(addr);
    if (!tcp) {
        co_return tcp.error();
    }
    auto p = std::make_unique<impl>(nullptr, nullptr, true);
    p->own_opts = std::move(o);
    p->opts = &p->own_opts;
    if (p->own_opts.tls) {
        auto s = co_await tls_stream::connect(std::move(*tcp), *p->own_opts.tls, host);
        if (!s) {
            co_return s.error();
        }
        p->own_tls.emplace(std::move(*s));
        p->own_t.emplace(*p->own_tls);
    } else {
        p->own_tcp.emplace(std::move(*tcp));
        p->own_t.emplace(*p->own_tcp);
    }
    p->t = &*p->own_t;
    // Host names the port unless it is the scheme's default (RFC 9110 7.2).
    std::string host_field = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    if (addr.port() != (p->own_opts.tls ? 443 : 80)) {
        host_field += ":" + std::to_string(addr.port());
    }
    co_return co_await client_handshake(std::move(p), std::move(host_field), std::move(path),
                                        std::move(protocols));
}

auto websocket::connect(std::unique_ptr<byte_stream> s,
                        std::string host,
                        std::string path,
                        websocket_options o,
                        std::vector<std::string> protocols) -> task<result<websocket>> {
    auto p = std::make_unique<impl>(nullptr, nullptr, true);
    p->own_opts = std::move(o);
    p->opts = &p->own_opts;
    if (p->own_opts.tls) {
        // As the server serves TLS over a byte_stream: the TLS stream as a byte_stream.
        auto t = co_await tls_stream::connect(std::move(s), *p->own_opts.tls, host);
        if (!t) {
            co_return t.error();
        }
        s = std::make_unique<tls_byte_stream>(std::move(*t));
    }
    p->own_stream = std::move(s);
    p->own_t.emplace(*p->own_stream);
    p->t = &*p->own_t;
    co_return co_await client_handshake(std::move(p), std::move(host), std::move(path),
                                        std::move(protocols));
}

// ---- server -----------------------------------------------------------------------------

namespace detail {

namespace {

auto refuse(int status, std::string_view why) -> response {
    auto r = response::text(std::string{why} + "\n", status);
    if (status == 426) {
        r.set_header("Upgrade", "websocket");
    }
    return r;
}

// A Sec-WebSocket-Key is the base64 of 16 bytes: 22 characters of the alphabet and "==".
auto valid_key(std::string_view k) -> bool {
    if (k.size() != 24 || !k.ends_with("==")) {
        return false;
    }
    return std::all_of(k.begin(), k.end() - 2, [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '+' || c == '/';
    });
}

class server_session final : public websocket_session {
public:
    void drain() noexcept override { requested.set(); }
    event requested;
};

// Pings a silent peer every ping_interval and drops one silent for idle_timeout (a peer that
// answers pings is never silent that long).
auto keepalive(server::state& st, websocket::impl& im) -> task<void> {
    const websocket_options& o = *im.opts;
    auto period = o.idle_timeout;
    if (o.ping_interval.count() > 0) {
        period = std::min(period, o.ping_interval);
    }
    period = std::max(std::chrono::milliseconds{1}, period / 2);
    std::int64_t pinged_for = -1;  // the last_rx a ping was sent after
    for (;;) {
        auto slept = co_await sleep_for(period);
        if (!slept) {
            co_return;
        }
        const std::int64_t rx = im.last_rx.load(std::memory_order_relaxed);
        const std::chrono::nanoseconds silent{now_ns() - rx};
        if (silent >= o.idle_timeout) {
            st.timed_out.fetch_add(1, std::memory_order_relaxed);
            im.fail_transport();
            co_return;
        }
        if (o.ping_interval.count() > 0 && silent >= o.ping_interval && pinged_for != rx) {
            pinged_for = rx;
            (void)co_await im.write_frame(ws_opcode::ping, {});
        }
    }
}

// The server's drain: close 1001, then the peer has close_timeout to answer before it is
// dropped (the handler's receive sees the answer and returns).
auto drain_watch(websocket::impl& im, server_session& ss) -> task<void> {
    auto got = co_await ss.requested.wait();
    if (!got) {
        co_return;
    }
    (void)co_await im.send_close(close_code::going_away, "server shutdown");
    auto slept = co_await sleep_for(im.opts->close_timeout);
    if (slept) {
        im.fail_transport();
    }
}

void report_failure(const std::exception_ptr& e) {
    std::string what = "an exception not derived from std::exception";
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        what = ex.what();
    } catch (...) {
    }
    std::fprintf(stderr, "weft::http: a WebSocket handler failed: %s\n", what.c_str());
}

}  // namespace

auto websocket_route::operator()(request& req) const -> task<response> {
    const websocket_options& o = d->opts;
    bool upgrade = false;
    bool connection = false;
    for (const auto v : req.head().values("Upgrade")) {
        upgrade = upgrade || has_token(v, "websocket");
    }
    for (const auto v : req.head().values("Connection")) {
        connection = connection || has_token(v, "upgrade");
    }
    if (!upgrade || !connection) {
        co_return refuse(426, "Upgrade Required");
    }
    if (req.version_minor() < 1 || req.head().framing().kind != body_kind::none) {
        co_return refuse(400, "Bad Request");
    }
    if (trim(req.header("Sec-WebSocket-Version").value_or("")) != "13") {
        auto r = refuse(426, "Upgrade Required");
        r.set_header("Sec-WebSocket-Version", "13");
        co_return r;
    }
    const auto key = trim(req.header("Sec-WebSocket-Key").value_or(""));
    if (!valid_key(key)) {
        co_return refuse(400, "Bad Request");
    }
    if (o.check_origin && !o.check_origin(req.header("Origin").value_or(""))) {
        co_return refuse(403, "Forbidden");
    }
    std::string_view chosen;
    for (const std::string& mine : o.subprotocols) {
        for (const auto v : req.head().values("Sec-WebSocket-Protocol")) {
            if (any_token(v, [&](std::string_view t) { return t == mine; })) {
                chosen = mine;
                break;
            }
        }
        if (!chosen.empty()) {
            break;
        }
    }
    response r{101};
    r.add_header("Upgrade", "websocket");
    r.add_header("Sec-WebSocket-Accept", accept_key(key));
    if (!chosen.empty()) {
        r.add_header("Sec-WebSocket-Protocol", chosen);
    }
    if (o.deflate.enabled) {
        std::string offers;
        for (const auto v : req.head().values("Sec-WebSocket-Extensions")) {
            offers.append(offers.empty() ? "" : ", ").append(v);
        }
        if (auto answer = answer_deflate_offers(o.deflate, offers)) {
            r.add_header("Sec-WebSocket-Extensions", *answer);
        }
    }
    co_return r;
}

auto websocket_route::serve(server::state& st,
                            response& r,
                            transport& t,
                            std::string_view early) const -> task<void> {
    const websocket_options& o = d->opts;
    std::string head = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n";
    for (const auto& [name, value] : r.headers()) {
        head.append(name).append(": ").append(value).append("\r\n");
    }
    head += "\r\n";
    auto p = std::make_unique<websocket::impl>(&t, &o, false);
    p->in.assign(early);
    if (auto proto = r.header("Sec-WebSocket-Protocol")) {
        p->protocol.assign(*proto);
    }
    if (auto ext = r.header("Sec-WebSocket-Extensions")) {
        p->deflate.emplace(server_agreement(o.deflate, *ext));
    }
    auto w = co_await with_timeout(o.send_timeout, t.write_all(as_bytes(head)));
    if (!w || !*w) {
        co_return;
    }
    websocket::impl& im = *p;
    websocket ws{std::move(p)};

    server_session session;
    bool draining = false;
    {
        std::lock_guard lock(st.mu);
        draining = st.draining.load(std::memory_order_relaxed);
        if (!draining) {
            st.sessions.push_back(&session);
        }
    }
    if (draining) {
        session.drain();  // the drain began during the handshake: close 1001 at once
    }
    try {
        co_await with_scope([&](scope& s) -> task<void> {
            im.session_stop = &s.stop();
            s.spawn(keepalive(st, im));
            s.spawn(drain_watch(im, session));
            std::exception_ptr failure;
            try {
                co_await d->handler(ws);
            } catch (...) {
                failure = std::current_exception();
            }
            if (!s.stop().stop_requested()) {
                if (failure) {
                    report_failure(failure);
                }
                if (!im.close_sent.load(std::memory_order_acquire)) {
                    (void)co_await im.send_close(
                        failure ? close_code::internal_error : close_code::normal, {});
                }
                if (!im.failed.load(std::memory_order_acquire) && !im.close_received) {
                    (void)co_await with_timeout(o.close_timeout, im.await_peer_close());
                }
            }
            s.request_stop();  // ends the keepalive and the drain watch
        });
    } catch (...) {
        // a failure of this WebSocket connection ends it alone
    }
    im.session_stop = nullptr;
    std::lock_guard lock(st.mu);
    std::erase(st.sessions, &session);
}

}  // namespace detail

}  // namespace weft::http
