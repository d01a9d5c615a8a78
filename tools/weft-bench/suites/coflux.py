"""Seed 001 (Coflux, C++20): fork overhead, M:N spawn, pipelines; plus fork-join, parked memory
and idle CPU. Same parameters as the seed's Google Benchmark runs."""
from weftbench.suite import Derived, Input, Limit, Metric, Scenario, Seed, Suite, System, Target

PEER_BUILD = "bash bench/peers/build.sh {peers}"

SUITE = Suite(
    name="coflux",
    title="Coflux (seed 001): fork, M:N spawn, pipeline, fork-join",
    seed_file="001_331ae9147e265e6d.txt",
    notes="The seed measured Coflux with Google Benchmark on an AMD Ryzen 9 7940H (8 cores / 16 "
          "threads), Windows, MSVC release x64; its latencies are 1 / items_per_second.",
    systems=(
        System("weft", "{bin}/weft-coflux",
               build="cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release "
                     "-DCMAKE_CXX_COMPILER=clang++-16 && "
                     "cmake --build build/release --target weft-coflux"),
        System("go", "{peers}/go-coflux", build=PEER_BUILD),
        System("tokio", "{peers}/tokio-coflux", build=PEER_BUILD),
        System("tbb", "{peers}/tbb-coflux", build=PEER_BUILD),
    ),
    metrics={
        "ns_per_fork": Metric("ns"),
        "allocs_per_fork": Metric("allocs"),
        "ns_per_task": Metric("ns"),
        "ns_per_pipeline": Metric("ns"),
        "stage_handoff_ns": Metric("ns"),
        "bytes_per_parked_task": Metric("bytes"),
        "idle_cpu_percent": Metric("%"),
    },
    scenarios=(
        # create + co_await + destroy on the inline executor (Coflux: noop_executor + PMR pool)
        Scenario("fork", {"forks": 100_000}, ("ns_per_fork", "allocs_per_fork"),
                 seed={"ns_per_fork": Seed(256, "~390万/秒, ~256 纳秒/Fork (noop_executor)")},
                 targets={"ns_per_fork": Target(at_most=10), "allocs_per_fork": Target(at_most=0)}),
        # M:N spawn + complete on all cores (Coflux: thread_pool_executor, 10^6 forks)
        Scenario("spawn", {"tasks": 1_000_000, "workers": 0}, ("ns_per_task",),
                 seed={"ns_per_task": Seed(513, "~195万/秒, ~513 纳秒/Fork (thread_pool_executor)")},
                 targets={"ns_per_task": Target(at_most=60, beats=("tokio", "go", "tbb"))}),
        # C concurrent chains of D sequential stages
        # TBB tasks cannot suspend: no pipeline for tbb-coflux (nor parked memory, idle CPU)
        Scenario("pipeline", {"C": 8, "D": 5, "iters": 2000, "workers": 0}, ("ns_per_pipeline",),
                 quick={"iters": 500}, only=("weft", "go", "tokio"),
                 seed={"ns_per_pipeline": Seed(4670, "~214 千/秒, ~4.67 µs/Pipeline")},
                 targets={"ns_per_pipeline": Target(beats=("go", "tokio"))}),
        Scenario("pipeline", {"C": 8, "D": 20, "iters": 2000, "workers": 0}, ("ns_per_pipeline",),
                 quick={"iters": 500}, only=("weft", "go", "tokio")),
        # fork-join fib(30): one worker (libfork reaches ~13-16 ns here), then all cores; tokio
        # has no cheap fork-join (tokio-coflux does not run it)
        Scenario("fib", {"n": 30, "workers": 1}, ("ns_per_task",), only=("weft", "go", "tbb"),
                 targets={"ns_per_task": Target(at_most=20)}),
        Scenario("fib", {"n": 30, "workers": 0}, ("ns_per_task",), only=("weft", "go", "tbb"),
                 targets={"ns_per_task": Target(beats=("tbb", "go"))}),
        Scenario("parked_memory", {"tasks": 100_000}, ("bytes_per_parked_task",)),
        Scenario("idle_cpu", {"seconds": 1, "workers": 0}, ("idle_cpu_percent",),
                 targets={"idle_cpu_percent": Target(at_most=1)}),
    ),
    derived=(
        # the seed's "~1 µs per extra stage": what one more sequential hand-off costs
        Derived("pipeline", {"C": 8, "D": "20 vs 5"}, "stage_handoff_ns",
                inputs={"d5": Input("pipeline", {"C": 8, "D": 5}, "ns_per_pipeline"),
                        "d20": Input("pipeline", {"C": 8, "D": 20}, "ns_per_pipeline")},
                formula=lambda m: (m["d20"] - m["d5"]) / 15,
                seed=Seed(1000, "每增加一个阶段约 1000 纳秒 (D=5 → D=20)"),
                target=Target(at_most=100)),
    ),
    # Instruction counts: callgrind, (Ir at 2N - Ir at N) / 1.1N with N=100000 (the warm-up
    # runs N/10 more).
    limits=(
        Limit("fork", "ns_per_fork", "the task machinery's instructions: 189 a fork (fork "
              "forks=N under callgrind): the parent's loop making the child (frame from the "
              "recycling cache, promise) 61, fork's suspend (stop inheritance, deque push) 29, "
              "the child's run and final suspend 13, its completion popping the parent back "
              "41, the ready join 17, the frame's destroy and free 22, the thread's frame "
              "lists 6. 10 ns is 24 cycles of this machine's 2.45 GHz clock: 7.7 "
              "instructions a cycle; no peer of this suite runs the row"),
        Limit("spawn", "ns_per_task", "one spawner feeding 2 cores: 298 instructions a task "
              "(spawn workers=0 under callgrind; 318 with one worker): making the task 41 "
              "and scope::spawn 53 (scope count, deque push and its fence) on the spawner; "
              "the worker loop and picks 67 and the injector pass each task takes while the "
              "spawner outruns the other worker (its full deque sends 512 at a time) about "
              "30; the task's run, completion, scope count and frame free 93. tbb-coflux "
              "runs 567 instructions a task with one worker; on all cores, medians of 7 "
              "interleaved rounds on the shared 2-core machine: weft 90 ns, tbb 186, tokio "
              "1,030, go 937"),
    ),
)
