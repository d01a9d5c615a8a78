#include "websocket_deflate.hpp"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <new>
#include <stdexcept>

namespace weft::http::detail {

namespace {

auto trim(std::string_view s) -> std::string_view {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

auto iequals(std::string_view a, std::string_view b) -> bool {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               auto low = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
               return low(x) == low(y);
           });
}

// Calls fn(piece) for each piece of `s` between `sep`s, trimmed.
template <typename Fn>
void each_piece(std::string_view s, char sep, Fn fn) {
    for (;;) {
        const auto at = s.find(sep);
        fn(trim(s.substr(0, at)));
        if (at == std::string_view::npos) {
            return;
        }
        s.remove_prefix(at + 1);
    }
}

// A window size value (RFC 7692 7.1.2: 1*DIGIT, 8..15, no leading zero), quoted or not.
auto window_bits(std::string_view v) -> std::optional<int> {
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
        v = v.substr(1, v.size() - 2);
    }
    if (v == "8" || v == "9") {
        return v[0] - '0';
    }
    if (v.size() == 2 && v[0] == '1' && v[1] >= '0' && v[1] <= '5') {
        return 10 + (v[1] - '0');
    }
    return std::nullopt;
}

auto clamp_send_bits(int b) -> int { return std::clamp(b, 9, 15); }
auto clamp_receive_bits(int b) -> int { return std::clamp(b, 8, 15); }

}  // namespace

auto parse_deflate(std::string_view element, deflate_params& out) -> deflate_parse {
    out = {};
    bool first = true;
    bool named = false;
    bool valid = true;
    each_piece(element, ';', [&](std::string_view piece) {
        if (first) {
            first = false;
            named = iequals(piece, "permessage-deflate");
            return;
        }
        if (!named || !valid) {
            return;
        }
        const auto eq = piece.find('=');
        const auto name = trim(piece.substr(0, eq));
        const bool has_value = eq != std::string_view::npos;
        const auto value = has_value ? trim(piece.substr(eq + 1)) : std::string_view{};
        if (iequals(name, "server_no_context_takeover")) {
            valid = !has_value && !out.server_no_context_takeover;
            out.server_no_context_takeover = true;
        } else if (iequals(name, "client_no_context_takeover")) {
            valid = !has_value && !out.client_no_context_takeover;
            out.client_no_context_takeover = true;
        } else if (iequals(name, "server_max_window_bits")) {
            const auto bits = window_bits(value);
            valid = bits.has_value() && !out.server_max_window_bits;
            out.server_max_window_bits = bits.value_or(0);
        } else if (iequals(name, "client_max_window_bits")) {
            const auto bits = window_bits(value);
            valid = !out.client_max_window_bits && (!has_value || bits.has_value());
            out.client_max_window_bits = true;
            out.client_max_window_bits_value = bits;
        } else {
            valid = false;
        }
    });
    if (!named) {
        return deflate_parse::other_extension;
    }
    return valid ? deflate_parse::ok : deflate_parse::invalid;
}

auto answer_deflate_offers(const websocket_deflate_options& o, std::string_view offers)
    -> std::optional<std::string> {
    std::optional<std::string> answer;
    each_piece(offers, ',', [&](std::string_view element) {
        deflate_params p;
        if (answer || parse_deflate(element, p) != deflate_parse::ok) {
            return;
        }
        const int send_bits =
            std::min(clamp_send_bits(o.send_window_bits), p.server_max_window_bits.value_or(15));
        if (send_bits < 9) {
            return;  // a raw deflate window of 256 bytes: zlib cannot, so this offer is declined
        }
        std::string a = "permessage-deflate";
        // Both no_context_takeover parameters may be answered whether offered or not (RFC 7692
        // 7.1.1); the client's is also taken when it offered it as a hint.
        if (!o.send_context_takeover || p.server_no_context_takeover) {
            a += "; server_no_context_takeover";
        }
        if (!o.receive_context_takeover || p.client_no_context_takeover) {
            a += "; client_no_context_takeover";
        }
        // A smaller window than announced is always safe for the peer to inflate, so
        // server_max_window_bits is answered only when it was offered (7.1.2.1).
        if (p.server_max_window_bits) {
            a += "; server_max_window_bits=" + std::to_string(send_bits);
        }
        // client_max_window_bits may only be answered when offered (7.1.2.2).
        if (p.client_max_window_bits) {
            const int receive_bits = std::min(clamp_receive_bits(o.receive_window_bits),
                                              p.client_max_window_bits_value.value_or(15));
            if (receive_bits < 15 || p.client_max_window_bits_value) {
                a += "; client_max_window_bits=" + std::to_string(receive_bits);
            }
        }
        answer = std::move(a);
    });
    return answer;
}

auto server_agreement(const websocket_deflate_options& o, std::string_view answer)
    -> deflate_agreement {
    deflate_params p;
    (void)parse_deflate(answer, p);
    deflate_agreement a;
    a.send_takeover = !p.server_no_context_takeover;
    a.receive_takeover = !p.client_no_context_takeover;
    a.send_bits =
        std::min(clamp_send_bits(o.send_window_bits), p.server_max_window_bits.value_or(15));
    a.receive_bits = p.client_max_window_bits_value.value_or(15);
    a.mem_level = std::clamp(o.mem_level, 1, 9);
    return a;
}

auto deflate_offer(const websocket_deflate_options& o) -> std::string {
    std::string offer = "permessage-deflate";
    if (!o.send_context_takeover) {
        offer += "; client_no_context_takeover";
    }
    if (!o.receive_context_takeover) {
        offer += "; server_no_context_takeover";
    }
    const int receive_bits = clamp_receive_bits(o.receive_window_bits);
    if (receive_bits < 15) {
        offer += "; server_max_window_bits=" + std::to_string(receive_bits);
    }
    return offer + "; client_max_window_bits";  // the server may limit our window
}

auto client_agreement(const websocket_deflate_options& o, std::string_view answer)
    -> std::optional<deflate_agreement> {
    int elements = 0;
    bool ok = true;
    deflate_params p;
    each_piece(answer, ',', [&](std::string_view element) {
        ++elements;
        ok = ok && parse_deflate(element, p) == deflate_parse::ok;
    });
    if (!ok || elements != 1) {
        return std::nullopt;
    }
    const int receive_bits = clamp_receive_bits(o.receive_window_bits);
    const bool asked_server_no_takeover = !o.receive_context_takeover;
    if (asked_server_no_takeover && !p.server_no_context_takeover) {
        return std::nullopt;  // 7.1.1.1: the server must accept it or decline the offer
    }
    if (receive_bits < 15 &&
        (!p.server_max_window_bits || *p.server_max_window_bits > receive_bits)) {
        return std::nullopt;  // 7.1.2.1: the same value or a smaller one
    }
    if (p.client_max_window_bits && !p.client_max_window_bits_value) {
        return std::nullopt;  // 7.1.2.2: a response names the value
    }
    deflate_agreement a;
    a.send_bits =
        std::min(clamp_send_bits(o.send_window_bits), p.client_max_window_bits_value.value_or(15));
    if (a.send_bits < 9) {
        return std::nullopt;  // zlib has no raw 8-bit window
    }
    a.send_takeover = o.send_context_takeover && !p.client_no_context_takeover;
    a.receive_takeover = !p.server_no_context_takeover;
    a.receive_bits = p.server_max_window_bits.value_or(15);
    a.mem_level = std::clamp(o.mem_level, 1, 9);
    return a;
}

// ---- the zlib streams --------------------------------------------------------------------

struct ws_deflate::zstate {
    z_stream s{};
    bool deflating = false;
    int bits = 0;
    int mem_level = 0;
};

void ws_deflate::zstate_free::operator()(zstate* z) const noexcept {
    if (z->deflating) {
        (void)deflateEnd(&z->s);
    } else {
        (void)inflateEnd(&z->s);
    }
    delete z;
}

namespace {

using zstate_ptr = std::unique_ptr<ws_deflate::zstate, ws_deflate::zstate_free>;

auto make_deflater(int bits, int mem_level) -> zstate_ptr {
    zstate_ptr z{new ws_deflate::zstate};
    z->deflating = true;
    z->bits = bits;
    z->mem_level = mem_level;
    if (deflateInit2(&z->s, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -bits, mem_level,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
        delete z.release();  // zlib freed what it had: nothing to end
        throw std::bad_alloc();
    }
    return z;
}

auto make_inflater(int bits) -> zstate_ptr {
    zstate_ptr z{new ws_deflate::zstate};
    z->bits = bits;
    if (inflateInit2(&z->s, -bits) != Z_OK) {
        delete z.release();
        throw std::bad_alloc();
    }
    return z;
}

// The states of this thread, for the directions without context takeover: a message is
// compressed or inflated whole, without a suspension, so one state per thread serves every
// connection the thread runs. Created by the first message that needs one; the compressor is
// made again when a connection agreed on another window or memLevel.
struct thread_states {
    zstate_ptr tx;
    zstate_ptr rx;
};
thread_local thread_states this_thread;

constexpr std::string_view sync_tail{"\x00\x00\xff\xff", 4};

}  // namespace

ws_deflate::ws_deflate(const deflate_agreement& a) noexcept : a_(a) {}
ws_deflate::~ws_deflate() = default;

void ws_deflate::compress(std::string_view in, std::string& out) {
    out.clear();
    if (in.empty()) {
        out.push_back('\0');  // an empty stored block (RFC 7692 7.2.3.6)
        return;
    }
    zstate* z = nullptr;
    if (a_.send_takeover) {
        if (!tx_) {
            tx_ = make_deflater(a_.send_bits, a_.mem_level);
        }
        z = tx_.get();
    } else {
        zstate_ptr& t = this_thread.tx;
        if (!t || t->bits != a_.send_bits || t->mem_level != a_.mem_level) {
            t.reset();
            t = make_deflater(a_.send_bits, a_.mem_level);
        }
        z = t.get();
    }
    out.resize(in.size() / 2 + 64);
    std::size_t used = 0;
    std::size_t pos = 0;
    for (;;) {
        const std::size_t piece = std::min<std::size_t>(in.size() - pos, 1U << 30);
        const int flush = pos + piece == in.size() ? Z_SYNC_FLUSH : Z_NO_FLUSH;
        z->s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + pos));
        z->s.avail_in = static_cast<uInt>(piece);
        do {
            if (used == out.size()) {
                out.resize(out.size() * 2);
            }
            const auto room = static_cast<uInt>(std::min<std::size_t>(out.size() - used, UINT_MAX));
            z->s.next_out = reinterpret_cast<Bytef*>(out.data() + used);
            z->s.avail_out = room;
            const int rc = deflate(&z->s, flush);
            if (rc != Z_OK && rc != Z_BUF_ERROR) {
                throw std::logic_error("weft::http::websocket: deflate failed");
            }
            used += room - z->s.avail_out;
        } while (z->s.avail_out == 0);
        pos += piece;
        if (flush == Z_SYNC_FLUSH) {
            break;
        }
    }
    out.resize(used);
    if (out.ends_with(sync_tail)) {
        out.resize(used - sync_tail.size());
    }
    if (!a_.send_takeover) {
        (void)deflateReset(&z->s);
    }
}

auto ws_deflate::decompress(std::string_view in, std::string& out, std::size_t limit) -> status {
    out.clear();
    if (in.empty()) {
        return status::ok;  // an empty message: the tail alone is not a deflate block
    }
    zstate* z = nullptr;
    if (a_.receive_takeover) {
        if (!rx_) {
            // A raw window of 8 bits may come from a zlib that makes it 9: inflate with 9.
            rx_ = make_inflater(std::max(a_.receive_bits, 9));
        }
        z = rx_.get();
    } else {
        if (!this_thread.rx) {
            this_thread.rx = make_inflater(15);
        }
        z = this_thread.rx.get();
    }
    const std::size_t cap = limit >= SIZE_MAX - 1 ? SIZE_MAX - 1 : limit + 1;
    constexpr std::size_t chunk = 16 * 1024;
    status st = status::ok;
    bool ended = false;
    for (const std::string_view piece : {in, sync_tail}) {
        std::size_t pos = 0;
        while (st == status::ok && !ended) {
            if (out.size() > limit) {
                st = status::too_big;  // stopped here: the rest is never inflated
                break;
            }
            const std::size_t feed = std::min<std::size_t>(piece.size() - pos, 1U << 30);
            z->s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(piece.data() + pos));
            z->s.avail_in = static_cast<uInt>(feed);
            const std::size_t old = out.size();
            const auto room = static_cast<uInt>(std::min(chunk, cap - old));
            out.resize(old + room);
            z->s.next_out = reinterpret_cast<Bytef*>(out.data() + old);
            z->s.avail_out = room;
            const int rc = inflate(&z->s, Z_SYNC_FLUSH);
            out.resize(old + room - z->s.avail_out);
            pos += feed - z->s.avail_in;
            if (rc == Z_STREAM_END) {
                ended = true;  // a final block: what follows it is ignored
            } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
                st = status::bad;
            } else if ((pos == piece.size() && z->s.avail_out > 0) ||
                       (rc == Z_BUF_ERROR && z->s.avail_out == room && feed == z->s.avail_in)) {
                break;  // all of this piece taken and its output made (or no progress left)
            }
        }
    }
    if (st == status::ok && out.size() > limit) {
        st = status::too_big;
    }
    // A final block ends the peer's stream: its next message starts a new one. Without
    // takeover every message does; after a failure the connection is done.
    if (ended || !a_.receive_takeover || st != status::ok) {
        (void)inflateReset(&z->s);
    }
    return st;
}

}  // namespace weft::http::detail
