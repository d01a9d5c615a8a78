package main

// outbox_pg: Watermill's SQL forwarder, the peer of weft's outbox relay (bench/bus/
// bench_outbox.cpp) on the same PostgreSQL: N events over `keys` keys are staged first
// (untimed) through forwarder.Publisher over watermill-sql's Publisher inside business
// transactions of `per_txn` events (database/sql with lib/pq); then the forwarder (a
// watermill-sql Subscriber, DefaultPostgreSQLSchema with SubscribeBatchSize = batch, poll
// interval 1 ms as weft's relay's shortest) forwards them to a GoChannel, whose subscriber
// acks each; the clock stops at the N-th delivery and the forwarder is closed (its last
// offsets are committed by Close). Tables of their own per run, dropped at the end.
// server_cpu_ns_per_event: PostgreSQL's CPU during the drain (its postmaster and children,
// from /proc), as bench_outbox reports it for weft's relay.

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
	var backendPid int
	if err := db.QueryRow("SELECT pg_backend_pid()").Scan(&backendPid); err != nil {
		die("backend pid: %v", err)
	}
	postmaster := parentPid(backendPid)
	server0 := serverCPU(postmaster)
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
	server := serverCPU(postmaster) - server0
	emit("relay_events_per_s", "events/s", float64(n)/elapsed.Seconds())
	emit("cpu_ns_per_event", "ns", float64(cpu.Nanoseconds())/float64(n))
	if postmaster > 0 {
		emit("server_cpu_ns_per_event", "ns", server*1e9/float64(n))
	}
	emit("ops", "", float64(n))
}

// procStat reads the parent pid and the CPU seconds (utime + stime) of a process; with
// reaped, those of the children it has waited for too (cutime + cstime).
func procStat(pid int, reaped bool) (ppid int, cpu float64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 15 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	if reaped {
		cut, _ := strconv.ParseFloat(f[13], 64)
		cst, _ := strconv.ParseFloat(f[14], 64)
		ut, st = ut+cut, st+cst
	}
	return ppid, (ut + st) / 100, true // USER_HZ is 100 on Linux
}

func parentPid(pid int) int {
	if ppid, _, ok := procStat(pid, false); ok {
		return ppid
	}
	return -1
}

// serverCPU: CPU seconds of a PostgreSQL postmaster and all its children, living or ended
// (the postmaster's reaped children).
func serverCPU(postmaster int) float64 {
	if postmaster <= 0 {
		return 0
	}
	entries, _ := os.ReadDir("/proc")
	total := 0.0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, cpu, ok := procStat(pid, pid == postmaster); ok && (pid == postmaster || ppid == postmaster) {
			total += cpu
		}
	}
	return total
}
