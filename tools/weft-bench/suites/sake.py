"""Seed 000 (Sake, Navi): the five architectures of its micro-benchmark table — direct call,
spawn only, pool.map serial, channel coordination, spawn -> pool.map — with the seed's iteration
counts (10,000; the direct-call baseline 100,000), written with the same structure on weft and in
Go (goroutines, channels, a worker pool); plus channel ping-pong, throughput and uncontended
send+recv on weft, Go channels and tokio mpsc."""
from weftbench.suite import HIGHER, Derived, Input, Metric, Scenario, Seed, Suite, System, Target

PEER_BUILD = "bash bench/peers/build.sh {peers}"
SEED_FACTOR = 50  # the target: every row at least 50x faster than the seed's figure


def table_row(name, iters, seed_us, seed_ops, note, **params):
    """One row of the seed's table: us_per_op, target = seed / 50 and faster than Go.

    `repeat` timed passes of `iters` iterations each (the seed's count per pass), so a row is
    measured over more than a few milliseconds; quick mode runs fewer passes."""
    return Scenario(
        name, {"iters": iters, "repeat": 10, **params}, ("us_per_op", "ops_per_s"),
        quick={"repeat": 3},
        seed={"us_per_op": Seed(seed_us, note), "ops_per_s": Seed(seed_ops, note)},
        targets={"us_per_op": Target(at_most=round(seed_us / SEED_FACTOR, 4), beats=("go",))},
        only=("weft", "go"))  # tokio-sake runs the channel rows only


SUITE = Suite(
    name="sake",
    title="Sake (seed 000): spawn, pool.map, channel coordination; channel latency",
    seed_file="000_c29498296902f75d.txt",
    notes="The seed timed whole Navi programs with Unix `time` on macOS (Darwin 24.3.0); here "
          "each pass is timed inside the process after an untimed warm-up of a tenth of the "
          "work. minimal_handler returns its input string `test_${i}`; the pool has one handler "
          "task (goroutine) per runtime worker, its intake holds 2 x handlers; channels in the "
          "pool rows hold `cap`=1024 items. weft and Go on all cores; tokio runs only the "
          "channel rows.",
    systems=(
        System("weft", "{bin}/weft-sake",
               build="cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release && "
                     "cmake --build build/release --target weft-sake"),
        System("go", "{peers}/go-sake", build=PEER_BUILD),
        System("tokio", "{peers}/tokio-sake", build=PEER_BUILD),
    ),
    metrics={
        "us_per_op": Metric("us"),
        "ops_per_s": Metric("ops/s", HIGHER),
        "contention_ratio": Metric("x"),
        "ns_per_round_trip": Metric("ns"),
        "ns_per_item": Metric("ns"),
        "ns_per_pair": Metric("ns"),
    },
    scenarios=(
        table_row("direct", 100_000, 1.19, 840_336,
                  "Direct calls (baseline): 840,336 ops/s, 1.19 μs (100,000 次)"),
        table_row("spawn_only", 10_000, 18.50, 54_054,
                  "spawn only: 54,054 ops/s, 18.50 μs (瓶颈: 协程调度)", workers=0),
        table_row("pool_map_serial", 10_000, 19.40, 51_546,
                  "pool.map() serial: 51,546 ops/s, 19.40 μs (瓶颈: Worker pool)", workers=0),
        table_row("chan_coord", 10_000, 30.50, 32_787,
                  "Channel coordination: 32,787 ops/s, 30.50 μs (生产)", workers=0, cap=1024),
        table_row("spawn_pool_map", 10_000, 75.80, 13_193,
                  "spawn → pool.map(): 13,193 ops/s, 75.80 μs (竞争)", workers=0, cap=1024),
        # two tasks bouncing a value over two capacity-1 channels, on 2 workers
        Scenario("chan_pingpong", {"rounds": 100_000, "cap": 1, "workers": 2},
                 ("ns_per_round_trip",), quick={"rounds": 50_000},
                 targets={"ns_per_round_trip": Target(beats=("go", "tokio"))}),
        # one producer task, one consumer task, a buffered channel of 1024
        Scenario("chan_throughput", {"items": 1_000_000, "cap": 1024, "workers": 2},
                 ("ns_per_item",), quick={"items": 300_000}),
        # send then recv on one task; nothing ever waits
        Scenario("chan_uncontended", {"pairs": 1_000_000, "cap": 1024, "workers": 2},
                 ("ns_per_pair",), quick={"pairs": 300_000},
                 targets={"ns_per_pair": Target(at_most=15)}),
    ),
    derived=(
        # both architectures must be fast; the seed's naive one was 2.49x slower
        Derived("spawn_pool_map / chan_coord", {}, "contention_ratio",
                inputs={"naive": Input("spawn_pool_map", {}, "us_per_op"),
                        "coord": Input("chan_coord", {}, "us_per_op")},
                formula=lambda m: m["naive"] / m["coord"],
                seed=Seed(2.49, "75.80 μs / 30.50 μs = 2.49x (微基准)"),
                target=Target(at_most=1.5)),
    ),
)
