// event_gateway: the transactional outbox and inbox end to end. `POST /orders` (weft::http)
// writes an order row and its `order_created` event in one SQLite transaction; a relay
// publishes the staged events to the bus; a consumer handles them through the inbox (the
// event's id recorded in the consumer's database in the same transaction as its own write) and
// prints what it handled.
//
//   event_gateway [--port N] [--db PATH] [--bus memory|nats] [--nats-url URL]
//   event_gateway --self-check [--bus memory|nats] [--nats-url URL]
//
// With --port it serves until SIGINT or SIGTERM:
//   curl -d '{"item": "tea", "qty": 2}' localhost:8080/orders    -> 201 {"id": 1}
// The order table and the outbox live in PATH (default event_gateway.db), the consumer's inbox
// and what it handled in PATH-consumer.db. --bus memory (the default) is weft's in-process
// broker; --bus nats publishes to NATS JetStream (file storage), where an event survives a
// crash of this process between its ack and the outbox's delete (and is then published again
// with the same id: JetStream drops it, the inbox would skip it).
// GET /metrics serves the server's, the runtime's and the outbox's metrics (Prometheus text).
// Traces: with OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (or OTEL_EXPORTER_OTLP_ENDPOINT) set, each
// order is one trace sent to that OpenTelemetry collector over OTLP/HTTP: the server span
// "POST /orders", the relay's "publish orders" and the consumer's "process orders" (the
// request's context travels in the event's traceparent header); unset, traces are off.
// --self-check (what CTest runs, also without arguments) uses temporary files and a free port,
// posts orders with weft's HTTP client and exits 0 once every order was handled exactly once,
// the outbox is empty, /metrics parses and each order made its three spans in one trace (kept
// in memory: no collector needed).

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <weft/bus/memory_broker.hpp>
#include <weft/bus/outbox_collector.hpp>
#include <weft/bus/publisher.hpp>
#include <weft/bus/sqlite_inbox.hpp>
#include <weft/bus/sqlite_outbox.hpp>
#include <weft/bus/sqlite_txn.hpp>
#include <weft/bus/subscriber.hpp>
#include <weft/bus/trace_headers.hpp>
#include <weft/http.hpp>
#include <weft/weft.hpp>

#include "observability.hpp"
#if defined(WEFT_EXAMPLE_NATS)
#include <weft/bus/nats_backend.hpp>
#endif

namespace {

namespace http = weft::http;
namespace bus = weft::bus;
using namespace std::chrono_literals;

struct config {
    std::optional<unsigned> port;
    std::string db = "event_gateway.db";
    std::string bus = "memory";
    std::string nats_url = "nats://127.0.0.1:4222";
    bool self_check = false;
};

auto exec(sqlite3* db, const char* sql) -> bool {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
        std::fprintf(stderr, "event_gateway: %s: %s\n", sql, err != nullptr ? err : "?");
        sqlite3_free(err);
        return false;
    }
    return true;
}

auto open_db(const std::string& path) -> sqlite3* {
    sqlite3* db = nullptr;
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
        throw std::runtime_error("event_gateway: cannot open " + path);
    }
    sqlite3_busy_timeout(db, 5'000);
    exec(db, "PRAGMA journal_mode=WAL");
    return db;
}

auto count(sqlite3* db, const char* sql) -> long {
    sqlite3_stmt* st = nullptr;
    long n = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        n = static_cast<long>(sqlite3_column_int64(st, 0));
    }
    sqlite3_finalize(st);
    return n;
}

/// The gateway: the order database (its own connection, one transaction at a time), the
/// outbox on the same file, and the consumer's database with its inbox. Spans go to `tr`
/// (none when null).
class gateway {
public:
    gateway(const std::string& path, weft::trace::tracer* tr)
        : tracer_(tr),
          outbox_(path, {.relay = {.tracer = tr}}),
          app_(open_db(path)),
          consumer_(open_db(path + "-consumer.db")),
          inbox_(consumer_) {
        exec(app_,
             "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY AUTOINCREMENT, "
             "body TEXT NOT NULL, created_ms INTEGER NOT NULL)");
        exec(consumer_,
             "CREATE TABLE IF NOT EXISTS handled (event_id TEXT PRIMARY KEY, order_key TEXT NOT "
             "NULL, payload TEXT NOT NULL)");
    }
    gateway(const gateway&) = delete;
    auto operator=(const gateway&) -> gateway& = delete;
    ~gateway() {
        sqlite3_close_v2(app_);
        sqlite3_close_v2(consumer_);
    }

    auto outbox() -> bus::sqlite_outbox& { return outbox_; }
    [[nodiscard]] auto tracer() const noexcept -> weft::trace::tracer* { return tracer_; }
    [[nodiscard]] auto handled() const noexcept -> long { return handled_.load(); }
    [[nodiscard]] auto duplicates() const noexcept -> long { return duplicates_.load(); }

    /// POST /orders: the order row and its event in one transaction (blocking; run on the
    /// blocking pool). Returns the order's id, or 0 on a database error.
    /// The event carries `ctx` (the request's span) in its traceparent header.
    auto place_order(const std::string& body, const weft::trace::context& ctx) -> std::int64_t {
        std::lock_guard lock(app_mu_);
        bus::sqlite_txn txn{app_};
        sqlite3_stmt* ins = nullptr;
        sqlite3_prepare_v2(app_, "INSERT INTO orders (body, created_ms) VALUES (?, ?)", -1, &ins,
                           nullptr);
        sqlite3_bind_text(ins, 1, body.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(ins, 2,
                           std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count());
        const int rc = sqlite3_step(ins);
        sqlite3_finalize(ins);
        if (rc != SQLITE_DONE) {
            return 0;  // txn rolls back
        }
        const std::int64_t id = sqlite3_last_insert_rowid(app_);
        bus::envelope env;
        env.topic = "orders";
        env.key = "order-" + std::to_string(id);
        env.type = "order_created";
        env.payload = R"({"id": )" + std::to_string(id) + R"(, "order": )" + body + "}";
        bus::set_trace_context(env, ctx);
        if (!outbox_.stage(txn, std::move(env))) {
            return 0;
        }
        if (!txn.commit()) {  // the relay is woken on success
            return 0;
        }
        return id;
    }

    /// The consumer's side of one delivery (blocking): recorded and handled once per id.
    void handle(bus::delivery d) {
        // A child of the request that staged the event; ends when this returns.
        auto span = bus::start_process_span(tracer_, d.message(), "order-log");
        std::lock_guard lock(consumer_mu_);
        bus::sqlite_txn txn{consumer_};
        auto r = inbox_.handle(
            txn, d, [](bus::sqlite_txn& t, const bus::envelope& e) -> weft::result<void> {
                sqlite3_stmt* ins = nullptr;
                sqlite3_prepare_v2(t.db(), "INSERT INTO handled VALUES (?, ?, ?)", -1, &ins,
                                   nullptr);
                const std::string id = e.id.to_string();
                sqlite3_bind_text(ins, 1, id.c_str(), -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(ins, 2, e.key.c_str(), -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(ins, 3, e.payload.c_str(), -1, SQLITE_TRANSIENT);
                const int rc = sqlite3_step(ins);
                sqlite3_finalize(ins);
                if (rc != SQLITE_DONE) {
                    return std::make_error_code(std::errc::io_error);
                }
                return {};
            });
        if (!r) {
            (void)d.nack(100ms);
            return;
        }
        if (!txn.commit()) {  // not acked: delivered again
            return;
        }
        if (*r == bus::inbox_outcome::duplicate) {
            duplicates_.fetch_add(1);
            std::printf("consumer: %s %s already handled, skipped\n", d.message().type.c_str(),
                        d.message().key.c_str());
        } else {
            handled_.fetch_add(1);
            std::printf("consumer: handled %s %s %s\n", d.message().type.c_str(),
                        d.message().key.c_str(), d.message().payload.c_str());
        }
        std::fflush(stdout);
    }

    /// The consumer loop: until the subscription is closed or the task stopped.
    auto consume(bus::subscription& s) -> weft::task<void> {
        for (;;) {
            auto d = co_await s.next();
            if (!d) {
                co_return;
            }
            auto job = [this, dv = std::move(*d)]() mutable { handle(std::move(dv)); };
            (void)co_await weft::spawn_blocking(std::move(job));
        }
    }

    void add_routes(http::server& srv) {
        srv.route(http::method::post, "/orders",
                  [this](http::request& req) -> weft::task<http::response> {
                      auto body = co_await req.body().read_all();
                      if (!body || body->empty()) {
                          co_return http::response::text("an order needs a body\n", 400);
                      }
                      auto job = [this, b = std::move(*body), ctx = req.trace_context()] {
                          return place_order(b, ctx);
                      };
                      auto id = co_await weft::spawn_blocking(std::move(job));
                      if (!id || *id == 0) {
                          co_return http::response::text("could not store the order\n", 500);
                      }
                      co_return http::response::text(R"({"id": )" + std::to_string(*id) + "}\n",
                                                     201, "application/json");
                  });
    }

    [[nodiscard]] auto orders() -> long {
        std::lock_guard lock(app_mu_);
        return count(app_, "SELECT count(*) FROM orders");
    }
    [[nodiscard]] auto handled_rows() -> long {
        std::lock_guard lock(consumer_mu_);
        return count(consumer_, "SELECT count(*) FROM handled");
    }

private:
    weft::trace::tracer* tracer_;
    bus::sqlite_outbox outbox_;
    sqlite3* app_;
    sqlite3* consumer_;
    bus::sqlite_inbox inbox_;
    std::mutex app_mu_;
    std::mutex consumer_mu_;
    std::atomic<long> handled_{0};
    std::atomic<long> duplicates_{0};
};

/// Runs `body(gw, srv)` with the relay and the consumer around it.
auto run(const config& cfg,
         bus::backend& broker,
         gateway& gw,
         weft::metrics::registry reg,
         example::traces* traces,
         std::function<weft::task<int>(http::server&)> body) -> weft::task<int> {
    bus::publisher pub{broker, {.max_pending = 256}};
    bus::subscriber sub{broker, {.ack_wait = 5s}};
    auto s = co_await sub.subscribe("orders", "order-log");
    if (!s) {
        std::fprintf(stderr, "event_gateway: subscribe: %s\n", s.error().message().c_str());
        co_return 1;
    }
    // GET /metrics: the server's requests, the runtime and the outbox (weft_outbox_*).
    http::server srv{{.metrics = reg, .tracer = gw.tracer()}};
    gw.add_routes(srv);
    srv.route(http::method::get, "/metrics", http::metrics_handler(reg));
    const auto outbox_metrics =
        bus::collect_outbox(reg, "orders", [&gw] { return gw.outbox().metrics(); });
    int status = 0;
    co_await weft::with_scope([&](weft::scope& sc) -> weft::task<void> {
        if (traces != nullptr) {
            sc.spawn(traces->exporter.run());
        }
        sc.spawn([&]() -> weft::task<void> {
            auto r = co_await gw.outbox().run_relay(pub);
            if (!r) {
                std::fprintf(stderr, "event_gateway: relay: %s\n", r.error().message().c_str());
            }
        });
        sc.spawn(gw.consume(*s));
        status = co_await body(srv);
        gw.outbox().stop_relay();
        s->close();
        if (traces != nullptr) {
            traces->exporter.stop();  // sends the spans left, then run() returns
        }
    });
    (void)co_await pub.close();
    (void)cfg;
    co_return status;
}

auto serve(unsigned port, http::server& srv) -> weft::task<int> {
    const auto addr = weft::socket_address::parse("0.0.0.0", static_cast<std::uint16_t>(port));
    if (!addr) {
        co_return 2;
    }
    int status = 0;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn([&]() -> weft::task<void> {
            auto r = co_await srv.listen(*addr);
            if (!r) {
                std::fprintf(stderr, "event_gateway: %s\n", r.error().message().c_str());
                status = 1;
                s.request_stop();
            }
        });
        std::printf("event_gateway: POST http://127.0.0.1:%u/orders\n", port);
        std::fflush(stdout);
        auto sig = co_await weft::wait_for_signal({SIGINT, SIGTERM});
        if (sig) {
            co_await srv.shutdown();
        }
    });
    co_return status;
}

/// Each order's trace: the server span "POST /orders" (one more for the empty order, refused),
/// and in its trace the relay's "publish orders" and the consumer's "process orders". The last
/// spans may end just after the order was counted handled: they are awaited (bounded).
auto one_trace_per_order(weft::trace::tracer& tr, int orders) -> weft::task<bool> {
    std::vector<weft::trace::span_data> spans;
    auto complete = [&] {
        std::vector<weft::trace::trace_id> requests;
        for (const auto& sp : spans) {
            if (sp.name == "POST /orders") {
                requests.push_back(sp.trace);
            }
        }
        auto in_a_request = [&](std::string_view name) {
            int n = 0;
            for (const auto& sp : spans) {
                n += sp.name == name &&
                             std::find(requests.begin(), requests.end(), sp.trace) != requests.end()
                         ? 1
                         : 0;
            }
            return n;
        };
        return std::ssize(requests) == orders + 1 && in_a_request("publish orders") == orders &&
               in_a_request("process orders") == orders;
    };
    for (int waited = 0; waited < 10'000; waited += 5) {
        (void)tr.take(spans, 10'000);
        if (complete()) {
            co_return true;
        }
        (void)co_await weft::sleep_for(5ms);
    }
    co_return false;
}

auto self_check(gateway& gw, http::server& srv) -> weft::task<int> {
    auto l = weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value());
    if (!l) {
        co_return 1;
    }
    const auto addr = l->local_address().value();
    constexpr int orders = 20;
    int failures = 0;
    auto fail = [&](const char* what) {
        std::fprintf(stderr, "event_gateway self-check: %s\n", what);
        ++failures;
    };
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(srv.serve(*l));
        auto c = (co_await http::client::connect(addr)).value();
        for (int i = 0; i < orders; ++i) {
            const std::string body = R"({"item": "tea", "qty": )" + std::to_string(i + 1) + "}";
            auto r = co_await c.request("POST", "/orders", body);
            if (!r || r->status != 201) {
                fail("POST /orders was not answered 201");
            }
        }
        auto empty = co_await c.request("POST", "/orders", "");
        if (!empty || empty->status != 400) {
            fail("an empty order was not refused with 400");
        }
        // Every order handled once: the consumer counts; bounded by a generous limit so a
        // broken gateway fails here instead of hanging (CTest's timeout is the backstop).
        for (int waited = 0; gw.handled() < orders && waited < 30'000; waited += 5) {
            (void)co_await weft::sleep_for(5ms);
        }
        auto m = co_await c.get("/metrics");
        if (!m || m->status != 200 ||
            m->body.find("weft_outbox_published_total{outbox=\"orders\"} " +
                         std::to_string(orders) + "\n") == std::string::npos) {
            fail("GET /metrics does not show every order published");
        }
        if (!m || !example::is_prometheus_text(m->body)) {
            fail("GET /metrics is not Prometheus text");
        }
        co_await srv.shutdown();
    });
    if (gw.handled() != orders) {
        fail("not every order was handled");
    }
    if (gw.orders() != orders) {
        fail("the order table does not hold every order");
    }
    if (gw.handled_rows() != orders) {
        fail("the consumer's table does not hold each order exactly once");
    }
    auto pending = gw.outbox().pending_rows();
    if (!pending || *pending != 0) {
        fail("the outbox is not empty");
    }
    if (!co_await one_trace_per_order(*gw.tracer(), orders)) {
        fail("not every order made its spans (request, publish, process) in one trace");
    }
    std::printf("event_gateway: %d orders, %ld handled, %ld duplicates skipped; self-check %s\n",
                orders, gw.handled(), gw.duplicates(), failures == 0 ? "passed" : "FAILED");
    co_return failures == 0 ? 0 : 1;
}

auto make_broker(const config& cfg) -> std::unique_ptr<bus::backend> {
    if (cfg.bus == "nats") {
#if defined(WEFT_EXAMPLE_NATS)
        bus::nats_backend_options o;
        o.url = cfg.nats_url;
        o.topics = {"orders"};
        return std::make_unique<bus::nats_backend>(std::move(o));
#else
        throw std::runtime_error("event_gateway: built without NATS (WEFT_BUS_NATS=OFF)");
#endif
    }
    return std::make_unique<bus::memory_broker>();
}

}  // namespace

auto main(int argc, char** argv) -> int {
    config cfg;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--port" && i + 1 < argc) {
            cfg.port = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
        } else if (a == "--db" && i + 1 < argc) {
            cfg.db = argv[++i];
        } else if (a == "--bus" && i + 1 < argc) {
            cfg.bus = argv[++i];
        } else if (a == "--nats-url" && i + 1 < argc) {
            cfg.nats_url = argv[++i];
        } else if (a == "--self-check") {
            cfg.self_check = true;
        } else {
            std::fprintf(stderr,
                         "usage: event_gateway [--port N] [--db PATH] [--bus memory|nats] "
                         "[--nats-url URL] [--self-check]\n");
            return 2;
        }
    }
    if (cfg.bus != "memory" && cfg.bus != "nats") {
        std::fprintf(stderr, "event_gateway: --bus memory|nats\n");
        return 2;
    }
    cfg.self_check = cfg.self_check || !cfg.port;
    std::filesystem::path dir;
    if (cfg.self_check) {
        dir = std::filesystem::temp_directory_path() /
              ("weft-event-gateway-" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir);
        cfg.db = (dir / "orders.db").string();
    }
    int status = 1;
    try {
        auto broker = make_broker(cfg);  // NATS connects here: before the runtime starts
        // The self-check keeps its spans in memory; serving, they go to the collector, if any.
        weft::trace::tracer local{{.service_name = "event_gateway"}};
        const auto traces =
            cfg.self_check ? nullptr : example::traces::from_environment("event_gateway");
        gateway gw{cfg.db, cfg.self_check ? &local : (traces ? &traces->tracer : nullptr)};
        weft::runtime rt{{.workers = 2}};
        weft::metrics::registry reg;
        const auto runtime_metrics = weft::metrics::collect_runtime(reg, rt);
        status = rt.block_on(
            run(cfg, *broker, gw, reg, traces.get(), [&](http::server& srv) -> weft::task<int> {
                if (cfg.self_check) {
                    return self_check(gw, srv);
                }
                return serve(*cfg.port, srv);
            }));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        status = 1;
    }
    if (cfg.self_check) {
        std::filesystem::remove_all(dir);
    }
    return status;
}
