// Command bus is the Go peer of weft-bench's eventbus suite (seed 004): the seed's own shape
// in Go, on the same brokers and with weft's settings (bench/bus/bench_bus.cpp).
//
//	bus SCENARIO messages=N [max_pending=1024] [body=224] [payload=128] [nats_port=4222]
//	    [kafka_port=9092] [linger_ms=5] [ack_workers=48] [async_max_pending=100000]
//
// Scenarios:
//   - nats_memory_async, nats_file_async: the seed's shape, with the seed's sizes: nats.go
//     JetStream PublishAsync with a Nats-Msg-Id per message and PublishAsyncMaxPending =
//     async_max_pending (the seed's 100,000; StallWait 30 s at it, instead of the 200 ms
//     default that fails a publish on a busy machine); every PubAckFuture goes on an ack
//     channel (buffer 100,000) served by a fixed pool of ack_workers (the seed's 48, its
//     runtime.NumCPU() x 2 on its machine), each of which waits on the future and sends a
//     result on a result channel (buffer 100,000) that one reader drains: the seed's "shared
//     ACK worker pool". The connection keeps nats.go's own write buffer (32 KiB, not
//     settable) and a 1 MiB reconnect buffer (ReconnectBufSize: what it holds while
//     disconnected).
//   - kafka_async: franz-go, acks=all, idempotent (franz-go's default: at most 5 requests in
//     flight), linger linger_ms, no compression (franz-go's default is snappy; weft and
//     librdkafka send uncompressed), Kafka's murmur2 key partitioner, MaxBufferedRecords =
//     max_pending; each record's promise sends its result on the result channel. franz-go
//     has no batch.num.messages: a batch is bounded by bytes (1 MB, as librdkafka's
//     batch.size), and a Produce that finds MaxBufferedRecords reached ends every linger.
//   - memory_async: Watermill's GoChannel, its in-process pub/sub (the one its docs give for
//     tests and in-process use), without persistence: Persistent would keep every message
//     ever published (a slice that only grows) where weft's memory broker keeps the last
//     65,536, and GoChannel has no bound to set; without it, a publish with no subscriber
//     keeps nothing. Publish one message at a time. memory_deliver: GoChannel with one
//     subscriber that acks every message (the clock stops at the N-th ack).
//
// The *_awaited scenarios run the same as *_async (memory_awaited: memory_async): the seed's
// shape beside weft's awaited publish from 1,000 tasks.
//
// outbox_pg: Watermill's SQL forwarder on PostgreSQL (outbox.go).
//
// A stream / topic of its own per run, made before the clock starts (the NATS stream deleted
// at the end); one untimed warm-up message. Body: `body` bytes for NATS and Kafka (the size
// of weft's encoded envelope), `payload` bytes for Watermill (its message carries its UUID
// and metadata itself). Prints the weft-bench protocol's JSON lines; exit 2: not supported.
package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type params struct {
	messages, maxPending, body, payload, natsPort, kafkaPort, lingerMs int
	ackWorkers, asyncMaxPending                                        int
}

type result struct {
	index int
	err   error
	at    time.Time
}

type run struct {
	sent     []time.Time
	lat      []time.Duration
	failed   int
	firstErr error
	elapsed  time.Duration
	cpu      time.Duration
	rss0     int64
	rss1     int64
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func rssKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

func die(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "error: "+format+"\n", a...)
	os.Exit(1)
}

func emit(metric, unit string, v float64) {
	fmt.Printf("{\"metric\": %q, \"unit\": %q, \"value\": %g}\n", metric, unit, v)
}

func (r *run) start(n int) {
	r.sent = make([]time.Time, n)
	r.lat = make([]time.Duration, 0, n)
	r.rss0 = rssKiB()
	runtime.GC()
}

func (r *run) collect(res result) {
	if res.err != nil {
		if r.failed == 0 {
			r.firstErr = res.err
		}
		r.failed++
		return
	}
	r.lat = append(r.lat, res.at.Sub(r.sent[res.index]))
}

func (r *run) print(p params, rate string) {
	n := float64(p.messages)
	emit(rate, "msg/s", n/r.elapsed.Seconds())
	if len(r.lat) > 0 {
		slices.Sort(r.lat)
		var sum time.Duration
		for _, d := range r.lat {
			sum += d
		}
		emit("mean_latency_ms", "ms", float64(sum)/float64(len(r.lat))/1e6)
		emit("p99_latency_ms", "ms", float64(r.lat[min(len(r.lat)-1, len(r.lat)*99/100)])/1e6)
	}
	emit("success_percent", "%", 100*float64(len(r.lat))/n)
	emit("mem_delta_mb", "MB", float64(r.rss1-r.rss0)/1024)
	emit("cpu_ns_per_msg", "ns", float64(r.cpu.Nanoseconds())/n)
	emit("ops", "", n)
	if r.failed > 0 {
		fmt.Fprintf(os.Stderr, "%d of %d failed; first: %v\n", r.failed, p.messages, r.firstErr)
	}
}

func natsSeed(p params, storage nats.StorageType) {
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", p.natsPort), nats.Name("go-bus"),
		nats.Timeout(2*time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
		nats.ReconnectBufSize(1<<20))
	if err != nil {
		die("connect: %v", err)
	}
	defer nc.Close()
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(p.asyncMaxPending))
	if err != nil {
		die("jetstream: %v", err)
	}
	stream := fmt.Sprintf("gobench-%d-%d", os.Getpid(), time.Now().UnixNano())
	if _, err := js.AddStream(&nats.StreamConfig{Name: stream,
		Subjects: []string{stream, stream + ".dead-letter"}, Storage: storage, Replicas: 1,
		Duplicates: 2 * time.Minute}); err != nil {
		die("add stream: %v", err)
	}
	defer js.DeleteStream(stream)
	body := []byte(strings.Repeat("x", p.body))
	if _, err := js.Publish(stream, body); err != nil {
		die("warm-up: %v", err)
	}

	type ackTask struct {
		future nats.PubAckFuture
		index  int
	}
	ackCh := make(chan ackTask, 100_000)
	results := make(chan result, 100_000)
	var workers sync.WaitGroup
	for w := 0; w < p.ackWorkers; w++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for t := range ackCh {
				select {
				case <-t.future.Ok():
					results <- result{index: t.index, at: time.Now()}
				case err := <-t.future.Err():
					results <- result{index: t.index, err: err, at: time.Now()}
				}
			}
		}()
	}
	var r run
	r.start(p.messages)
	done := make(chan struct{})
	go func() {
		for i := 0; i < p.messages; i++ {
			r.collect(<-results)
		}
		close(done)
	}()
	cpu0, t0 := cpuTime(), time.Now()
	pid := os.Getpid()
	for i := 0; i < p.messages; i++ {
		m := nats.NewMsg(stream)
		m.Data = body
		r.sent[i] = time.Now()
		f, err := js.PublishMsgAsync(m, nats.MsgId(fmt.Sprintf("bench-%017d-%012d", pid, i)),
			nats.StallWait(30*time.Second))
		if err != nil {
			die("publish: %v", err)
		}
		ackCh <- ackTask{future: f, index: i}
	}
	<-done
	r.elapsed, r.cpu, r.rss1 = time.Since(t0), cpuTime()-cpu0, rssKiB()
	close(ackCh)
	workers.Wait()
	r.print(p, "msgs_per_s")
}

func kafkaSeed(p params) {
	brokers := fmt.Sprintf("127.0.0.1:%d", p.kafkaPort)
	topic := fmt.Sprintf("gobench-%d-%d", os.Getpid(), time.Now().UnixNano())
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ClientID("go-bus"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Duration(p.lingerMs)*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.MaxBufferedRecords(p.maxPending), kgo.RecordDeliveryTimeout(30*time.Second),
		kgo.DefaultProduceTopic(topic))
	if err != nil {
		die("client: %v", err)
	}
	defer cl.Close()
	ctx := context.Background()
	adm := kadm.NewClient(cl)
	if res, err := adm.CreateTopics(ctx, 1, 1, nil, topic); err != nil || res[topic].Err != nil {
		die("create topic: %v %v", err, res[topic].Err)
	}
	body := []byte(strings.Repeat("x", p.body))
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("warm-up"), Value: body}).FirstErr(); err != nil {
		die("warm-up: %v", err)
	}
	results := make(chan result, 100_000)
	var r run
	r.start(p.messages)
	done := make(chan struct{})
	go func() {
		for i := 0; i < p.messages; i++ {
			r.collect(<-results)
		}
		close(done)
	}()
	cpu0, t0 := cpuTime(), time.Now()
	pid := os.Getpid()
	for i := 0; i < p.messages; i++ {
		idx := i
		rec := &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: body,
			Headers: []kgo.RecordHeader{{Key: "weft-id", Value: []byte(fmt.Sprintf("bench-%017d-%012d", pid, i))}}}
		r.sent[i] = time.Now()
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			results <- result{index: idx, err: err, at: time.Now()}
		})
	}
	<-done
	r.elapsed, r.cpu, r.rss1 = time.Since(t0), cpuTime()-cpu0, rssKiB()
	r.print(p, "msgs_per_s")
}

func watermillGoChannel(p params, deliver bool) {
	logger := watermill.NopLogger{}
	ps := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: int64(p.maxPending)},
		logger)
	defer ps.Close()
	const topic = "bench"
	payload := []byte(strings.Repeat("x", p.payload))
	var r run
	r.start(p.messages)
	var done chan struct{}
	if deliver {
		msgs, err := ps.Subscribe(context.Background(), topic)
		if err != nil {
			die("subscribe: %v", err)
		}
		done = make(chan struct{})
		go func() {
			for i := 0; i < p.messages; i++ {
				m := <-msgs
				idx, _ := strconv.Atoi(m.Metadata.Get("index"))
				m.Ack()
				r.collect(result{index: idx, at: time.Now()})
			}
			close(done)
		}()
	}
	cpu0, t0 := cpuTime(), time.Now()
	for i := 0; i < p.messages; i++ {
		m := message.NewMessage(watermill.NewUUID(), payload)
		m.Metadata.Set("index", strconv.Itoa(i))
		r.sent[i] = time.Now()
		if err := ps.Publish(topic, m); err != nil {
			die("publish: %v", err)
		}
		if !deliver {
			r.collect(result{index: i, at: time.Now()})
		}
	}
	if deliver {
		<-done
	}
	r.elapsed, r.cpu, r.rss1 = time.Since(t0), cpuTime()-cpu0, rssKiB()
	if deliver {
		r.print(p, "deliveries_per_s")
	} else {
		r.print(p, "msgs_per_s")
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bus SCENARIO key=value...")
		os.Exit(2)
	}
	p := params{messages: 10000, maxPending: 1024, body: 224, payload: 128, natsPort: 4222,
		kafkaPort: 9092, lingerMs: 5, ackWorkers: 48, asyncMaxPending: 100_000}
	outbox := map[string]int{"events": 20000, "keys": 100, "per_txn": 100, "batch": 512,
		"payload": 128, "pg_port": 5432}
	keys := map[string]*int{"messages": &p.messages, "max_pending": &p.maxPending,
		"body": &p.body, "payload": &p.payload, "nats_port": &p.natsPort,
		"kafka_port": &p.kafkaPort, "linger_ms": &p.lingerMs, "ack_workers": &p.ackWorkers,
		"async_max_pending": &p.asyncMaxPending}
	for _, a := range os.Args[2:] {
		k, v, ok := strings.Cut(a, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil {
			fmt.Fprintf(os.Stderr, "bad parameter %s\n", a)
			os.Exit(2)
		}
		if dst, known := keys[k]; known {
			*dst = n
		}
		if _, known := outbox[k]; known {
			outbox[k] = n
		}
	}
	switch os.Args[1] {
	case "nats_memory_async", "nats_memory_awaited":
		natsSeed(p, nats.MemoryStorage)
	case "nats_file_async", "nats_file_awaited":
		natsSeed(p, nats.FileStorage)
	case "kafka_async", "kafka_awaited":
		kafkaSeed(p)
	case "memory_async", "memory_awaited":
		watermillGoChannel(p, false)
	case "memory_deliver":
		watermillGoChannel(p, true)
	case "outbox_pg":
		outboxPg(outbox)
	default:
		os.Exit(2)
	}
}
