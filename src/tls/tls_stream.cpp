#include "weft/tls/tls_stream.hpp"

#include <arpa/inet.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "openssl_error.hpp"
#include "weft/sched/timer.hpp"

namespace weft {

namespace detail {

/// One TLS connection: the socket, OpenSSL's session, and the ciphertext between them.
/// Heap-allocated so that the BIO's pointer to it survives moves of the tls_stream.
///
/// OpenSSL reads ciphertext from `in` (from in_off) and appends what it writes to `out`,
/// through a BIO of weft's own over these two (session_bio below): received bytes are handed
/// to OpenSSL without a copy into a BIO buffer, and what it writes is sent from `out`.
/// Invariant: when an OpenSSL call reports SSL_ERROR_WANT_READ, `in` is used up (the BIO only
/// asks for a retry when it has nothing left), so one received block is held at a time.
struct tls_session {
    explicit tls_session(tcp_stream s) noexcept : tcp(std::move(s)) {}
    tls_session(const tls_session&) = delete;
    auto operator=(const tls_session&) -> tls_session& = delete;
    ~tls_session() { SSL_free(ssl); }  // frees the BIO too

    tcp_stream tcp;
    SSL* ssl = nullptr;
    bytes in;                    // received ciphertext
    std::size_t in_off = 0;      // [in_off, in.size()) not yet taken by OpenSSL
    std::vector<std::byte> out;  // ciphertext OpenSSL wrote, not yet sent
    std::error_code failed;      // set: the stream is unusable
};

void tls_session_deleter::operator()(tls_session* s) const noexcept { delete s; }

namespace {

constexpr std::size_t record_max = 16 * 1024;    // a TLS record's plaintext at most
constexpr std::size_t send_batch = 64 * 1024;    // ciphertext gathered before a socket write
constexpr std::size_t out_kept_max = 32 * 1024;  // a larger `out` is released after a write

auto session_of(BIO* b) -> tls_session* { return static_cast<tls_session*>(BIO_get_data(b)); }

auto bio_write(BIO* b, const char* data, int n) -> int {
    BIO_clear_retry_flags(b);
    try {
        auto& out = session_of(b)->out;
        const auto* p = reinterpret_cast<const std::byte*>(data);
        out.insert(out.end(), p, p + n);
        return n;
    } catch (const std::bad_alloc&) {
        return -1;  // OpenSSL reports the write as failed
    }
}

auto bio_read(BIO* b, char* data, int n) -> int {
    BIO_clear_retry_flags(b);
    tls_session* s = session_of(b);
    const std::size_t left = s->in.size() - s->in_off;
    if (left == 0) {
        BIO_set_retry_read(b);  // SSL_ERROR_WANT_READ: the caller receives more
        return -1;
    }
    const std::size_t k = std::min(left, static_cast<std::size_t>(n));
    std::memcpy(data, s->in.data() + s->in_off, k);
    s->in_off += k;
    if (s->in_off == s->in.size()) {
        s->in = bytes{};
        s->in_off = 0;
    }
    return static_cast<int>(k);
}

auto bio_ctrl(BIO* /*b*/, int cmd, long /*num*/, void* /*ptr*/) -> long {
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;  // writes are complete at once: nothing to flush
}

auto bio_create(BIO* b) -> int {
    BIO_set_init(b, 1);
    return 1;
}

auto session_bio_method() -> const BIO_METHOD* {
    static BIO_METHOD* const m = [] {
        BIO_METHOD* bm = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "weft session");
        if (bm == nullptr) {
            throw std::bad_alloc();
        }
        BIO_meth_set_write(bm, bio_write);
        BIO_meth_set_read(bm, bio_read);
        BIO_meth_set_ctrl(bm, bio_ctrl);
        BIO_meth_set_create(bm, bio_create);
        return bm;
    }();
    return m;
}

// The error of a failed OpenSSL call on `ssl` (`ret` its return value), read at once (the
// error queue is this thread's).
auto error_of(SSL* ssl, int ret) -> std::error_code {
    const int err = SSL_get_error(ssl, ret);
    if (err == SSL_ERROR_ZERO_RETURN) {
        ERR_clear_error();
        return make_error_code(io_errc::eof);  // the peer's close_notify
    }
    if (err == SSL_ERROR_SSL) {
        const long verify = SSL_get_verify_result(ssl);
        const unsigned long e = ERR_peek_error();
        if (verify != X509_V_OK && ERR_GET_LIB(e) == ERR_LIB_SSL &&
            ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED) {
            ERR_clear_error();
            return {static_cast<int>(verify), x509_verify_category()};
        }
    }
    return take_openssl_error(std::make_error_code(std::errc::protocol_error));
}

auto is_ip_address(std::string_view host) -> bool {
    const std::string h{host};
    in6_addr a6{};
    in_addr a4{};
    return ::inet_pton(AF_INET, h.c_str(), &a4) == 1 || ::inet_pton(AF_INET6, h.c_str(), &a6) == 1;
}

auto new_session(tcp_stream s, const tls_context& ctx)
    -> std::unique_ptr<tls_session, tls_session_deleter> {
    std::unique_ptr<tls_session, tls_session_deleter> t{new tls_session(std::move(s))};
    ERR_clear_error();
    t->ssl = detail::new_ssl(ctx);
    if (t->ssl == nullptr) {
        throw std::bad_alloc();
    }
    BIO* bio = BIO_new(session_bio_method());
    if (bio == nullptr) {
        throw std::bad_alloc();
    }
    BIO_set_data(bio, t.get());
    SSL_set_bio(t->ssl, bio, bio);  // one BIO both ways: SSL takes the one reference
    return t;
}

// Sends what OpenSSL wrote: through the tcp_stream's write_all, or, with a pacer, by
// non-blocking sends that leave each wait for room to the pacer. A failure (or a cancellation
// part-way) breaks the record stream.
auto flush(tls_session& s, tls_stream::pacer* p = nullptr) -> task<result<void>> {
    if (s.out.empty()) {
        co_return result<void>{};
    }
    result<void> r;
    if (p == nullptr) {
        r = co_await s.tcp.write_all(std::span<const std::byte>{s.out});
    } else {
        std::size_t off = 0;
        while (off < s.out.size()) {
            const ssize_t n = ::send(s.tcp.native_handle(), s.out.data() + off, s.out.size() - off,
                                     MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0) {
                off += static_cast<std::size_t>(n);
                p->sent(static_cast<std::size_t>(n));
                continue;
            }
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                r = std::error_code{errno, std::system_category()};
                break;
            }
            r = co_await p->wait_for_room();
            if (!r) {
                break;
            }
        }
    }
    s.out.clear();
    if (s.out.capacity() > out_kept_max) {
        s.out.shrink_to_fit();
    }
    if (!r) {
        s.failed = r.error();
    }
    co_return r;
}

// Receives the next block of ciphertext. A cancellation takes nothing: the session is intact.
// The peer's FIN while OpenSSL still wants bytes: `at_eof`.
auto fill(tls_session& s, std::error_code at_eof) -> task<result<void>> {
    auto got = co_await s.tcp.receive();
    if (!got) {
        if (got.error() == io_errc::eof) {
            s.failed = at_eof;
            co_return at_eof;
        }
        if (got.error() != std::errc::operation_canceled) {
            s.failed = got.error();
        }
        co_return got.error();
    }
    s.in = std::move(*got);
    s.in_off = 0;
    co_return result<void>{};
}

auto unusable(const tls_session& s) -> std::error_code {
    return s.failed == std::errc::operation_canceled ? make_error_code(tls_errc::unusable)
                                                     : s.failed;
}

}  // namespace
}  // namespace detail

tls_stream::tls_stream() noexcept = default;
tls_stream::tls_stream(std::unique_ptr<detail::tls_session, detail::tls_session_deleter> s) noexcept
    : s_(std::move(s)) {}
tls_stream::tls_stream(tls_stream&&) noexcept = default;
auto tls_stream::operator=(tls_stream&&) noexcept -> tls_stream& = default;
tls_stream::~tls_stream() = default;

namespace detail {
namespace {

auto handshake(tls_session& s) -> task<result<void>> {
    for (;;) {
        ERR_clear_error();
        const int r = SSL_do_handshake(s.ssl);
        std::error_code ec;
        if (r != 1 && SSL_get_error(s.ssl, r) != SSL_ERROR_WANT_READ) {
            ec = error_of(s.ssl, r);
        }
        // What OpenSSL wrote goes out even when the handshake failed: the alert tells the
        // peer why.
        auto sent = co_await flush(s);
        if (ec) {
            s.failed = ec;
            co_return ec;
        }
        if (!sent) {
            co_return sent.error();
        }
        if (r == 1) {
            co_return result<void>{};
        }
        auto got = co_await fill(s, make_error_code(io_errc::eof));
        if (!got) {
            s.failed = got.error();  // a handshake is never resumed: the caller drops it
            co_return got.error();
        }
    }
}

// The handshake, given up with timed_out after `limit` (0: no limit).
auto handshake_within(tls_session& s, std::chrono::milliseconds limit) -> task<result<void>> {
    if (limit.count() <= 0) {
        co_return co_await handshake(s);
    }
    auto r = co_await with_timeout(limit, handshake(s));
    if (!r) {
        s.failed = r.error();
        co_return r.error();  // timed_out
    }
    co_return std::move(*r);
}

}  // namespace
}  // namespace detail

auto tls_stream::accept(tcp_stream s, const tls_context& ctx) -> task<result<tls_stream>> {
    tls_stream t{detail::new_session(std::move(s), ctx)};
    SSL_set_accept_state(t.s_->ssl);
    auto r = co_await detail::handshake_within(*t.s_, ctx.handshake_timeout());
    if (!r) {
        co_return r.error();
    }
    co_return std::move(t);
}

auto tls_stream::connect(tcp_stream s, const tls_context& ctx, std::string_view host)
    -> task<result<tls_stream>> {
    tls_stream t{detail::new_session(std::move(s), ctx)};
    SSL* ssl = t.s_->ssl;
    SSL_set_connect_state(ssl);
    const std::string h{host};
    const bool ip = detail::is_ip_address(host);
    if (!ip && !h.empty()) {
        SSL_set_tlsext_host_name(ssl, h.c_str());
    }
    if (ctx.verifies_peer()) {
        X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
        const int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, h.c_str())
                          : X509_VERIFY_PARAM_set1_host(param, h.c_str(), h.size());
        if (ok != 1) {
            co_return std::make_error_code(std::errc::invalid_argument);
        }
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    }
    auto r = co_await detail::handshake_within(*t.s_, ctx.handshake_timeout());
    if (!r) {
        co_return r.error();
    }
    co_return std::move(t);
}

auto tls_stream::read_some(std::span<std::byte> buf) -> task<result<std::size_t>> {
    detail::tls_session& s = *s_;
    if (s.failed) {
        co_return detail::unusable(s);
    }
    for (;;) {
        std::size_t n = 0;
        ERR_clear_error();
        const int r = SSL_read_ex(s.ssl, buf.data(), buf.size(), &n);
        std::error_code ec;
        bool want_read = false;
        if (r != 1) {
            want_read = SSL_get_error(s.ssl, r) == SSL_ERROR_WANT_READ;
            if (!want_read) {
                ec = detail::error_of(s.ssl, r);
            }
        }
        auto sent = co_await detail::flush(s);  // a key update's answer, an alert
        if (ec) {
            if (ec != io_errc::eof) {
                s.failed = ec;
            }
            co_return ec;
        }
        if (!sent) {
            co_return sent.error();
        }
        if (r == 1) {
            co_return n;
        }
        auto got = co_await detail::fill(s, make_error_code(tls_errc::truncated));
        if (!got) {
            co_return got.error();
        }
    }
}

auto tls_stream::receive() -> task<result<bytes>> {
    std::byte* data = nullptr;
    const bytes block{detail::make_heap_block(detail::record_max, data), data, detail::record_max};
    auto n = co_await read_some({data, detail::record_max});
    if (!n) {
        co_return n.error();
    }
    co_return block.slice(0, *n);
}

namespace detail {
namespace {

// write_all's body: encrypts `bufs` a batch at a time and flushes (see flush for `p`).
auto write_records(tls_session& s,
                   std::span<const std::span<const std::byte>> bufs,
                   tls_stream::pacer* p) -> task<result<void>> {
    if (s.failed) {
        co_return unusable(s);
    }
    // Pieces smaller than a record are gathered into one (a response's head and its body in
    // one record, not two); a large piece is encrypted from where it is.
    std::string gather;
    auto encrypt = [&s](const std::byte* p, std::size_t n) -> std::error_code {
        while (n > 0) {
            const std::size_t k = std::min(n, record_max);
            std::size_t written = 0;
            ERR_clear_error();
            const int r = SSL_write_ex(s.ssl, p, k, &written);
            if (r != 1) {
                return error_of(s.ssl, r);
            }
            p += written;
            n -= written;
        }
        return {};
    };
    for (std::size_t i = 0; i <= bufs.size(); ++i) {
        const bool last = i == bufs.size();
        const std::span<const std::byte> b = last ? std::span<const std::byte>{} : bufs[i];
        if (!last && gather.size() + b.size() <= record_max) {
            gather.append(reinterpret_cast<const char*>(b.data()), b.size());
            continue;
        }
        // The gathered pieces, then this one: gathered too when it is small, else encrypted
        // from where it is a batch at a time, so that `out` stays bounded.
        std::span<const std::byte> rest = b;
        if (!last && b.size() < record_max) {
            rest = {};
        }
        std::error_code ec;
        if (!gather.empty()) {
            ec = encrypt(reinterpret_cast<const std::byte*>(gather.data()), gather.size());
            gather.clear();
        }
        if (!last && rest.empty()) {
            gather.append(reinterpret_cast<const char*>(b.data()), b.size());
        }
        for (;;) {
            if (ec) {
                s.failed = ec;
                co_return ec;
            }
            if (s.out.size() >= send_batch) {
                auto sent = co_await flush(s, p);
                if (!sent) {
                    co_return sent.error();
                }
            }
            if (rest.empty()) {
                break;
            }
            const std::size_t k = std::min(rest.size(), send_batch);
            ec = encrypt(rest.data(), k);
            rest = rest.subspan(k);
        }
    }
    co_return co_await flush(s, p);
}

}  // namespace
}  // namespace detail

auto tls_stream::write_all(std::span<const std::byte> buf) -> task<result<void>> {
    const std::span<const std::byte> one[] = {buf};
    co_return co_await write_all(std::span<const std::span<const std::byte>>{one});
}

auto tls_stream::write_all(std::span<const std::span<const std::byte>> bufs) -> task<result<void>> {
    return detail::write_records(*s_, bufs, nullptr);
}

auto tls_stream::write_all(std::span<const std::span<const std::byte>> bufs, pacer& p)
    -> task<result<void>> {
    return detail::write_records(*s_, bufs, &p);
}

auto tls_stream::shutdown() -> task<result<void>> {
    detail::tls_session& s = *s_;
    if (s.failed) {
        co_return detail::unusable(s);
    }
    ERR_clear_error();
    const int r = SSL_shutdown(s.ssl);  // queues close_notify in `out`
    if (r < 0) {
        const auto ec = detail::error_of(s.ssl, r);
        s.failed = ec;
        co_return ec;
    }
    auto sent = co_await detail::flush(s);
    if (!sent) {
        co_return sent.error();
    }
    co_return s.tcp.shutdown_write();
}

auto tls_stream::shutdown_write() noexcept -> result<void> {
    detail::tls_session& s = *s_;
    if (!s.failed) {
        ERR_clear_error();
        if (SSL_shutdown(s.ssl) >= 0 && !s.out.empty()) {
            // One attempt: what the socket does not take at once is dropped (the peer then
            // sees tls_errc::truncated, not a corrupt record: nothing else follows it).
            (void)::send(s.tcp.native_handle(), s.out.data(), s.out.size(),
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        ERR_clear_error();
        s.out.clear();
        s.failed = make_error_code(tls_errc::unusable);  // no more writes
    }
    return s.tcp.shutdown_write();
}

void tls_stream::close() noexcept {
    if (s_) {
        s_->tcp.close();
    }
}

auto tls_stream::is_open() const noexcept -> bool { return s_ && s_->tcp.is_open(); }

auto tls_stream::alpn() const noexcept -> std::string_view {
    const unsigned char* p = nullptr;
    unsigned int n = 0;
    SSL_get0_alpn_selected(s_->ssl, &p, &n);
    return {reinterpret_cast<const char*>(p), n};
}

auto tls_stream::version() const noexcept -> std::string_view { return SSL_get_version(s_->ssl); }

auto tls_stream::server_name() const noexcept -> std::string_view {
    const char* n = SSL_get_servername(s_->ssl, TLSEXT_NAMETYPE_host_name);
    return n != nullptr ? std::string_view{n} : std::string_view{};
}

auto tls_stream::resumed() const noexcept -> bool { return SSL_session_reused(s_->ssl) == 1; }

auto tls_stream::tcp() noexcept -> tcp_stream& { return s_->tcp; }

auto tls_stream::peer_address() const -> result<socket_address> { return s_->tcp.peer_address(); }

}  // namespace weft
