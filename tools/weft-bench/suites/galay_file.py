"""Seed 003 (Galay-Kernel, C++20): file IO. The seed's bench_file_io scenarios (4 workers x 1000
ops x 4 KiB at batch 1 and 4, 8 workers x 500 ops; its Linux figures are epoll + libaio, its
io_uring row was left "to be tested"), plus random 4 KiB reads and writes at queue depth 1 and 32
on a 256 MiB file, buffered and O_DIRECT, against fio with the io_uring and libaio engines at the
same depth, block size and file (and fio's psync engine at queue depth 1)."""
from weftbench.suite import HIGHER, Derived, Input, Metric, Scenario, Seed, Suite, System, Target

FIO = "bench/peers/fio/fio-file-io"
FIO_BUILD = "apt-get install fio (scripts/setup.sh)"
# fio's engines, each a peer; a file row is judged against all that run it (the fastest
# decides). psync is synchronous (depth 1): it runs the queue-depth-1 rows only.
FIO_ENGINES = ("fio-io_uring", "fio-libaio", "fio-psync")


def engines(qd: int) -> tuple[str, ...]:
    return FIO_ENGINES if qd == 1 else tuple(e for e in FIO_ENGINES if e != "fio-psync")

SEED_NOTE = "seed 003, epoll + libaio, Linux 6.8"

# (workers, ops per worker, batch, the seed's read IOPS, its words)
SEED_RUNS = ((4, 1000, 1, 2_663, "基准 (4w, b=1): 读取 IOPS 2,663"),
             (4, 1000, 4, 5_004, "批量 (4w, b=4): 读取 IOPS 5,004"),
             (8, 500, 1, 2_497, "高并发 (8w, b=1): 读取 IOPS 2,497"))

SUITE = Suite(
    name="galay-file",
    title="Galay-Kernel (seed 003): file IO with batching, and random 4 KiB IO against fio",
    seed_file="003_2c837114ee96d0ab.txt",
    notes="mixed = the seed's bench_file_io: each worker task writes its blocks to a file of its "
          "own and reads them back (n writes + n reads per worker), -batch N submits N at once "
          "(weft::file_batch). Random scenarios: one worker thread with qd tasks (fio: one job, "
          "iodepth=qd), time based, on /tmp/galay-file-256m.dat (ext4 here: O_DIRECT is "
          "honoured; buffered runs hit the page cache, as fio's with invalidate=0). Target: "
          "weft beats every fio engine of the row (io_uring and libaio; psync too at queue "
          "depth 1), so the fastest decides; the ratio column shows which. Batching target: "
          "batch4 / batch1 read IOPS >= 1. "
          "Like with like: weft runs its io_uring backend (backend=io_uring, never a silent epoll "
          "fallback); both rings are SINGLE_ISSUER|DEFER_TASKRUN, neither registers files or "
          "buffers (fio's registerfiles=0 fixedbufs=0 sqthread_poll=0, stated on its command "
          "line), both use plain READ/WRITE SQEs. fio runs as its users run it for IOPS: "
          "gtod_reduce=1, IO submitted and reaped in batches of min(32, qd) "
          "(iodepth_batch_submit, iodepth_batch_complete_min; t/io_uring's batch sizes); weft "
          "submits buffered IO its tasks queued in one enter per loop turn, and O_DIRECT IO at "
          "once when others are in flight. Buffered random writes on ext4 go through io-wq "
          "for both (no FOP_BUFFER_WASYNC): those rows measure io-wq hand-offs and swing with "
          "the machine's load (100k-550k IOPS run to run for either), so read them over many "
          "rounds.",
    # Buffered random writes go through io-wq and swing several-fold run to run (see notes):
    # 3 rounds of those rows decide nothing, 5 make the median usable.
    rounds={"quick": 5, "full": 10},
    unplotted=("duration_s",),  # how long a run took: a fact of the run, not a result
    systems=(
        System("weft", "{bin}/bench_file_io",
               build="cmake --build build/release --target bench_file_io"),
        System("fio-io_uring", FIO, extra=("engine=io_uring",), build=FIO_BUILD),
        System("fio-libaio", FIO, extra=("engine=libaio",), build=FIO_BUILD),
        System("fio-psync", FIO, extra=("engine=psync",), build=FIO_BUILD),
    ),
    metrics={
        "read_iops": Metric("op/s", HIGHER),
        "write_iops": Metric("op/s", HIGHER),
        "iops": Metric("op/s", HIGHER),
        "mb_per_s": Metric("MB/s", HIGHER),
        "duration_s": Metric("s"),
        "errors": Metric("count"),
        "batch_gain": Metric("x", HIGHER),
    },
    scenarios=tuple(
        [Scenario("mixed", {"w": w, "n": n, "b": 4096, "batch": batch, "dir": "/tmp"},
                  ("read_iops", "write_iops", "mb_per_s", "duration_s", "errors"),
                  only=("weft",),
                  seed={"read_iops": Seed(iops, f"{words} ({SEED_NOTE})")},
                  targets={"read_iops": Target(at_least=20 * iops), "errors": Target(at_most=0)})
         for w, n, batch, iops, words in SEED_RUNS]
        + [Scenario(rw, {"qd": qd, "bs": 4096, "size_mb": 256, "direct": direct, "ms": 3000,
                         "dir": "/tmp", "backend": "io_uring"},
                    ("iops", "mb_per_s", "errors"),
                    quick={"ms": 250}, only=("weft", *engines(qd)),
                    targets={"iops": Target(beats=engines(qd)),
                             "errors": Target(at_most=0)})
           for rw in ("randread", "randwrite") for direct in (0, 1) for qd in (1, 32)]),
    derived=(
        Derived("mixed", {"w": 4, "n": 1000, "batch": "4 vs 1"}, "batch_gain",
                inputs={"b1": Input("mixed", {"w": 4, "n": 1000, "batch": 1}, "read_iops"),
                        "b4": Input("mixed", {"w": 4, "n": 1000, "batch": 4}, "read_iops")},
                formula=lambda m: m["b4"] / m["b1"],
                seed=Seed(5_004 / 2_663, "批量操作显著提升性能: batch=4 时性能提升 88%"),
                target=Target(at_least=1.0)),
    ),
)
