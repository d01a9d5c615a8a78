/* The raw-client peer of weft-bench's eventbus suite for Kafka: librdkafka's own produce,
 * with weft::bus's settings (bench/bus/bench_bus.cpp, src/bus/kafka_producer.cpp) and nothing
 * on top.
 *
 *   rdkafka-pub SCENARIO messages=N [max_pending=1024] [body=224] [kafka_port=9092]
 *               [linger_ms=5] [batch_messages=0]
 *
 * SCENARIO: kafka_async, and kafka_awaited, which runs the same: the raw client's figure
 * beside weft's awaited publish from 1,000 tasks (anything else: exit 2, not supported).
 * Settings as weft's kafka_backend: enable.idempotence=true, acks=all, linger.ms=linger_ms,
 * batch.num.messages=batch_messages (0: max_pending / 4, at least 1, at most 10,000, as
 * weft's default), partitioner=murmur2_random, message.timeout.ms=30000,
 * queue.buffering.max.messages = 2 x max_pending + 1024, queue.buffering.max.kbytes=1048576,
 * no compression (librdkafka's default, as weft's); a topic of its own per run (one
 * partition, replication factor 1) made through the admin API before the clock starts; key =
 * the message's index, the ce_* headers weft's CloudEvents binary mode sends (ce_id a
 * 36-character id). The in-flight window is weft's:
 * at max_pending unacknowledged messages the program serves delivery reports
 * (rd_kafka_poll) before producing more; reports arrive through the classic dr_msg_cb on the
 * producing thread. Latency: produce call to delivery report. Body: `body` bytes, the size of
 * weft's encoded envelope for the same payload. One untimed warm-up message first; the clock
 * starts after its report, as in weft's bench_bus. The warm-up takes about a second here
 * (librdkafka asked for the new topic's metadata 0.95 s after the first produce to it; weft's
 * backend reads it when it creates the topic), so this program's timed run starts about a
 * second after the topic was made, weft's some 15 ms after: giving weft a 1 s pause there
 * made no difference. */
#define _GNU_SOURCE
#include <dirent.h>
#include <librdkafka/rdkafka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/pub_args.h"
#include "../common/pub_report.h"

static int64_t* sent;
static int64_t* lat;
static int64_t acked, failed;

static void on_delivery(rd_kafka_t* rk, const rd_kafka_message_t* m, void* opaque) {
    (void)rk;
    (void)opaque;
    intptr_t idx = (intptr_t)m->_private;
    if (idx < 0) {
        return; /* the warm-up message */
    }
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        lat[acked++] = now_ns() - sent[idx];
    } else if (failed++ == 0) {
        fprintf(stderr, "first failure: %s\n", rd_kafka_err2str(m->err));
    }
}

/* CPU time (ns, schedstat) of librdkafka's broker threads ("rdk:broker<id>"), printed on stderr
 * for the timed run as bench_bus does: they spin in the slow runs. */
static int64_t rdk_broker_cpu_ns(void) {
    int64_t sum = 0;
    DIR* d = opendir("/proc/self/task");
    struct dirent* e;
    while (d && (e = readdir(d))) {
        char path[300], name[64] = {0};
        long long run = 0;
        if (e->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE* f = fopen(path, "r");
        if (f) {
            if (!fgets(name, sizeof name, f)) {
                name[0] = 0;
            }
            fclose(f);
        }
        if (strncmp(name, "rdk:broker", 10) != 0) {
            continue;
        }
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%lld", &run) == 1) {
                sum += run;
            }
            fclose(f);
        }
    }
    if (d) {
        closedir(d);
    }
    return sum;
}

static void set(rd_kafka_conf_t* conf, const char* k, const char* v) {
    char err[256];
    if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "error: %s=%s: %s\n", k, v, err);
        exit(1);
    }
}

static void create_topic(rd_kafka_t* rk, const char* topic) {
    char err[256];
    rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(topic, 1, 1, err, sizeof err);
    rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t* ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_operation_timeout(ao, 10000, err, sizeof err);
    rd_kafka_CreateTopics(rk, &nt, 1, ao, q);
    rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 15000);
    const rd_kafka_CreateTopics_result_t* res = ev ? rd_kafka_event_CreateTopics_result(ev) : NULL;
    size_t cnt = 0;
    const rd_kafka_topic_result_t** tr = res ? rd_kafka_CreateTopics_result_topics(res, &cnt) : NULL;
    if (!ev || rd_kafka_event_error(ev) || cnt != 1 || rd_kafka_topic_result_error(tr[0])) {
        fprintf(stderr, "error: create topic %s: %s\n", topic,
                ev ? (cnt == 1 ? rd_kafka_topic_result_error_string(tr[0])
                               : rd_kafka_event_error_string(ev))
                   : "timed out");
        exit(1);
    }
    rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(ao);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
}

static void produce(rd_kafka_t* rk, const char* topic, const char* key, const char* id,
                    const char* data, size_t len, intptr_t idx) {
    for (;;) {
        rd_kafka_resp_err_t e = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, strlen(key)),
            RD_KAFKA_V_VALUE((void*)data, len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            /* The headers weft's default wire format (CloudEvents binary) puts on each of its
             * bench messages, of the same sizes, so both sides send the same bytes. */
            RD_KAFKA_V_HEADER("ce_specversion", "1.0", 3), RD_KAFKA_V_HEADER("ce_id", id, 36),
            RD_KAFKA_V_HEADER("ce_source", "/weft", 5),
            RD_KAFKA_V_HEADER("ce_type", "bench.event", 11),
            RD_KAFKA_V_HEADER("ce_time", "2026-01-01T00:00:00.000000000Z", 30),
            RD_KAFKA_V_HEADER("ce_subject", key, (ssize_t)strlen(key)),
            RD_KAFKA_V_OPAQUE((void*)idx), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
            return;
        }
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            fprintf(stderr, "error: produce: %s\n", rd_kafka_err2str(e));
            exit(1);
        }
        rd_kafka_poll(rk, 100);
    }
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: rdkafka-pub SCENARIO key=value...\n");
        return 2;
    }
    if (strcmp(argv[1], "kafka_async") != 0 && strcmp(argv[1], "kafka_awaited") != 0) {
        return 2;
    }
    struct pub_args args;
    pub_args_parse(&args, argc, argv, "kafka_port", 9092);
    const long long n = args.messages, max_pending = args.max_pending, body = args.body,
                    port = args.port, linger_ms = args.linger_ms;
    long long batch = args.batch_messages;
    char brokers[64], topic[96], buf[64];
    snprintf(brokers, sizeof brokers, "127.0.0.1:%lld", port);
    snprintf(topic, sizeof topic, "rdkafkabench-%d-%lld", (int)getpid(), (long long)now_ns());

    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", brokers);
    set(conf, "client.id", "rdkafka-pub");
    set(conf, "enable.idempotence", "true");
    set(conf, "acks", "all");
    snprintf(buf, sizeof buf, "%lld", linger_ms);
    set(conf, "linger.ms", buf);
    if (batch == 0) {
        batch = max_pending / 4 < 1 ? 1 : max_pending / 4 > 10000 ? 10000 : max_pending / 4;
    }
    snprintf(buf, sizeof buf, "%lld", batch);
    set(conf, "batch.num.messages", buf);
    set(conf, "partitioner", "murmur2_random");
    set(conf, "message.timeout.ms", "30000");
    snprintf(buf, sizeof buf, "%lld", max_pending * 2 + 1024);
    set(conf, "queue.buffering.max.messages", buf);
    set(conf, "queue.buffering.max.kbytes", "1048576");
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    create_topic(rk, topic);

    char* data = malloc((size_t)body + 1);
    memset(data, 'x', (size_t)body);
    sent = calloc((size_t)n, sizeof *sent);
    lat = calloc((size_t)n, sizeof *lat);
    const int pid = (int)getpid();
    char id[48], key[24];

    /* warm-up, untimed: metadata, the producer id, the partition leader */
    snprintf(id, sizeof id, "warm-%030d", pid);
    produce(rk, topic, "warm-up", id, data, (size_t)body, -1);
    if (rd_kafka_flush(rk, 30000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fprintf(stderr, "error: warm-up not delivered\n");
        return 1;
    }

    const int64_t rdk_before = rdk_broker_cpu_ns();
    const struct pub_mark start = pub_mark_now();
    for (long long i = 0; i < n; ++i) {
        while (i - (acked + failed) >= max_pending) {
            rd_kafka_poll(rk, 1000);
        }
        snprintf(id, sizeof id, "bench-%017d-%012lld", pid, i % 1000000000000LL);
        snprintf(key, sizeof key, "%lld", i);
        sent[i] = now_ns();
        produce(rk, topic, key, id, data, (size_t)body, (intptr_t)i);
        rd_kafka_poll(rk, 0);
    }
    while (acked + failed < n) {
        rd_kafka_poll(rk, 1000);
    }
    const int64_t rdk_ns = rdk_broker_cpu_ns() - rdk_before;
    pub_report(&start, n, lat, acked);
    fprintf(stderr, "librdkafka broker threads: %.2f ms CPU in the timed run\n", rdk_ns / 1e6);

    rd_kafka_destroy(rk);
    free(data);
    free(sent);
    free(lat);
    return 0;
}
