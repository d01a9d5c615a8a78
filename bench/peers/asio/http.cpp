// Asio peer for weft-bench's HTTP suites (see ../README.md): the routes of
// examples/hello_http.cpp with the minimal HTTP/1.1 framing a hand-written Asio server has.
//
//   asio-http [-h HOST] [-p PORT] [-t THREADS] [--per-core] [--cert CHAIN.pem --key KEY.pem]
//
// Flags, threads, listeners and signals as server.hpp describes. A connection's coroutine reads
// into its buffer, answers every complete request in it (so pipelined requests are answered in
// one write), and reads on. Framing: request line and headers up to the blank line (at most
// 16 KiB), a body by Content-Length only (at most 1 MiB; Transfer-Encoding gets 501 and a
// close), keep-alive unless "Connection: close" or HTTP/1.0 without "Connection: keep-alive".
// Routes: GET / -> 200 "Hello, World!" (text/plain), POST /echo -> the body; otherwise 404, or
// 405 with Allow. Responses carry Date (rendered once a second per thread), Content-Type and
// Content-Length. A malformed request gets 400 and a close.
//
// With --cert and --key every connection is TLS: asio::ssl::stream over the socket, one
// asio::ssl::context (OpenSSL) shared by every thread, set up as Asio's SSL server example does
// (tls_server, default_workarounds, SSLv2/SSLv3/TLS 1.0/1.1 off, the chain and key files);
// the handshake first, then the same framing. A connection that ends after a response is closed
// without a close_notify.
#include <asio/ssl.hpp>
#include <asio/write.hpp>
#include <cctype>
#include <ctime>

#include "server.hpp"

namespace {

using asio::ip::tcp;

constexpr std::size_t kReadSize = 4096;
constexpr std::size_t kHeaderLimit = 16 * 1024;
constexpr std::size_t kBodyLimit = 1 << 20;

// "Date: Tue, 15 Nov 1994 08:12:31 GMT\r\n", rendered when the second changes.
std::string_view date_line() {
    thread_local std::time_t rendered = 0;
    thread_local char line[64];
    thread_local std::size_t len = 0;
    const std::time_t now = std::time(nullptr);
    if (now != rendered) {
        std::tm tm{};
        gmtime_r(&now, &tm);
        len = std::strftime(line, sizeof line, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
        rendered = now;
    }
    return {line, len};
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

void respond(std::string& out,
             int status,
             std::string_view reason,
             std::string_view body,
             std::string_view extra_headers,
             bool close,
             bool http10 = false) {
    out += "HTTP/1.1 ";
    out += std::to_string(status);
    out += ' ';
    out += reason;
    out += "\r\nServer: asio\r\n";
    out += date_line();
    out += "Content-Type: text/plain\r\nContent-Length: ";
    out += std::to_string(body.size());
    out += "\r\n";
    out += extra_headers;
    if (close) {
        out += "Connection: close\r\n";
    } else if (http10) {
        out += "Connection: keep-alive\r\n";
    }
    out += "\r\n";
    out += body;
}

// What one complete request in the buffer asks for; `consumed` = its bytes including the body.
struct request {
    std::string_view method, target, body;
    bool keep_alive = true;
    bool http10 = false;  // an HTTP/1.0 client keeps the connection only when told so
    std::size_t consumed = 0;
};

enum class parse_result { complete, incomplete, bad, unsupported };

parse_result parse(std::string_view in, request& req) {
    const std::size_t end = in.find("\r\n\r\n");
    if (end == std::string_view::npos) {
        return in.size() > kHeaderLimit ? parse_result::bad : parse_result::incomplete;
    }
    std::string_view head = in.substr(0, end + 2);
    const std::size_t line_end = head.find("\r\n");
    std::string_view line = head.substr(0, line_end);
    head.remove_prefix(line_end + 2);
    const std::size_t sp1 = line.find(' ');
    const std::size_t sp2 = line.rfind(' ');
    if (sp1 == std::string_view::npos || sp2 == sp1) {
        return parse_result::bad;
    }
    req.method = line.substr(0, sp1);
    req.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string_view version = line.substr(sp2 + 1);
    if (version != "HTTP/1.1" && version != "HTTP/1.0") {
        return parse_result::bad;
    }
    req.http10 = version == "HTTP/1.0";
    req.keep_alive = !req.http10;
    std::size_t length = 0;
    while (!head.empty()) {
        const std::size_t eol = head.find("\r\n");
        std::string_view field = head.substr(0, eol);
        head.remove_prefix(eol + 2);
        const std::size_t colon = field.find(':');
        if (colon == std::string_view::npos || colon == 0) {
            return parse_result::bad;
        }
        const std::string_view name = field.substr(0, colon);
        const std::string_view value = trim(field.substr(colon + 1));
        if (iequals(name, "content-length")) {
            auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
            if (ec != std::errc{} || p != value.data() + value.size() || length > kBodyLimit) {
                return parse_result::bad;
            }
        } else if (iequals(name, "transfer-encoding")) {
            return parse_result::unsupported;
        } else if (iequals(name, "connection")) {
            if (iequals(value, "close")) {
                req.keep_alive = false;
            } else if (iequals(value, "keep-alive")) {
                req.keep_alive = true;
            }
        }
    }
    const std::size_t body_at = end + 4;
    if (in.size() - body_at < length) {
        return parse_result::incomplete;
    }
    req.body = in.substr(body_at, length);
    req.consumed = body_at + length;
    return parse_result::complete;
}

void route(const request& req, std::string& out) {
    const bool close = !req.keep_alive;
    if (req.target == "/") {
        if (req.method == "GET") {
            respond(out, 200, "OK", "Hello, World!", {}, close, req.http10);
        } else {
            respond(out, 405, "Method Not Allowed", "Method Not Allowed", "Allow: GET\r\n", close,
                    req.http10);
        }
    } else if (req.target == "/echo") {
        if (req.method == "POST") {
            respond(out, 200, "OK", req.body, {}, close, req.http10);
        } else {
            respond(out, 405, "Method Not Allowed", "Method Not Allowed", "Allow: POST\r\n", close,
                    req.http10);
        }
    } else {
        respond(out, 404, "Not Found", "Not Found", {}, close, req.http10);
    }
}

// Serves one connection until the peer closes, an error, or a request that ends it.
template <class Stream>
asio::awaitable<void> serve_stream(Stream& sock) {
    std::error_code ec;
    std::string in;   // received, not yet answered
    std::string out;  // responses to write in one go
    std::size_t filled = 0;
    for (;;) {
        if (in.size() < filled + kReadSize) {
            in.resize(filled + kReadSize);
        }
        const std::size_t n =
            co_await sock.async_read_some(asio::buffer(in.data() + filled, in.size() - filled),
                                          asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
            co_return;
        }
        filled += n;
        std::size_t at = 0;
        bool close = false;
        out.clear();
        while (!close) {
            request req;
            const auto r = parse(std::string_view(in.data() + at, filled - at), req);
            if (r == parse_result::incomplete) {
                break;
            }
            if (r == parse_result::bad) {
                respond(out, 400, "Bad Request", "Bad Request", {}, true);
                close = true;
            } else if (r == parse_result::unsupported) {
                respond(out, 501, "Not Implemented", "Not Implemented", {}, true);
                close = true;
            } else {
                route(req, out);
                close = !req.keep_alive;
                at += req.consumed;
            }
        }
        if (!out.empty()) {
            co_await asio::async_write(sock, asio::buffer(out),
                                       asio::redirect_error(asio::use_awaitable, ec));
            if (ec || close) {
                co_return;
            }
        }
        // Keep the unanswered tail at the front of the buffer.
        if (at > 0) {
            std::copy(in.begin() + static_cast<std::ptrdiff_t>(at),
                      in.begin() + static_cast<std::ptrdiff_t>(filled), in.begin());
            filled -= at;
        }
    }
}

// The TLS context of --cert/--key, shared by every thread (set before any thread runs);
// null: plain HTTP.
asio::ssl::context* tls_context = nullptr;

asio::awaitable<void> serve_http(tcp::socket sock) {
    std::error_code ec;
    sock.set_option(tcp::no_delay(true), ec);
    if (tls_context == nullptr) {
        co_await serve_stream(sock);
        co_return;
    }
    asio::ssl::stream<tcp::socket> tls(std::move(sock), *tls_context);
    co_await tls.async_handshake(asio::ssl::stream_base::server,
                                 asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) {
        co_await serve_stream(tls);
    }
}

}  // namespace

int main(int argc, char** argv) {
    constexpr int kDeferAcceptSeconds = 1;  // weft's default
    const peer::Args args = peer::parse_args("asio-http", argc, argv);
    asio::ssl::context ctx(asio::ssl::context::tls_server);
    if (!args.cert.empty()) {
        try {
            ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                            asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                            asio::ssl::context::no_tlsv1_1);
            ctx.use_certificate_chain_file(args.cert);
            ctx.use_private_key_file(args.key, asio::ssl::context::pem);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "asio-http: %s: %s\n", args.cert.c_str(), e.what());
            return 1;
        }
        tls_context = &ctx;
    }
    return peer::run("asio-http", args, serve_http, kDeferAcceptSeconds);
}
