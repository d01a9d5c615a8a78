/* The command line of the eventbus suite's raw-client peers (cnats-pub, rdkafka-pub):
 *
 *   PROGRAM SCENARIO messages=N [max_pending=1024] [body=224] [<port_key>=<default_port>]
 *           [linger_ms=5] [batch_messages=0]
 *
 * The suite passes every program the same key=value list; a key a client does not use
 * (weft's payload, tasks, the other broker's port) is skipped. A value that is not an integer
 * is a usage error: exit 2. Which SCENARIOs a client runs is its own check. */
#ifndef WEFT_BENCH_PEERS_PUB_ARGS_H
#define WEFT_BENCH_PEERS_PUB_ARGS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pub_args {
    long long messages;
    long long max_pending;
    long long body; /* bytes per message: weft's encoded envelope for the same payload */
    long long port;
    long long linger_ms;      /* Kafka only */
    long long batch_messages; /* Kafka only; 0 = the client's default */
};

/* Reads argv[2..] into *a; exits 2 on a malformed parameter. */
static inline void pub_args_parse(
    struct pub_args* a, int argc, char** argv, const char* port_key, long long default_port) {
    a->messages = 10000;
    a->max_pending = 1024;
    a->body = 224;
    a->port = default_port;
    a->linger_ms = 5;
    a->batch_messages = 0;
    for (int i = 2; i < argc; ++i) {
        long long v;
        char key[64];
        if (sscanf(argv[i], "%63[^=]=%lld", key, &v) != 2) {
            fprintf(stderr, "bad parameter %s\n", argv[i]);
            exit(2);
        }
        if (strcmp(key, "messages") == 0) {
            a->messages = v;
        } else if (strcmp(key, "max_pending") == 0) {
            a->max_pending = v;
        } else if (strcmp(key, "body") == 0) {
            a->body = v;
        } else if (strcmp(key, port_key) == 0) {
            a->port = v;
        } else if (strcmp(key, "linger_ms") == 0) {
            a->linger_ms = v;
        } else if (strcmp(key, "batch_messages") == 0) {
            a->batch_messages = v;
        }
    }
}

#endif
