"""timeline.py SYSTEM CONNS LOG: reads an h2load --log-file (start in µs since the epoch, status,
latency in µs per request) and prints when the first request of each of the CONNS connections
was answered (deciles, in ms from the run's first request) and, per 100 ms of the run, the
requests started, their median and their 99th percentile latency."""
import sys

system, conns, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = sorted(tuple(int(x) for x in line.split("\t")[:3]) for line in open(path) if line.strip())
t0 = rows[0][0]
first = sorted((start - t0 + latency) / 1000 for start, _, latency in rows[:conns])
deciles = " ".join(f"{first[min(len(first) - 1, i * len(first) // 10)]:.0f}" for i in range(10))
print(f"{system} c{conns}: first {len(first)} answers by (ms, deciles then last): {deciles} "
      f"last {first[-1]:.0f}")
buckets = {}
for start, _, latency in rows:
    buckets.setdefault((start - t0) // 100_000, []).append(latency / 1000)
for k in sorted(buckets):
    v = sorted(buckets[k])
    print(f"  {k * 100:5d} ms: {len(v):6d} requests, p50 {v[len(v) // 2]:.1f} ms, "
          f"p99 {v[int(0.99 * len(v))]:.1f} ms")
