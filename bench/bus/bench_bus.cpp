// weft-bench's `eventbus` program: publishes N envelopes through weft::bus::publisher on one
// backend and prints the suite's figures (tools/weft-bench/README.md, "Scenario program
// protocol"):
//
//   bench_bus SCENARIO messages=N [max_pending=1024] [tasks=1000] [payload=128] [workers=2]
//             [nats_port=4222] [kafka_port=9092] [pause_ms=1500] [samples=6] [broker_pid=0]
//             [rss_slack_kb=64] [linger_ms=5] [batch_messages=0] [ack_path=0]
//             [ack_handlers=4]   (NATS: ack_path 0 = nats_ack_path::reactor_batch, 1 =
//             handler_pool with ack_handlers tasks; Kafka: kafka_backend_options' linger,
//             batch_messages, ack_path 0 = reactor_queue, 1 = background_thread)
//
// SCENARIO is <backend>_<mode>:
//   memory_async  memory_awaited  memory_deliver
//   nats_memory_async  nats_memory_awaited  nats_file_async  nats_file_awaited
//   kafka_async  kafka_awaited
//   nats_memory_paused  nats_file_paused  kafka_paused
// async: one task calls publish_async N times while another reads results() (the seed's
// shape: publish returns at once, the outcome arrives on a channel). awaited: `tasks` tasks
// share the N messages, each awaiting publish() one message at a time. deliver (memory only):
// one task publishes with publish_async, one member of a group receives and acks each message;
// the clock stops at the N-th ack.
// paused (the bounded-memory target): the broker process is stopped (SIGSTOP; its pid from
// broker_pid= or WEFT_BENCH_NATS_PID / WEFT_BENCH_KAFKA_PID, which the suite sets) before one
// task starts publish_async of N > max_pending messages while another reads results(). Once
// max_pending are in flight, `samples` readings of RSS, in_flight() and the count of
// publish_async calls that returned are taken over pause_ms; then SIGCONT, every result is
// read, flush, close. The run holds (bounded_ok = 1) when: the window filled, in_flight() ==
// max_pending at every reading, no publish_async returned while the broker was stopped, RSS grew
// by at most rss_slack_kb between the first and the last reading, all N were acknowledged
// after the resume, and threads and weft tasks after close equal those before the publisher.
// An ack read while the broker was stopped means it was not stopped: exit 3 (invalid run). A
// forked guard sends SIGCONT at pause_ms + 5 s should this program die with the broker stopped
// (publish_timeout, 5 s on NATS, is kept apart from the pause: pause_ms <= 3000).
//
// outbox_sqlite and outbox_pg are bench_outbox's (beside this program), which runs them.
//
// Each run uses a topic of its own (a JetStream stream or Kafka topic made at start, the NATS
// stream deleted at the end so the broker's memory store does not fill up over a suite), and
// publishes one untimed message first (connection, metadata, producer id). Latency is
// publish-to-ack: from the publish call to the moment the outcome is read (async) or the
// awaited publish returns. Key = the message's index, so an outcome finds its send time.
// Also printed: the scheduler's wake-ups, deferred wake-ups, parks and sleeps per 1,000
// messages (runtime::worker_metrics, all workers), and for awaited runs how many of 1,000
// publishes returned on another worker than they were called on (migrations). Kafka runs also
// say on stderr how much CPU librdkafka's broker threads took in the timed run.

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "../scenarios/scenario.hpp"
#include "bench_common.hpp"
#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/memory_broker.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/core/frame_allocator.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#if WEFT_BENCH_BUS_NATS
#include "weft/bus/nats_backend.hpp"
#endif
#if WEFT_BENCH_BUS_KAFKA
#include "weft/bus/kafka_backend.hpp"
#endif

namespace {

using clock_type = std::chrono::steady_clock;
using weft::result;
using weft::task;
using namespace weft::bus;
using weft::bench::emit;
using weft::bench::fail;
using weft::bench::bus::expect_ok;
using weft::bench::bus::stopwatch;

struct options {
    std::string scenario;
    std::string backend;  // memory | nats | kafka
    std::string storage;  // nats: memory | file
    std::string mode;     // async | awaited | deliver | paused
    std::int64_t messages = 10'000;
    std::int64_t max_pending = 1024;
    std::int64_t tasks = 1000;
    std::int64_t payload = 128;
    std::int64_t workers = 2;
    std::int64_t nats_port = 4222;
    std::int64_t kafka_port = 9092;
    std::int64_t pause_ms = 1500;  // paused: how long the broker stays stopped
    std::int64_t samples = 6;      // paused: readings while stopped
    std::int64_t broker_pid = 0;   // paused: 0 = from the environment
    std::int64_t rss_slack_kb = 64;
    std::int64_t linger_ms = 5;
    std::int64_t batch_messages = 0;
    std::int64_t ack_path = 0;
    std::int64_t ack_handlers = 4;
    // Passed by the suite to every program, used by others: the raw clients' body size, the
    // outbox's PostgreSQL port.
    std::int64_t body = 0;
    std::int64_t pg_port = 0;
};

auto parse(int argc, char** argv) -> options {
    options o;
    if (argc < 2) {
        fail("usage: bench_bus SCENARIO key=value... (see the file's opening comment)", 2);
    }
    o.scenario = argv[1];
    static const std::map<std::string, std::array<const char*, 3>> scenarios = {
        {"memory_async", {"memory", "", "async"}},
        {"memory_awaited", {"memory", "", "awaited"}},
        {"memory_deliver", {"memory", "", "deliver"}},
        {"nats_memory_async", {"nats", "memory", "async"}},
        {"nats_memory_awaited", {"nats", "memory", "awaited"}},
        {"nats_file_async", {"nats", "file", "async"}},
        {"nats_file_awaited", {"nats", "file", "awaited"}},
        {"kafka_async", {"kafka", "", "async"}},
        {"kafka_awaited", {"kafka", "", "awaited"}},
        {"nats_memory_paused", {"nats", "memory", "paused"}},
        {"nats_file_paused", {"nats", "file", "paused"}},
        {"kafka_paused", {"kafka", "", "paused"}},
    };
    const auto& row = weft::bench::bus::scenario_row(scenarios, o.scenario);
    o.backend = row[0];
    o.storage = row[1];
    o.mode = row[2];
    std::map<std::string, std::int64_t*> keys = {{"messages", &o.messages},
                                                 {"max_pending", &o.max_pending},
                                                 {"tasks", &o.tasks},
                                                 {"payload", &o.payload},
                                                 {"workers", &o.workers},
                                                 {"nats_port", &o.nats_port},
                                                 {"kafka_port", &o.kafka_port},
                                                 {"body", &o.body},
                                                 {"pg_port", &o.pg_port},
                                                 {"pause_ms", &o.pause_ms},
                                                 {"samples", &o.samples},
                                                 {"broker_pid", &o.broker_pid},
                                                 {"rss_slack_kb", &o.rss_slack_kb}};
    keys.insert({{"linger_ms", &o.linger_ms},  // Kafka producer settings (as rdkafka-pub's)
                 {"batch_messages", &o.batch_messages},
                 {"ack_path", &o.ack_path},
                 {"ack_handlers", &o.ack_handlers}});
    weft::bench::bus::read_options(argc, argv, keys, weft::bench::bus::unknown_key::reject);
    if (o.messages < 1 || o.max_pending < 1 || o.tasks < 1 || o.payload < 0 || o.workers < 1) {
        fail("messages, max_pending, tasks, workers >= 1; payload >= 0", 2);
    }
    if (o.mode == "paused") {
        if (o.messages <= o.max_pending || o.samples < 2 || o.pause_ms < 100 || o.pause_ms > 3000) {
            fail("paused: messages > max_pending, samples >= 2, 100 <= pause_ms <= 3000", 2);
        }
        if (o.broker_pid == 0) {
            const char* env =
                std::getenv(o.backend == "nats" ? "WEFT_BENCH_NATS_PID" : "WEFT_BENCH_KAFKA_PID");
            o.broker_pid = env != nullptr ? std::atoll(env) : 0;
        }
        if (o.broker_pid <= 0 || ::kill(static_cast<pid_t>(o.broker_pid), 0) != 0) {
            fail("paused: no broker process to stop (broker_pid= or WEFT_BENCH_" +
                 std::string(o.backend == "nats" ? "NATS" : "KAFKA") + "_PID)");
        }
    }
    return o;
}

/// CPU time (ns, /proc/self/task/*/schedstat) of this process's threads whose name starts with
/// `prefix`. librdkafka names its broker threads "rdk:broker<id>": in the slow 10,000-message
/// Kafka runs (either client) they spin while a full batch waits behind the one produce request
/// in flight (docs/design/outbox-relay.md), so the run prints theirs beside its figures.
auto threads_cpu_ns(std::string_view prefix) -> std::int64_t {
    std::int64_t sum = 0;
    std::error_code ec;
    for (const auto& t : std::filesystem::directory_iterator("/proc/self/task", ec)) {
        std::ifstream comm(t.path() / "comm");
        std::string name;
        std::getline(comm, name);
        if (!name.starts_with(prefix)) {
            continue;
        }
        std::ifstream stat(t.path() / "schedstat");
        std::int64_t run = 0;
        stat >> run;
        sum += run;
    }
    return sum;
}

auto threads_now() -> std::int64_t {
    std::ifstream in("/proc/self/status");
    std::string key;
    while (in >> key) {
        if (key == "Threads:") {
            std::int64_t n = 0;
            in >> n;
            return n;
        }
        in.ignore(1 << 12, '\n');
    }
    return 0;
}

/// What a run measured, filled by the scenario and printed by main.
struct figures {
    double elapsed_s = 0;
    double cpu_s = 0;
    std::int64_t ok = 0;
    std::int64_t failed = 0;
    std::string first_error;
    std::vector<std::int64_t> latency_ns;  // one per message that got an outcome
    std::int64_t rss_before = 0;
    std::int64_t rss_after = 0;
    std::int64_t threads_before = 0;
    std::int64_t threads_after = 0;
    std::int64_t tasks_before = 0;
    std::int64_t tasks_after = 0;
    // paused: one reading per sample while the broker was stopped, after the window filled.
    bool window_filled = false;
    std::vector<std::int64_t> paused_rss;
    std::vector<std::int64_t> paused_in_flight;
    std::vector<std::int64_t> paused_published;  // publish_async calls returned so far
    std::int64_t acks_while_stopped = 0;
    std::int64_t rss_stopped = 0;  // just before the broker was stopped
    double threads_settle_ms = 0;  // after close, until the threads were back to before
    // awaited: publishes that returned on another worker than the one they were called on
    // (the task was resumed or stolen across workers while it waited for its ack).
    std::int64_t migrations = 0;
    std::int64_t rdk_broker_cpu_ns = 0;  // librdkafka's broker threads over the timed run
};

auto since_ns(clock_type::time_point t0) -> std::int64_t {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - t0).count();
}

auto make_envelope(const std::string& topic, std::int64_t i, const std::string& payload)
    -> envelope {
    envelope e;
    e.topic = topic;
    e.key = std::to_string(i);
    e.type = "bench.event";
    e.payload = payload;
    return e;
}

void record(figures& f, const result<ack>& outcome) {
    if (outcome) {
        ++f.ok;
    } else {
        if (f.failed++ == 0) {
            f.first_error = outcome.error().message();
        }
    }
}

// One task publishes with publish_async; a second reads every outcome from results().
auto run_async(publisher& pub, const options& o, const std::string& topic, figures& f)
    -> task<void> {
    const auto n = o.messages;
    const std::string payload(static_cast<std::size_t>(o.payload), 'x');
    std::vector<clock_type::time_point> sent(static_cast<std::size_t>(n));
    const std::int64_t rdk_before = threads_cpu_ns("rdk:broker");
    const stopwatch run_clock;
    co_await weft::with_scope([&](weft::scope& s) -> task<void> {
        s.spawn([&]() -> task<void> {
            for (std::int64_t got = 0; got < n; ++got) {
                auto r = co_await pub.results().recv();
                expect_ok(r, "results()");
                const auto i = static_cast<std::size_t>(std::stoll(r->key));
                f.latency_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           clock_type::now() - sent[i])
                                           .count());
                record(f, r->outcome);
            }
        });
        for (std::int64_t i = 0; i < n; ++i) {
            sent[static_cast<std::size_t>(i)] = clock_type::now();
            auto r = co_await pub.publish_async(make_envelope(topic, i, payload));
            expect_ok(r, "publish_async");
        }
        co_return;
    });
    f.elapsed_s = run_clock.elapsed_s();
    f.cpu_s = run_clock.cpu_s();
    f.rdk_broker_cpu_ns = threads_cpu_ns("rdk:broker") - rdk_before;
}

// `tasks` tasks share the messages; each awaits one publish at a time.
auto run_awaited(publisher& pub, const options& o, const std::string& topic, figures& f)
    -> task<void> {
    const auto n = o.messages;
    const auto tasks = std::min(o.tasks, n);
    const std::string payload(static_cast<std::size_t>(o.payload), 'x');
    std::vector<std::vector<std::int64_t>> lat(static_cast<std::size_t>(tasks));
    std::vector<figures> per(static_cast<std::size_t>(tasks));
    const std::int64_t rdk_before = threads_cpu_ns("rdk:broker");
    const stopwatch run_clock;
    co_await weft::with_scope([&](weft::scope& s) -> task<void> {
        for (std::int64_t t = 0; t < tasks; ++t) {
            s.spawn([&, t]() -> task<void> {
                auto& mine = per[static_cast<std::size_t>(t)];
                for (std::int64_t i = t; i < n; i += tasks) {
                    const auto start = clock_type::now();
                    const auto on = weft::this_runtime()->worker_index;
                    auto r = co_await pub.publish(make_envelope(topic, i, payload));
                    if (weft::this_runtime()->worker_index != on) {
                        ++mine.migrations;
                    }
                    mine.latency_ns.push_back(since_ns(start));
                    record(mine, r);
                }
            });
        }
        co_return;
    });
    f.elapsed_s = run_clock.elapsed_s();
    f.cpu_s = run_clock.cpu_s();
    f.rdk_broker_cpu_ns = threads_cpu_ns("rdk:broker") - rdk_before;
    for (auto& m : per) {
        f.ok += m.ok;
        f.failed += m.failed;
        f.migrations += m.migrations;
        if (f.first_error.empty()) {
            f.first_error = m.first_error;
        }
        f.latency_ns.insert(f.latency_ns.end(), m.latency_ns.begin(), m.latency_ns.end());
    }
}

// Memory backend: publish_async and one group member that receives and acks every message.
auto run_deliver(backend& b, publisher& pub, const options& o, const std::string& topic, figures& f)
    -> task<void> {
    const auto n = o.messages;
    const std::string payload(static_cast<std::size_t>(o.payload), 'x');
    subscriber sub{b};
    auto member = co_await sub.subscribe(topic, "bench");
    expect_ok(member, "subscribe");
    std::vector<clock_type::time_point> sent(static_cast<std::size_t>(n));
    const stopwatch run_clock;
    co_await weft::with_scope([&](weft::scope& s) -> task<void> {
        s.spawn([&]() -> task<void> {  // publish outcomes, read so the publisher keeps going
            for (std::int64_t got = 0; got < n; ++got) {
                auto r = co_await pub.results().recv();
                if (!r || !r->outcome) {
                    fail("publish failed");
                }
            }
        });
        s.spawn([&]() -> task<void> {
            for (std::int64_t got = 0; got < n;) {
                auto d = co_await member->next();
                expect_ok(d, "next()");
                const auto key = std::stoll(d->message().key);
                if (key < 0) {  // the warm-up message, retained for a group that joins later
                    (void)d->ack();
                    continue;
                }
                ++got;
                const auto i = static_cast<std::size_t>(key);
                f.latency_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           clock_type::now() - sent[i])
                                           .count());
                auto a = d->ack();
                if (a) {
                    ++f.ok;
                } else if (f.failed++ == 0) {
                    f.first_error = a.error().message();
                }
            }
        });
        for (std::int64_t i = 0; i < n; ++i) {
            sent[static_cast<std::size_t>(i)] = clock_type::now();
            auto r = co_await pub.publish_async(make_envelope(topic, i, payload));
            expect_ok(r, "publish_async");
        }
        co_return;
    });
    f.elapsed_s = run_clock.elapsed_s();
    f.cpu_s = run_clock.cpu_s();
    member->close();
}

/// Stops a broker process (SIGSTOP) and resumes it (SIGCONT). stop() forks a guard in a session
/// of its own (the harness kills this program's process group on a timeout) that resumes the
/// broker after `longest` should this program die first; resume() ends the guard.
class broker_pause {
public:
    broker_pause(pid_t broker, std::chrono::milliseconds longest) : broker_(broker) {
        longest_.tv_sec = static_cast<time_t>(longest.count() / 1000);
        longest_.tv_nsec = static_cast<long>(longest.count() % 1000) * 1'000'000;
    }
    broker_pause(const broker_pause&) = delete;
    auto operator=(const broker_pause&) -> broker_pause& = delete;
    ~broker_pause() { resume(); }

    /// Returns once the kernel reports the broker stopped.
    void stop() {
        guard_ = ::fork();
        if (guard_ == 0) {  // only async-signal-safe calls: the parent has other threads
            ::setsid();
            timespec left = longest_;
            while (::nanosleep(&left, &left) != 0) {
            }
            ::kill(broker_, SIGCONT);
            ::_exit(0);
        }
        if (guard_ < 0) {
            fail("fork: the broker's guard");
        }
        if (::kill(broker_, SIGSTOP) != 0) {
            fail("cannot stop the broker (pid " + std::to_string(broker_) + ")");
        }
        for (int i = 0; i < 1000 && state() != 'T'; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (state() != 'T') {
            fail("the broker (pid " + std::to_string(broker_) + ") did not stop");
        }
    }
    void resume() noexcept {
        if (guard_ <= 0) {
            return;
        }
        ::kill(broker_, SIGCONT);
        ::kill(guard_, SIGKILL);
        ::waitpid(guard_, nullptr, 0);
        guard_ = -1;
    }

private:
    /// The process state letter of /proc/PID/stat ('T': stopped).
    [[nodiscard]] auto state() const -> char {
        std::ifstream in("/proc/" + std::to_string(broker_) + "/stat");
        std::string line;
        std::getline(in, line);
        const auto close = line.rfind(')');
        return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
    }

    pid_t broker_;
    timespec longest_{};
    pid_t guard_ = -1;
};

// The broker is stopped, then one task publishes N with publish_async while a second reads
// results() and a third takes the readings once the window is full, then resumes the broker.
auto run_paused(publisher& pub, const options& o, const std::string& topic, figures& f)
    -> task<void> {
    const auto n = o.messages;
    const auto window = static_cast<std::ptrdiff_t>(o.max_pending);
    const std::string payload(static_cast<std::size_t>(o.payload), 'x');
    std::atomic<std::int64_t> published{0};
    std::atomic<std::int64_t> read{0};
    broker_pause pause{static_cast<pid_t>(o.broker_pid),
                       std::chrono::milliseconds(o.pause_ms + 5000)};
    for (auto* v : {&f.paused_rss, &f.paused_in_flight, &f.paused_published}) {
        v->reserve(static_cast<std::size_t>(o.samples));  // no allocation among the readings
    }
    f.rss_stopped = weft::bench::rss_bytes();
    pause.stop();
    const auto resume_at = clock_type::now() + std::chrono::milliseconds(o.pause_ms);
    const stopwatch run_clock;
    co_await weft::with_scope([&](weft::scope& s) -> task<void> {
        s.spawn([&]() -> task<void> {
            for (std::int64_t got = 0; got < n; ++got) {
                auto r = co_await pub.results().recv();
                expect_ok(r, "results()");
                record(f, r->outcome);
                read.fetch_add(1, std::memory_order_relaxed);
            }
        });
        s.spawn([&]() -> task<void> {
            while (pub.in_flight() < window && clock_type::now() < resume_at) {
                (void)co_await weft::sleep_for(std::chrono::milliseconds(1));
            }
            f.window_filled = pub.in_flight() == window;
            const auto step = (resume_at - clock_type::now()) / o.samples;
            for (std::int64_t k = 0; k < o.samples; ++k) {
                (void)co_await weft::sleep_for(step);
                f.paused_rss.push_back(weft::bench::rss_bytes());
                f.paused_in_flight.push_back(pub.in_flight());
                f.paused_published.push_back(published.load(std::memory_order_relaxed));
            }
            f.acks_while_stopped = read.load(std::memory_order_relaxed);
            pause.resume();
        });
        for (std::int64_t i = 0; i < n; ++i) {
            auto r = co_await pub.publish_async(make_envelope(topic, i, payload));
            expect_ok(r, "publish_async");
            published.fetch_add(1, std::memory_order_relaxed);
        }
        co_return;
    });
    auto flushed = co_await pub.flush();
    expect_ok(flushed, "flush");
    f.elapsed_s = run_clock.elapsed_s();
    f.cpu_s = run_clock.cpu_s();
}

auto run(backend& b, const options& o, const std::string& topic, figures& f) -> task<void> {
    f.rss_before = weft::bench::rss_bytes();
    f.threads_before = threads_now();
    f.tasks_before = weft::live_frames();
    {
        publisher pub{b, {.max_pending = static_cast<std::uint32_t>(o.max_pending)}};
        // Untimed: connection, topic metadata and the producer's id are in place before t0.
        auto warm = co_await pub.publish(make_envelope(topic, -1, "warm-up"));
        expect_ok(warm, "warm-up publish");
        if (o.mode == "async") {
            co_await run_async(pub, o, topic, f);
        } else if (o.mode == "awaited") {
            co_await run_awaited(pub, o, topic, f);
        } else if (o.mode == "paused") {
            co_await run_paused(pub, o, topic, f);
        } else {
            co_await run_deliver(b, pub, o, topic, f);
        }
        f.rss_after = weft::bench::rss_bytes();
        auto closed = co_await pub.close();
        expect_ok(closed, "close");
    }
    // A backend's per-publisher task (the ack drain) ends on its own once woken by close():
    // give it up to 200 ms to finish, then count what is left. Kafka destroys a closed
    // publisher's librdkafka client (and with it its threads) on the backend's closer thread,
    // after close() returned: up to 3 s for that, then count the threads.
    for (int i = 0; i < 200 && weft::live_frames() > f.tasks_before; ++i) {
        (void)co_await weft::sleep_for(std::chrono::milliseconds(1));
    }
    const auto settle_start = clock_type::now();
    while (threads_now() > f.threads_before &&
           clock_type::now() - settle_start < std::chrono::seconds(3)) {
        (void)co_await weft::sleep_for(std::chrono::milliseconds(5));
    }
    f.threads_settle_ms = static_cast<double>(since_ns(settle_start)) / 1e6;
    f.threads_after = threads_now();
    f.tasks_after = weft::live_frames();
}

void print(const options& o, const std::string& topic, figures& f) {
    const auto n = static_cast<double>(o.messages);
    const bool deliver = o.mode == "deliver";
    emit(deliver ? "deliveries_per_s" : "msgs_per_s", "msg/s", n / f.elapsed_s);
    std::sort(f.latency_ns.begin(), f.latency_ns.end());
    double mean = 0;
    for (auto v : f.latency_ns) {
        mean += static_cast<double>(v);
    }
    if (!f.latency_ns.empty()) {
        mean /= static_cast<double>(f.latency_ns.size());
        const auto p99 =
            f.latency_ns[std::min(f.latency_ns.size() - 1, f.latency_ns.size() * 99 / 100)];
        emit("mean_latency_ms", "ms", mean / 1e6);
        emit("p99_latency_ms", "ms", static_cast<double>(p99) / 1e6);
    }
    emit("success_percent", "%", 100.0 * static_cast<double>(f.ok) / n);
    emit("mem_delta_mb", "MB", static_cast<double>(f.rss_after - f.rss_before) / (1 << 20));
    emit("cpu_ns_per_msg", "ns", f.cpu_s * 1e9 / n);
    emit("threads_before", "", static_cast<double>(f.threads_before));
    emit("threads_after", "", static_cast<double>(f.threads_after));
    emit("tasks_before", "", static_cast<double>(f.tasks_before));
    emit("tasks_after", "", static_cast<double>(f.tasks_after));
    // What one message puts on the wire (the binary envelope; the peers send bodies this size).
    auto sample =
        make_envelope(topic, o.messages - 1, std::string(static_cast<std::size_t>(o.payload), 'x'));
    sample.id = message_id::generate();
    sample.time = std::chrono::system_clock::now();
    emit("envelope_bytes", "B", static_cast<double>(encode(sample).size()));
    if (o.mode == "awaited") {
        emit("migrations_per_1000_msgs", "", 1000.0 * static_cast<double>(f.migrations) / n);
    }
    emit("ops", "", n);
}

/// The scheduler's counters over the run (every worker summed), per 1,000 messages: how often
/// a worker woke a parked one, deferred such a wake-up, went to park, and slept.
void print_worker_metrics(const weft::runtime& rt, std::int64_t messages) {
    weft::worker_metrics sum;
    for (unsigned i = 0; i < rt.worker_count(); ++i) {
        const auto m = rt.worker_metrics(i);
        sum.park_attempts += m.park_attempts;
        sum.sleeps += m.sleeps;
        sum.wakes += m.wakes;
        sum.deferred_wakes += m.deferred_wakes;
    }
    const double per = 1000.0 / static_cast<double>(messages);
    emit("worker_wakes_per_1000_msgs", "", per * static_cast<double>(sum.wakes));
    emit("deferred_wakes_per_1000_msgs", "", per * static_cast<double>(sum.deferred_wakes));
    emit("parks_per_1000_msgs", "", per * static_cast<double>(sum.park_attempts));
    emit("sleeps_per_1000_msgs", "", per * static_cast<double>(sum.sleeps));
}

/// The paused mode's readings and verdict. Exit 3 (invalid) when acks came while the broker
/// was meant to be stopped.
void print_paused(const options& o, const figures& f) {
    const auto n = static_cast<double>(o.messages);
    const auto [in_min, in_max] =
        f.paused_in_flight.empty()
            ? std::pair<std::int64_t, std::int64_t>{0, 0}
            : std::pair{*std::min_element(f.paused_in_flight.begin(), f.paused_in_flight.end()),
                        *std::max_element(f.paused_in_flight.begin(), f.paused_in_flight.end())};
    const std::int64_t rss_first = f.paused_rss.empty() ? 0 : f.paused_rss.front();
    const std::int64_t rss_max =
        f.paused_rss.empty() ? 0 : *std::max_element(f.paused_rss.begin(), f.paused_rss.end());
    const std::int64_t growth_kb = (rss_max - rss_first) / 1024;
    const std::int64_t publishes_while_stopped =
        f.paused_published.empty() ? 0 : f.paused_published.back() - f.paused_published.front();
    const std::int64_t threads_left = f.threads_after - f.threads_before;
    const std::int64_t tasks_left = f.tasks_after - f.tasks_before;
    struct check {
        const char* what;
        bool holds;
    };
    const std::array checks = {
        check{"the window filled (in_flight() reached max_pending)", f.window_filled},
        check{"in_flight() == max_pending at every reading",
              in_min == o.max_pending && in_max == o.max_pending},
        check{"no publish_async returned while the broker was stopped",
              publishes_while_stopped == 0},
        check{"RSS grew by at most rss_slack_kb while stopped", growth_kb <= o.rss_slack_kb},
        check{"every message acknowledged after the resume", f.ok == o.messages},
        check{"threads after close == before", threads_left == 0},
        check{"weft tasks after close == before", tasks_left == 0},
    };
    bool ok = true;
    for (const auto& c : checks) {
        if (!c.holds) {
            std::fprintf(stderr, "bounded memory: does not hold: %s\n", c.what);
            ok = false;
        }
    }
    std::fprintf(stderr, "paused readings (rss KiB / in_flight / published):");
    for (std::size_t k = 0; k < f.paused_rss.size(); ++k) {
        std::fprintf(stderr, " %lld/%lld/%lld", static_cast<long long>(f.paused_rss[k] / 1024),
                     static_cast<long long>(f.paused_in_flight[k]),
                     static_cast<long long>(f.paused_published[k]));
    }
    std::fprintf(stderr, "\n");
    emit("bounded_ok", "", ok ? 1 : 0);
    emit("window_filled", "", f.window_filled ? 1 : 0);
    emit("paused_in_flight_min", "", static_cast<double>(in_min));
    emit("paused_in_flight_max", "", static_cast<double>(in_max));
    emit("publishes_while_stopped", "", static_cast<double>(publishes_while_stopped));
    emit("paused_rss_growth_kb", "KiB", static_cast<double>(growth_kb));
    emit("window_rss_mb", "MB", static_cast<double>(rss_first - f.rss_stopped) / (1 << 20));
    emit("success_percent", "%", 100.0 * static_cast<double>(f.ok) / n);
    emit("mem_delta_mb", "MB", static_cast<double>(f.rss_after - f.rss_before) / (1 << 20));
    emit("threads_before", "", static_cast<double>(f.threads_before));
    emit("threads_after", "", static_cast<double>(f.threads_after));
    emit("tasks_before", "", static_cast<double>(f.tasks_before));
    emit("tasks_after", "", static_cast<double>(f.tasks_after));
    emit("threads_left", "", static_cast<double>(threads_left));
    emit("threads_settle_ms", "ms", f.threads_settle_ms);
    emit("tasks_left", "", static_cast<double>(tasks_left));
    emit("ops", "", n);
    if (f.acks_while_stopped > 0) {
        std::fprintf(stderr, "invalid: %lld acks were read while the broker was stopped\n",
                     static_cast<long long>(f.acks_while_stopped));
        std::exit(3);
    }
}

}  // namespace

auto main(int argc, char** argv) -> int {
    if (argc >= 2 && std::string_view(argv[1]).starts_with("outbox_")) {
        const auto self = std::filesystem::read_symlink("/proc/self/exe");
        const auto outbox = (self.parent_path() / "bench_outbox").string();
        argv[0] = const_cast<char*>(outbox.c_str());
        ::execv(outbox.c_str(), argv);
        fail("cannot run " + outbox + " (build the bench_outbox target)", 2);
    }
    const options o = parse(argc, argv);
    // A topic of its own per run: no message of an earlier run is counted or waited for.
    const std::string topic = weft::bench::bus::run_topic(o.scenario);
    figures f;
    try {
        std::unique_ptr<backend> b;
        if (o.backend == "memory") {
            b = std::make_unique<memory_broker>();
        } else if (o.backend == "nats") {
#if WEFT_BENCH_BUS_NATS
            nats_backend_options no;
            no.url = weft::bench::bus::nats_url(o.nats_port);
            no.topics = {topic};
            no.storage = o.storage == "file" ? nats_storage::file : nats_storage::memory;
            no.ack_path =
                o.ack_path == 1 ? nats_ack_path::handler_pool : nats_ack_path::reactor_batch;
            no.ack_handlers = static_cast<unsigned>(o.ack_handlers);
            b = std::make_unique<nats_backend>(std::move(no));
#else
            fail("built without weft::bus_nats (cnats missing)", 2);
#endif
        } else {
#if WEFT_BENCH_BUS_KAFKA
            kafka_backend_options ko;
            ko.brokers = weft::bench::bus::kafka_brokers(o.kafka_port);
            ko.topics = {topic};
            ko.create_topics_on_use = false;
            ko.linger = std::chrono::milliseconds(o.linger_ms);
            ko.batch_messages = static_cast<std::uint32_t>(o.batch_messages);
            ko.ack_path =
                o.ack_path == 1 ? kafka_ack_path::background_thread : kafka_ack_path::reactor_queue;
            b = std::make_unique<kafka_backend>(std::move(ko));
#else
            fail("built without weft::bus_kafka (librdkafka missing)", 2);
#endif
        }
        {
            weft::runtime rt{weft::io_runtime_options(static_cast<unsigned>(o.workers))};
            rt.block_on(run(*b, o, topic, f));
            print_worker_metrics(rt, o.messages);
        }
#if WEFT_BENCH_BUS_NATS
        if (auto* nb = dynamic_cast<nats_backend*>(b.get()); nb != nullptr) {
            const auto st = nb->stats();  // the warm-up message included
            if (st.acks > 0) {
                emit("wakes_per_1000_acks", "",
                     1000.0 * static_cast<double>(st.wakes) / static_cast<double>(st.acks));
            }
        }
#endif
#if WEFT_BENCH_BUS_KAFKA
        if (auto* kb = dynamic_cast<kafka_backend*>(b.get()); kb != nullptr) {
            // On stderr, not a suite metric: a diagnostic of the run's mode (see threads_cpu_ns).
            std::fprintf(stderr, "librdkafka broker threads: %.2f ms CPU in the timed run\n",
                         static_cast<double>(f.rdk_broker_cpu_ns) / 1e6);
            const auto st = kb->stats();  // the warm-up message included
            if (st.acks > 0) {
                emit("wakes_per_1000_acks", "",
                     1000.0 * static_cast<double>(st.wakes) / static_cast<double>(st.acks));
            }
        }
#endif
        b.reset();
    } catch (const std::exception& e) {
        fail(e.what());
    }
#if WEFT_BENCH_BUS_NATS
    if (o.backend == "nats") {
        weft::bench::bus::delete_streams(o.nats_port, {topic});
    }
#endif
    if (f.failed > 0) {
        std::fprintf(stderr, "%lld of %lld publishes failed; first: %s\n",
                     static_cast<long long>(f.failed), static_cast<long long>(o.messages),
                     f.first_error.c_str());
    }
    if (o.mode == "paused") {
        print_paused(o, f);
    } else {
        print(o, topic, f);
    }
    return 0;
}
