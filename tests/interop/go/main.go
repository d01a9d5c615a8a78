// weft-interop-go: a service written without weft, on nats.go alone, that reads the events a
// weft publisher sends and publishes events for a weft subscriber, both in CloudEvents binary
// content mode as the NATS protocol binding defines it (ce- headers, values percent-encoded,
// the data as the body). The weft side of the exchange is tests/bus/test_nats_backend.cpp.
//
//	weft-interop-go consume URL SUBJECT ID SOURCE TYPE SUBJECTATTR TENANT PAYLOAD
//	weft-interop-go publish URL SUBJECT ID PAYLOAD
//	weft-interop-go kafka-consume BROKERS TOPIC ID SOURCE TYPE KEY TENANT PAYLOAD
//	weft-interop-go kafka-publish BROKERS TOPIC ID PAYLOAD
//
// consume reads the first message on SUBJECT's stream (the first record of TOPIC) and checks
// every attribute and the body byte for byte; exit status 0 when all match, 1 naming the first
// that does not. On Kafka the binding's ce_ headers carry the values as they are, and the
// record key is the envelope key.
package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "weft-interop-go: "+format+"\n", args...)
	os.Exit(1)
}

func attr(m *nats.Msg, name string) string {
	raw := m.Header.Get("ce-" + name)
	v, err := url.PathUnescape(raw)
	if err != nil {
		fail("ce-%s: bad percent-encoding %q", name, raw)
	}
	return v
}

func kafka(args []string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(args[1]), kgo.ConsumeTopics(args[2]),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		fail("kafka client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	switch args[0] {
	case "kafka-consume":
		if len(args) != 9 {
			fail("usage: kafka-consume BROKERS TOPIC ID SOURCE TYPE KEY TENANT PAYLOAD")
		}
		a := args[2:]
		for {
			fetches := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				fail("no record on %s", a[0])
			}
			var rec *kgo.Record
			fetches.EachRecord(func(r *kgo.Record) {
				if rec == nil {
					rec = r
				}
			})
			if rec == nil {
				continue
			}
			h := map[string]string{}
			for _, x := range rec.Headers {
				h[x.Key] = string(x.Value)
			}
			want := map[string]string{"ce_specversion": "1.0", "ce_id": a[1], "ce_source": a[2],
				"ce_type": a[3], "ce_subject": a[4], "ce_tenant": a[5]}
			for name, v := range want {
				if h[name] != v {
					fail("%s = %q, want %q", name, h[name], v)
				}
			}
			if _, err := time.Parse(time.RFC3339Nano, h["ce_time"]); err != nil {
				fail("ce_time %q: %v", h["ce_time"], err)
			}
			if string(rec.Key) != a[4] {
				fail("record key %q, want %q", rec.Key, a[4])
			}
			if string(rec.Value) != a[6] {
				fail("value %q, want %q", rec.Value, a[6])
			}
			fmt.Println("ok: every attribute and the payload as weft published them")
			return
		}
	case "kafka-publish":
		if len(args) != 5 {
			fail("usage: kafka-publish BROKERS TOPIC ID PAYLOAD")
		}
		hs := []kgo.RecordHeader{{Key: "ce_specversion", Value: []byte("1.0")},
			{Key: "ce_id", Value: []byte(args[3])},
			{Key: "ce_source", Value: []byte("/go-service")},
			{Key: "ce_type", Value: []byte("go.event")},
			{Key: "ce_time", Value: []byte("2026-03-04T05:06:07.089Z")},
			{Key: "content-type", Value: []byte("text/plain")},
			{Key: "ce_lang", Value: []byte("go")}}
		r := &kgo.Record{Topic: args[2], Key: []byte("go key"), Value: []byte(args[4]),
			Headers: hs}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			fail("produce: %v", err)
		}
		fmt.Println("ok: published")
	}
}

func main() {
	if len(os.Args) < 3 {
		fail("usage: consume|publish|kafka-consume|kafka-publish URL ...")
	}
	if strings.HasPrefix(os.Args[1], "kafka-") {
		kafka(os.Args[1:])
		return
	}
	nc, err := nats.Connect(os.Args[2], nats.Timeout(5*time.Second))
	if err != nil {
		fail("connect: %v", err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		fail("jetstream: %v", err)
	}
	switch os.Args[1] {
	case "consume":
		if len(os.Args) != 10 {
			fail("usage: consume URL SUBJECT ID SOURCE TYPE SUBJECTATTR TENANT PAYLOAD")
		}
		a := os.Args[3:]
		sub, err := js.SubscribeSync(a[0], nats.DeliverAll(), nats.AckNone())
		if err != nil {
			fail("subscribe: %v", err)
		}
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			fail("next: %v", err)
		}
		want := map[string]string{"specversion": "1.0", "id": a[1], "source": a[2],
			"type": a[3], "subject": a[4], "tenant": a[5]}
		for name, v := range want {
			if got := attr(m, name); got != v {
				fail("ce-%s = %q, want %q", name, got, v)
			}
		}
		if _, err := time.Parse(time.RFC3339Nano, attr(m, "time")); err != nil {
			fail("ce-time %q: %v", attr(m, "time"), err)
		}
		if string(m.Data) != a[6] {
			fail("body %q, want %q", m.Data, a[6])
		}
		if m.Header.Get("Nats-Msg-Id") != a[1] {
			fail("Nats-Msg-Id %q, want %q", m.Header.Get("Nats-Msg-Id"), a[1])
		}
		fmt.Println("ok: every attribute and the payload as weft published them")
	case "publish":
		if len(os.Args) != 6 {
			fail("usage: publish URL SUBJECT ID PAYLOAD")
		}
		a := os.Args[3:]
		m := nats.NewMsg(a[0])
		m.Header.Set("ce-specversion", "1.0")
		m.Header.Set("ce-id", a[1])
		m.Header.Set("ce-source", "/go-service")
		m.Header.Set("ce-type", "go.event")
		m.Header.Set("ce-time", "2026-03-04T05:06:07.089Z")
		m.Header.Set("ce-subject", url.PathEscape("go key"))
		m.Header.Set("ce-datacontenttype", "text/plain")
		m.Header.Set("ce-lang", "go")
		m.Data = []byte(a[2])
		if _, err := js.PublishMsg(m); err != nil {
			fail("publish: %v", err)
		}
		fmt.Println("ok: published")
	default:
		fail("unknown command %q", os.Args[1])
	}
}
