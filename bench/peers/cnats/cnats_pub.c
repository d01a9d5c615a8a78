/* The raw-client peer of weft-bench's eventbus suite for NATS JetStream: cnats's own
 * asynchronous publish, with weft::bus's settings (bench/bus/bench_bus.cpp) and nothing on top.
 *
 *   cnats-pub SCENARIO messages=N [max_pending=1024] [body=224] [nats_port=4222]
 *
 * SCENARIO: nats_memory_async | nats_file_async, and nats_memory_awaited | nats_file_awaited,
 * which run the same async publish: the raw client's figure beside weft's awaited publish
 * from 1,000 tasks (anything else: exit 2, not supported).
 * Settings as weft's nats_backend: connect timeout 2 s, unlimited reconnects every 250 ms, a
 * 1 MiB write buffer; a stream of its own per run (memory or file storage, one replica, 2 min
 * duplicate window) deleted at the end; every message carries a Nats-Msg-Id of 36 characters
 * (weft's UUIDv7 text). The in-flight window is cnats's PublishAsync.MaxPending = max_pending:
 * at the window js_PublishMsgAsync waits inside cnats (StallWait) for an ack, the raw client's
 * own back-pressure. Acks are counted in cnats's ack handler (its own thread); latency is
 * publish call to ack handler. Body: `body` bytes, the size of weft's encoded envelope for the
 * same payload, so both put the same bytes on the wire. One untimed warm-up publish first.
 * Prints the protocol's JSON lines (tools/weft-bench/README.md). */
#define _GNU_SOURCE
#include <nats/nats.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/pub_args.h"
#include "../common/pub_report.h"

static int64_t* sent;  /* send time per message, by index */
static int64_t* lat;   /* latency per acked message, in ack order */
static int64_t acked, failed;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_done = PTHREAD_COND_INITIALIZER;
static int64_t expected;

static void on_ack(jsCtx* js, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
    (void)js;
    (void)closure;
    const char* id = NULL;
    int64_t t = now_ns();
    long idx = -1;
    if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) == NATS_OK && id != NULL) {
        idx = strtol(id + 24, NULL, 10); /* "bench-<pid, 17 digits>-<index, 12>" */
    }
    pthread_mutex_lock(&mu);
    if (idx >= 0) {
        if (pa != NULL) {
            lat[acked] = t - sent[idx];
            acked++;
        } else {
            failed++;
            if (failed == 1 && pae != NULL) {
                fprintf(stderr, "first failure: %s\n", natsStatus_GetText(pae->Err));
            }
        }
        if (acked + failed == expected) {
            pthread_cond_signal(&all_done);
        }
    }
    pthread_mutex_unlock(&mu);
    natsMsg_Destroy(msg);
}

static void check(natsStatus s, const char* what) {
    if (s != NATS_OK) {
        fprintf(stderr, "error: %s: %s\n", what, natsStatus_GetText(s));
        nats_PrintLastErrorStack(stderr);
        exit(1);
    }
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: cnats-pub SCENARIO key=value...\n");
        return 2;
    }
    int file_storage;
    if (strcmp(argv[1], "nats_memory_async") == 0 || strcmp(argv[1], "nats_memory_awaited") == 0) {
        file_storage = 0;
    } else if (strcmp(argv[1], "nats_file_async") == 0 ||
               strcmp(argv[1], "nats_file_awaited") == 0) {
        file_storage = 1;
    } else {
        return 2;
    }
    struct pub_args args;
    pub_args_parse(&args, argc, argv, "nats_port", 4222);
    const long long n = args.messages, max_pending = args.max_pending, body = args.body,
                    port = args.port;
    char url[64], stream[64], subject[64];
    snprintf(url, sizeof url, "nats://127.0.0.1:%lld", port);
    snprintf(stream, sizeof stream, "cnatsbench-%d-%lld", (int)getpid(), (long long)now_ns());
    snprintf(subject, sizeof subject, "%s", stream);

    natsOptions* opts = NULL;
    natsConnection* nc = NULL;
    jsCtx* js = NULL;
    check(natsOptions_Create(&opts), "options");
    check(natsOptions_SetURL(opts, url), "url");
    check(natsOptions_SetName(opts, "cnats-pub"), "name");
    check(natsOptions_SetTimeout(opts, 2000), "timeout");
    check(natsOptions_SetMaxReconnect(opts, -1), "reconnect");
    check(natsOptions_SetReconnectWait(opts, 250), "reconnect wait");
    check(natsOptions_SetIOBufSize(opts, 1 << 20), "io buffer");
    check(natsConnection_Connect(&nc, opts), url);

    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = max_pending;
    jo.PublishAsync.StallWait = 30000;
    jo.PublishAsync.AckHandler = on_ack;
    jo.Wait = 5000;
    check(natsConnection_JetStream(&js, nc, &jo), "jetstream");

    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    char dead[80];
    snprintf(dead, sizeof dead, "%s.dead-letter", subject);
    const char* subjects[2] = {subject, dead};
    cfg.Name = stream;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 2;
    cfg.Storage = file_storage ? js_FileStorage : js_MemoryStorage;
    cfg.Replicas = 1;
    cfg.Duplicates = 120LL * 1000000000LL;
    jsErrCode jerr = 0;
    check(js_AddStream(NULL, js, &cfg, NULL, &jerr), "add stream");

    char* data = malloc((size_t)body + 1);
    memset(data, 'x', (size_t)body);
    sent = calloc((size_t)n, sizeof *sent);
    lat = calloc((size_t)n, sizeof *lat);
    const int pid = (int)getpid();

    /* warm-up, untimed: a synchronous publish */
    {
        jsPubAck* pa = NULL;
        check(js_Publish(&pa, js, subject, data, (int)body, NULL, &jerr), "warm-up publish");
        jsPubAck_Destroy(pa);
    }

    expected = n;
    const struct pub_mark start = pub_mark_now();
    for (long long i = 0; i < n; ++i) {
        char id[48];
        /* 36 characters, as weft's UUID text: "bench-" + 17-digit pid + "-" + 12-digit index */
        snprintf(id, sizeof id, "bench-%017d-%012lld", pid, i);
        natsMsg* m = NULL;
        check(natsMsg_Create(&m, subject, NULL, data, (int)body), "message");
        /* The headers weft's default wire format (CloudEvents binary) puts on each of its
         * bench messages, of the same sizes, so both sides send the same bytes. */
        char key[24];
        snprintf(key, sizeof key, "%lld", i);
        check(natsMsgHeader_Add(m, "ce-specversion", "1.0"), "header");
        check(natsMsgHeader_Add(m, "ce-id", id), "header");
        check(natsMsgHeader_Add(m, "ce-source", "/weft"), "header");
        check(natsMsgHeader_Add(m, "ce-type", "bench.event"), "header");
        check(natsMsgHeader_Add(m, "ce-time", "2026-01-01T00:00:00.000000000Z"), "header");
        check(natsMsgHeader_Add(m, "ce-subject", key), "header");
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MsgId = id;
        po.MaxWait = 5000;
        sent[i] = now_ns();
        natsStatus s = js_PublishMsgAsync(js, &m, &po);
        if (s != NATS_OK) {
            natsMsg_Destroy(m);
            check(s, "publish async");
        }
    }
    pthread_mutex_lock(&mu);
    while (acked + failed < n) {
        pthread_cond_wait(&all_done, &mu);
    }
    pthread_mutex_unlock(&mu);
    pub_report(&start, n, lat, acked);

    js_DeleteStream(js, stream, NULL, &jerr);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    natsOptions_Destroy(opts);
    free(data);
    free(sent);
    free(lat);
    return 0;
}
