/* What the eventbus suite's raw-client peers (cnats-pub, rdkafka-pub) measure and print, the
 * same figures as weft's bench_bus async mode (tools/weft-bench/README.md, "Scenario program
 * protocol"): one JSON line per metric on stdout.
 *
 *   struct pub_mark start = pub_mark_now();
 *   ... publish n, collect n send-to-ack latencies in lat[0..acked) ...
 *   pub_report(&start, n, lat, acked);
 *
 * Latencies are sorted in place. CPU is the whole process's (every client thread), user +
 * system, from getrusage; memory is VmRSS from /proc/self/status. */
#ifndef WEFT_BENCH_PEERS_PUB_REPORT_H
#define WEFT_BENCH_PEERS_PUB_REPORT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static inline long rss_kib(void) {
    FILE* f = fopen("/proc/self/status", "r");
    char line[256];
    long v = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            v = atol(line + 6);
        }
    }
    if (f) {
        fclose(f);
    }
    return v;
}

static inline void emit(const char* metric, const char* unit, double value) {
    printf("{\"metric\": \"%s\", \"unit\": \"%s\", \"value\": %.6g}\n", metric, unit, value);
}

/* Where a timed run starts: wall clock, process CPU, RSS. */
struct pub_mark {
    int64_t t_ns;
    double cpu_s;
    long rss_kib;
};

static inline struct pub_mark pub_mark_now(void) {
    struct pub_mark m;
    m.rss_kib = rss_kib();
    m.cpu_s = cpu_s();
    m.t_ns = now_ns();
    return m;
}

static inline int pub_cmp64(const void* a, const void* b) {
    int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
    return (x > y) - (x < y);
}

/* Ends the timed run begun at *start (n messages sent, `acked` of them acknowledged with the
 * latencies in lat) and prints its figures. */
static inline void pub_report(const struct pub_mark* start,
                              long long n,
                              int64_t* lat,
                              int64_t acked) {
    const int64_t t1 = now_ns();
    const double cpu1 = cpu_s();
    const long rss1 = rss_kib();
    qsort(lat, (size_t)acked, sizeof *lat, pub_cmp64);
    double mean = 0;
    for (int64_t i = 0; i < acked; ++i) {
        mean += (double)lat[i];
    }
    emit("msgs_per_s", "msg/s", (double)n / ((double)(t1 - start->t_ns) / 1e9));
    if (acked > 0) {
        emit("mean_latency_ms", "ms", mean / (double)acked / 1e6);
        int64_t p = acked * 99 / 100;
        emit("p99_latency_ms", "ms", (double)lat[p < acked ? p : acked - 1] / 1e6);
    }
    emit("success_percent", "%", 100.0 * (double)acked / (double)n);
    emit("mem_delta_mb", "MB", (double)(rss1 - start->rss_kib) / 1024.0);
    emit("cpu_ns_per_msg", "ns", (cpu1 - start->cpu_s) * 1e9 / (double)n);
    emit("ops", "", (double)n);
    fflush(stdout);
}

#endif
