// echoclient: a load client for weft-bench's echo rows that is not weft, so the ranking of the
// servers can be checked with a client from outside (suite galay-net-ext).
//
//	echoclient echo c=100 s=256 d=5 port=N [host=127.0.0.1] [procs=1]
//
// c connections, each in its own goroutine, send s bytes, read the s-byte echo back (checking
// every byte) and repeat for d seconds. procs sets GOMAXPROCS (default 1: a one-thread client,
// as weft's bench_client, so client and server split the machine the same way). Prints the
// weft-bench protocol on stdout: one JSON line per metric (ops, qps, mb_per_s, p50_us, p99_us,
// errors); exit status 1 if any connection failed.
package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "echo" {
		fmt.Fprintln(os.Stderr, "usage: echoclient echo c=N s=BYTES d=SECONDS port=N [host=H] [procs=P]")
		os.Exit(2)
	}
	conf := map[string]string{"c": "100", "s": "256", "d": "5", "host": "127.0.0.1", "procs": "1"}
	for _, kv := range os.Args[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "echoclient: bad argument %q\n", kv)
			os.Exit(2)
		}
		conf[k] = v // other keys (the server's) are ignored
	}
	num := func(k string) int {
		n, err := strconv.Atoi(conf[k])
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "echoclient: %s must be a positive number\n", k)
			os.Exit(2)
		}
		return n
	}
	conns, size, secs, procs := num("c"), num("s"), num("d"), num("procs")
	if _, ok := conf["port"]; !ok {
		fmt.Fprintln(os.Stderr, "echoclient: port= is required")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(procs)
	addr := net.JoinHostPort(conf["host"], conf["port"])

	start := time.Now()
	end := start.Add(time.Duration(secs) * time.Second)
	var mu sync.Mutex
	var latencies []time.Duration
	var requests, errors int
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local, failed := run(addr, size, end)
			mu.Lock()
			latencies = append(latencies, local...)
			requests += len(local)
			if failed {
				errors++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) float64 {
		if len(latencies) == 0 {
			return 0
		}
		return float64(latencies[int(p*float64(len(latencies)-1))].Nanoseconds()) / 1000
	}
	qps := float64(requests) / elapsed
	emit := func(metric, unit string, v float64) {
		fmt.Printf("{\"metric\": \"%s\", \"unit\": \"%s\", \"value\": %g}\n", metric, unit, v)
	}
	emit("ops", "requests", float64(requests))
	emit("qps", "req/s", qps)
	emit("mb_per_s", "MB/s", qps*2*float64(size)/1e6)
	emit("p50_us", "us", pct(0.50))
	emit("p99_us", "us", pct(0.99))
	emit("errors", "count", float64(errors))
	fmt.Fprintf(os.Stderr, "echoclient: %d requests in %.2f s, %.0f req/s, %d errors\n",
		requests, elapsed, qps, errors)
	if errors != 0 {
		os.Exit(1)
	}
}

// run drives one connection until `end`; returns its request latencies and whether it failed.
func run(addr string, size int, end time.Time) ([]time.Duration, bool) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, true
	}
	defer c.Close()
	out := make([]byte, size)
	for i := range out {
		out[i] = byte('a' + i%26)
	}
	in := make([]byte, size)
	var lat []time.Duration
	for time.Now().Before(end) {
		t0 := time.Now()
		if _, err := c.Write(out); err != nil {
			return lat, true
		}
		if _, err := io.ReadFull(c, in); err != nil {
			return lat, true
		}
		lat = append(lat, time.Since(t0))
		if !bytes.Equal(in, out) {
			return lat, true
		}
	}
	return lat, false
}
