// weft's side of the `sake` suite (seed 000): the five rows of the seed's micro-benchmark table,
// each with the seed's structure and parameters, plus channel latency and throughput. Every
// scenario mirrors bench/peers/go/cmd/sake (and, for the chan_* ones, the tokio peer).
//
// The seed's workload: `minimal_handler` takes the string `test_${i}` and returns a string; the
// worker pool is `Worker.pool(minimal_handler)`. Here the handler returns its input (the least a
// string -> string handler can do and still produce a checkable result), the pool has one handler
// task per runtime worker (`pool=N` overrides), and every result's length is summed and checked
// after the clock stops. Each scenario runs an untimed warm-up pass of a tenth of the work, then
// `repeat` timed passes of `iters` iterations; us_per_op = total wall time / (repeat * iters).

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "scenario.hpp"
#include "weft/weft.hpp"

namespace {

using weft::bench::emit;
using weft::bench::params;
using weft::bench::time_ns;

using pool_t = weft::worker_pool<std::string, std::string>;

auto workers_of(const params& p) -> unsigned { return static_cast<unsigned>(p.get("workers", 0)); }

auto positive(const params& p, const char* key, std::int64_t fallback) -> std::int64_t {
    const std::int64_t v = p.get(key, fallback);
    if (v <= 0) {
        weft::bench::fail(std::string(key) + " must be > 0", 2);
    }
    return v;
}

/// `test_${i}`, as the seed's request spawns build it.
auto make_input(std::int64_t i) -> std::string {
    char buf[32] = "test_";
    auto [end, ec] = std::to_chars(buf + 5, buf + sizeof buf, i);
    (void)ec;
    return std::string(buf, end);
}

/// The seed's minimal_handler. noinline: the direct-call baseline must really call it.
[[gnu::noinline]] auto minimal_handler(std::string s) -> std::string { return s; }

/// Sum of the lengths of make_input(0..n-1): what every pass must add up to.
auto expected_length(std::int64_t n) -> std::int64_t {
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        sum += static_cast<std::int64_t>(make_input(i).size());
    }
    return sum;
}

/// Runs `pass(n)` (returns the sum of result lengths) once untimed with n = iters / 10, then
/// `repeat` times timed, checks every sum and emits us_per_op and ops_per_s.
template <typename Pass>
void measure(const char* name, const params& p, std::int64_t default_iters, Pass&& pass) {
    const std::int64_t iters = positive(p, "iters", default_iters);
    const std::int64_t repeat = positive(p, "repeat", 1);
    const std::int64_t warm = iters / 10 > 0 ? iters / 10 : 1;
    if (pass(warm) != expected_length(warm)) {
        weft::bench::fail(std::string(name) + ": wrong result (warm-up)");
    }
    const std::int64_t want = expected_length(iters);
    double ns = 0;
    for (std::int64_t r = 0; r < repeat; ++r) {
        std::int64_t got = 0;
        ns += time_ns([&] { got = pass(iters); });
        if (got != want) {
            weft::bench::fail(std::string(name) + ": wrong result");
        }
    }
    const double ops = static_cast<double>(iters * repeat);
    emit("us_per_op", "us", ns / 1e3 / ops);
    emit("ops_per_s", "ops/s", ops / (ns / 1e9));
}

// ---- direct: the baseline, no task at all ---------------------------------------------------

void direct_scenario(const params& p) {
    measure("direct", p, 100'000, [](std::int64_t n) {
        std::int64_t sum = 0;
        for (std::int64_t i = 0; i < n; ++i) {
            sum += static_cast<std::int64_t>(minimal_handler(make_input(i)).size());
        }
        return sum;
    });
}

// ---- spawn_only: one task per iteration calling the handler; the driver waits for all ------

auto call_handler(std::int64_t i, std::int64_t* slot) -> weft::task<void> {
    *slot = static_cast<std::int64_t>(minimal_handler(make_input(i)).size());
    co_return;
}

void spawn_only_scenario(const params& p) {
    weft::runtime rt{{.workers = workers_of(p)}};
    std::vector<std::int64_t> slots;
    measure("spawn_only", p, 10'000, [&](std::int64_t n) {
        slots.assign(static_cast<std::size_t>(n), 0);
        rt.block_on(weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (std::int64_t i = 0; i < n; ++i) {
                s.spawn(call_handler(i, &slots[static_cast<std::size_t>(i)]));
            }
            co_return;
        }));
        std::int64_t sum = 0;
        for (auto v : slots) {
            sum += v;
        }
        return sum;
    });
}

// The pool scenarios share this: the runtime, and the pool built on it before the first pass.
struct pool_bench {
    explicit pool_bench(const params& p)
        : rt{{.workers = workers_of(p)}},
          pool{
              rt,
              static_cast<std::size_t>(p.get("pool", 0) > 0 ? p.get("pool", 0) : rt.worker_count()),
              minimal_handler} {}
    weft::runtime rt;
    pool_t pool;
};

// ---- pool_map_serial: one task awaiting pool.map once per iteration ------------------------

auto map_serially(pool_t& pool, std::int64_t n) -> weft::task<std::int64_t> {
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        sum += static_cast<std::int64_t>((co_await pool.map(make_input(i))).size());
    }
    co_return sum;
}

void pool_map_serial_scenario(const params& p) {
    pool_bench b{p};
    measure("pool_map_serial", p, 10'000,
            [&](std::int64_t n) { return b.rt.block_on(map_serially(b.pool, n)); });
}

// ---- chan_coord: request tasks -> task channel -> one coordinator -> pool.map --------------

struct sake_task {
    std::int64_t id;
    std::string data;
};

/// The only caller of pool.map: one job at a time, results forwarded in order.
auto coordinator(weft::channel<sake_task>& tasks, weft::channel<std::string>& results, pool_t& pool)
    -> weft::task<void> {
    for (;;) {
        auto t = co_await tasks.recv();
        if (!t) {
            co_return;  // closed: every request was served
        }
        auto r = co_await results.send(co_await pool.map(std::move(t->data)));
        if (!r) {
            co_return;
        }
    }
}

/// A request task of the seed's channel architecture: it only sends its task.
auto send_request(weft::channel<sake_task>& tasks, std::int64_t i) -> weft::task<void> {
    // NOTE: a named local, not `send(sake_task{...})`: g++ 12 destroys a braced aggregate
    // temporary inside a co_await expression twice (fixed in g++ 13).
    sake_task t{i, make_input(i)};
    auto r = co_await tasks.send(std::move(t));
    (void)r;  // a closed channel shows as a missing result in the check
}

auto coordinated_pass(pool_t& pool, std::int64_t n, std::size_t cap) -> weft::task<std::int64_t> {
    weft::channel<sake_task> tasks{cap};
    weft::channel<std::string> results{cap};
    std::int64_t sum = 0;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(coordinator(tasks, results, pool));
        for (std::int64_t i = 0; i < n; ++i) {
            s.spawn(send_request(tasks, i));
        }
        for (std::int64_t i = 0; i < n; ++i) {
            auto r = co_await results.recv();
            if (!r) {
                break;
            }
            sum += static_cast<std::int64_t>(r->size());
        }
        tasks.close();  // ends the coordinator
    });
    co_return sum;
}

void chan_coord_scenario(const params& p) {
    pool_bench b{p};
    const auto cap = static_cast<std::size_t>(p.get("cap", 1024));
    measure("chan_coord", p, 10'000,
            [&](std::int64_t n) { return b.rt.block_on(coordinated_pass(b.pool, n, cap)); });
}

// ---- spawn_pool_map: every request task calls the shared pool's map concurrently -----------

auto map_and_send(pool_t& pool, weft::channel<std::string>& results, std::int64_t i)
    -> weft::task<void> {
    auto r = co_await results.send(co_await pool.map(make_input(i)));
    (void)r;
}

auto contended_pass(pool_t& pool, std::int64_t n, std::size_t cap) -> weft::task<std::int64_t> {
    weft::channel<std::string> results{cap};
    std::int64_t sum = 0;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        for (std::int64_t i = 0; i < n; ++i) {
            s.spawn(map_and_send(pool, results, i));
        }
        for (std::int64_t i = 0; i < n; ++i) {
            auto r = co_await results.recv();
            if (!r) {
                break;
            }
            sum += static_cast<std::int64_t>(r->size());
        }
    });
    co_return sum;
}

void spawn_pool_map_scenario(const params& p) {
    pool_bench b{p};
    const auto cap = static_cast<std::size_t>(p.get("cap", 1024));
    measure("spawn_pool_map", p, 10'000,
            [&](std::int64_t n) { return b.rt.block_on(contended_pass(b.pool, n, cap)); });
}

// ---- chan_pingpong: two tasks bouncing a value over two channels ---------------------------

auto pong_side(weft::channel<std::int64_t>& ping, weft::channel<std::int64_t>& pong)
    -> weft::task<void> {
    for (;;) {
        auto v = co_await ping.recv();
        if (!v) {
            co_return;
        }
        if (!co_await pong.send(*v + 1)) {
            co_return;
        }
    }
}

auto ping_pong(std::int64_t rounds, std::size_t cap) -> weft::task<bool> {
    weft::channel<std::int64_t> ping{cap};
    weft::channel<std::int64_t> pong{cap};
    auto other = weft::spawn(pong_side(ping, pong));
    bool ok = true;
    for (std::int64_t i = 0; i < rounds; ++i) {
        (void)co_await ping.send(i);
        auto v = co_await pong.recv();
        ok = ok && v && *v == i + 1;
    }
    ping.close();
    co_await std::move(other);
    co_return ok;
}

void chan_pingpong_scenario(const params& p) {
    const std::int64_t rounds = positive(p, "rounds", 100'000);
    const auto cap = static_cast<std::size_t>(p.get("cap", 1));
    weft::runtime rt{{.workers = workers_of(p)}};
    (void)rt.block_on(ping_pong(rounds / 10 + 1, cap));
    bool ok = false;
    const double ns = time_ns([&] { ok = rt.block_on(ping_pong(rounds, cap)); });
    if (!ok) {
        weft::bench::fail("chan_pingpong: wrong value");
    }
    emit("ns_per_round_trip", "ns", ns / static_cast<double>(rounds));
}

// ---- chan_throughput: one producer, one consumer, a buffered channel -----------------------

auto produce(weft::channel<std::int64_t>& ch, std::int64_t n) -> weft::task<void> {
    for (std::int64_t i = 0; i < n; ++i) {
        if (!co_await ch.send(i)) {
            break;
        }
    }
    ch.close();
}

auto stream(std::int64_t n, std::size_t cap) -> weft::task<std::int64_t> {
    weft::channel<std::int64_t> ch{cap};
    auto producer = weft::spawn(produce(ch, n));
    std::int64_t sum = 0;
    for (;;) {
        auto v = co_await ch.recv();
        if (!v) {
            break;
        }
        sum += *v;
    }
    co_await std::move(producer);
    co_return sum;
}

void chan_throughput_scenario(const params& p) {
    const std::int64_t n = positive(p, "items", 1'000'000);
    const auto cap = static_cast<std::size_t>(positive(p, "cap", 1024));
    weft::runtime rt{{.workers = workers_of(p)}};
    (void)rt.block_on(stream(n / 10 + 1, cap));
    std::int64_t sum = 0;
    const double ns = time_ns([&] { sum = rt.block_on(stream(n, cap)); });
    if (sum != n * (n - 1) / 2) {
        weft::bench::fail("chan_throughput: lost an item");
    }
    emit("ns_per_item", "ns", ns / static_cast<double>(n));
}

// ---- chan_uncontended: send then recv on one task, never blocking --------------------------

auto pairs_on_one_task(std::int64_t n, std::size_t cap) -> weft::task<std::int64_t> {
    weft::channel<std::int64_t> ch{cap};
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        (void)co_await ch.send(i);
        auto v = co_await ch.recv();
        sum += v ? *v : 0;
    }
    co_return sum;
}

void chan_uncontended_scenario(const params& p) {
    const std::int64_t n = positive(p, "pairs", 1'000'000);
    const auto cap = static_cast<std::size_t>(positive(p, "cap", 1024));
    weft::runtime rt{{.workers = workers_of(p)}};
    (void)rt.block_on(pairs_on_one_task(n / 10 + 1, cap));
    std::int64_t sum = 0;
    const double ns = time_ns([&] { sum = rt.block_on(pairs_on_one_task(n, cap)); });
    if (sum != n * (n - 1) / 2) {
        weft::bench::fail("chan_uncontended: lost an item");
    }
    emit("ns_per_pair", "ns", ns / static_cast<double>(n));
}

}  // namespace

auto main(int argc, char** argv) -> int {
    return weft::bench::dispatch(argc, argv,
                                 {
                                     {"direct", direct_scenario},
                                     {"spawn_only", spawn_only_scenario},
                                     {"pool_map_serial", pool_map_serial_scenario},
                                     {"chan_coord", chan_coord_scenario},
                                     {"spawn_pool_map", spawn_pool_map_scenario},
                                     {"chan_pingpong", chan_pingpong_scenario},
                                     {"chan_throughput", chan_throughput_scenario},
                                     {"chan_uncontended", chan_uncontended_scenario},
                                 });
}
