package main

// outbox_pg: Watermill's SQL forwarder, the peer of weft's outbox relay (bench/bus/
// bench_outbox.cpp) on the same PostgreSQL: N events over `keys` keys are staged first
// (untimed) through forwarder.Publisher over watermill-sql's Publisher inside business
// transactions of `per_txn` events (database/sql with lib/pq); then the forwarder (a
// watermill-sql Subscriber, DefaultPostgreSQLSchema with SubscribeBatchSize = batch, poll
// interval 1 ms as weft's relay's shortest) forwards them to a GoChannel, whose subscriber
// acks each; the clock stops at the N-th delivery and the forwarder is closed (its last
// offsets are committed by Close). Tables of their own per run, dropped at the end.

import (
	"context"
	stdsql "database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	_ "github.com/lib/pq"
)

func outboxPg(args map[string]int) {
	n, keys, perTxn, batch := args["events"], args["keys"], args["per_txn"], args["batch"]
	db, err := stdsql.Open("postgres", fmt.Sprintf(
		"host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", args["pg_port"]))
	if err != nil {
		die("open: %v", err)
	}
	defer db.Close()
	logger := watermill.NopLogger{}
	topic := fmt.Sprintf("wmfwd_%d", os.Getpid())
	schema := wsql.DefaultPostgreSQLSchema{SubscribeBatchSize: batch}
	sub, err := wsql.NewSubscriber(wsql.BeginnerFromStdSQL(db), wsql.SubscriberConfig{
		ConsumerGroup: "bench", SchemaAdapter: schema,
		OffsetsAdapter: wsql.DefaultPostgreSQLOffsetsAdapter{}, InitializeSchema: true,
		PollInterval: time.Millisecond}, logger)
	if err != nil {
		die("subscriber: %v", err)
	}
	if err := sub.SubscribeInitialize(topic); err != nil {
		die("schema: %v", err)
	}
	defer db.Exec(fmt.Sprintf(`DROP TABLE IF EXISTS "watermill_%s", "watermill_offsets_%s"`,
		topic, topic))
	payload := []byte(strings.Repeat("x", args["payload"]))
	for i := 0; i < n; {
		tx, err := db.Begin()
		if err != nil {
			die("begin: %v", err)
		}
		pub, err := wsql.NewPublisher(wsql.TxFromStdSQL(tx), wsql.PublisherConfig{
			SchemaAdapter: schema}, logger)
		if err != nil {
			die("publisher: %v", err)
		}
		fwdPub := forwarder.NewPublisher(pub, forwarder.PublisherConfig{ForwarderTopic: topic})
		for k := 0; k < perTxn && i < n; k, i = k+1, i+1 {
			m := message.NewMessage(watermill.NewUUID(), payload)
			m.Metadata.Set("key", "k"+strconv.Itoa(i%keys))
			if err := fwdPub.Publish("orders", m); err != nil {
				die("stage: %v", err)
			}
		}
		if err := tx.Commit(); err != nil {
			die("commit: %v", err)
		}
	}

	out := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 1024}, logger)
	delivered, err := out.Subscribe(context.Background(), "orders")
	if err != nil {
		die("subscribe: %v", err)
	}
	fwd, err := forwarder.NewForwarder(sub, out, logger, forwarder.Config{ForwarderTopic: topic})
	if err != nil {
		die("forwarder: %v", err)
	}
	cpu0, t0 := cpuTime(), time.Now()
	go func() {
		if err := fwd.Run(context.Background()); err != nil {
			die("forwarder: %v", err)
		}
	}()
	for got := 0; got < n; got++ {
		(<-delivered).Ack()
	}
	if err := fwd.Close(); err != nil {
		die("close: %v", err)
	}
	elapsed, cpu := time.Since(t0), cpuTime()-cpu0
	emit("relay_events_per_s", "events/s", float64(n)/elapsed.Seconds())
	emit("cpu_ns_per_event", "ns", float64(cpu.Nanoseconds())/float64(n))
	emit("ops", "", float64(n))
}
