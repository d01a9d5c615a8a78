// ws_chat: a WebSocket chat room. Every text message a member sends goes to every member
// (the sender too), in the order the room received them.
//
//   ws_chat [--port N]
//
// With --port (0: any free port) it prints "listening on HOST:PORT" and serves ws://HOST:PORT/chat
// until SIGINT or SIGTERM, then drains: every member gets close 1001. Without --port it checks
// itself: three members join, each says hello, and each must read all three greetings; then it
// exits 0. WEFT_IO_BACKEND=io_uring|epoll picks the backend.
//
// Each member has an inbox (a bounded channel) and a writer task that sends from it: a broadcast
// never waits for a slow member's socket, and a member whose inbox is full misses messages
// instead of holding the room up.

#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <weft/http.hpp>
#include <weft/weft.hpp>

namespace {

namespace http = weft::http;

class room {
public:
    using inbox = weft::channel<std::string>;

    auto join() -> std::pair<int, std::shared_ptr<inbox>> {
        std::lock_guard lock(mu_);
        auto box = std::make_shared<inbox>(256);
        const int id = next_++;
        members_.emplace(id, box);
        return {id, box};
    }

    void leave(int id) {
        std::lock_guard lock(mu_);
        if (auto it = members_.find(id); it != members_.end()) {
            it->second->close();  // ends the member's writer
            members_.erase(it);
        }
    }

    void broadcast(const std::string& text) {
        std::lock_guard lock(mu_);
        for (auto& [id, box] : members_) {
            (void)box->try_send(text);  // full: this member misses it
        }
    }

private:
    std::mutex mu_;
    int next_ = 0;
    std::map<int, std::shared_ptr<inbox>> members_;
};

auto member(room& r, http::websocket& ws) -> weft::task<void> {
    auto [id, box] = r.join();
    (void)box->try_send("welcome");  // first in the inbox: the member knows it is in the room
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn([&ws, box = box]() -> weft::task<void> {
            for (;;) {
                auto text = co_await box->recv();
                if (!text) {
                    co_return;  // left the room
                }
                auto sent = co_await ws.send(*text);
                if (!sent) {
                    co_return;
                }
            }
        });
        for (;;) {
            auto m = co_await ws.receive();
            if (!m) {
                break;  // closed by the member, or failed
            }
            if (m->text) {
                r.broadcast(m->data);
            }
        }
        r.leave(id);
    });
}

void add_routes(http::server& srv, room& r) {
    srv.websocket("/chat", [&r](http::websocket& ws) { return member(r, ws); });
}

auto serve_until_signal(unsigned port) -> weft::task<int> {
    room r;
    http::server srv{{.on_listening = [](const weft::socket_address& a) {
        std::printf("listening on %s\n", a.to_string().c_str());
        std::fflush(stdout);
    }}};
    add_routes(srv, r);
    const auto addr = weft::socket_address::parse("0.0.0.0", static_cast<std::uint16_t>(port));
    if (!addr) {
        std::fprintf(stderr, "ws_chat: bad port %u\n", port);
        co_return 2;
    }
    int status = 0;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn([&]() -> weft::task<void> {
            auto res = co_await srv.listen(*addr);
            if (!res) {
                std::fprintf(stderr, "ws_chat: %s\n", res.error().message().c_str());
                status = 1;
                s.request_stop();
            }
        });
        auto sig = co_await weft::wait_for_signal({SIGINT, SIGTERM});
        if (sig) {
            co_await srv.shutdown();  // every member gets close 1001
        }
    });
    co_return status;
}

auto self_check() -> weft::task<int> {
    room r;
    http::server srv;
    add_routes(srv, r);
    auto l = weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value());
    if (!l) {
        std::fprintf(stderr, "ws_chat: bind: %s\n", l.error().message().c_str());
        co_return 1;
    }
    const auto addr = l->local_address().value();
    constexpr int members = 3;
    int heard = 0;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(srv.serve(*l));
        std::vector<http::websocket> clients;
        for (int i = 0; i < members; ++i) {
            clients.push_back(
                (co_await http::websocket::connect(addr, "localhost", "/chat")).value());
            auto welcome = co_await clients.back().receive();  // in the room from here
            if (!welcome || welcome->data != "welcome") {
                std::fprintf(stderr, "ws_chat self-check: no welcome\n");
                co_return;
            }
        }
        for (int i = 0; i < members; ++i) {
            (void)co_await clients[i].send("hello from " + std::to_string(i));
        }
        for (auto& c : clients) {
            for (int i = 0; i < members; ++i) {
                auto m = co_await c.receive();
                heard += m && m->data.starts_with("hello from ") ? 1 : 0;
            }
        }
        for (auto& c : clients) {
            (void)co_await c.close();
        }
        co_await srv.shutdown();
    });
    if (heard != members * members) {
        std::fprintf(stderr, "ws_chat self-check: heard %d of %d greetings\n", heard,
                     members * members);
        co_return 1;
    }
    std::printf("ws_chat: %d members heard all %d greetings\n", members, members);
    co_return 0;
}

}  // namespace

auto main(int argc, char** argv) -> int {
    std::optional<unsigned> port;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--port" && i + 1 < argc) {
            port = static_cast<unsigned>(std::stoul(argv[++i]));
        } else {
            std::fprintf(stderr, "usage: ws_chat [--port N]\n");
            return 2;
        }
    }
    weft::runtime rt{weft::io_runtime_options()};
    return port ? rt.block_on(serve_until_signal(*port)) : rt.block_on(self_check());
}
