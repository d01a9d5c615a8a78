// weft-interop-go: a service written without weft, on nats.go alone, that reads the events a
// weft publisher sends and publishes events for a weft subscriber, both in CloudEvents binary
// content mode as the NATS protocol binding defines it (ce- headers, values percent-encoded,
// the data as the body). The weft side of the exchange is tests/bus/test_nats_backend.cpp.
//
//	weft-interop-go consume URL SUBJECT ID SOURCE TYPE SUBJECTATTR TENANT PAYLOAD
//	weft-interop-go publish URL SUBJECT ID PAYLOAD
//
// consume reads the first message on SUBJECT's stream and checks every attribute and the
// body byte for byte; exit status 0 when all match, 1 naming the first that does not.
package main

import (
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/nats-io/nats.go"
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

func main() {
	if len(os.Args) < 3 {
		fail("usage: consume|publish URL ...")
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
