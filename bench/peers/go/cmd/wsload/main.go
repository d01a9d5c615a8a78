// wsload: the load client of weft-bench's websocket suite (the scenario program protocol of
// tools/weft-bench/README.md). C connections to ws://127.0.0.1:PORT/echo, each sending an
// S-byte text message and waiting for its echo, over and over for D seconds; one goroutine per
// connection (gorilla/websocket, masked frames as every client sends).
//
//	go-wsload echo c=100 s=64 d=1 port=P
//
// Prints messages_per_s (echoes received a second), p99_us (round trip), errors and ops
// (echoes); exit 3 when a connection failed or an echo differed.
package main

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "echo" {
		os.Exit(2)
	}
	args := map[string]string{"c": "100", "s": "64", "d": "1", "port": "9300"}
	for _, a := range os.Args[2:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			args[k] = v
		}
	}
	conns, _ := strconv.Atoi(args["c"])
	size, _ := strconv.Atoi(args["s"])
	secs, _ := strconv.ParseFloat(args["d"], 64)
	url := "ws://127.0.0.1:" + args["port"] + "/echo"

	var errors atomic.Int64
	clients := make([]*websocket.Conn, 0, conns)
	for i := 0; i < conns; i++ {
		c, _, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dial:", err)
			os.Exit(3)
		}
		clients = append(clients, c)
	}
	msg := bytes.Repeat([]byte("x"), size)
	var wg sync.WaitGroup
	lat := make([][]time.Duration, conns)
	var ops atomic.Int64
	start := time.Now()
	end := start.Add(time.Duration(secs * float64(time.Second)))
	for i, c := range clients {
		wg.Add(1)
		go func(i int, c *websocket.Conn) {
			defer wg.Done()
			for time.Now().Before(end) {
				t := time.Now()
				if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
					errors.Add(1)
					return
				}
				_, got, err := c.ReadMessage()
				if err != nil || !bytes.Equal(got, msg) {
					errors.Add(1)
					return
				}
				lat[i] = append(lat[i], time.Since(t))
				ops.Add(1)
			}
		}(i, c)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	for _, c := range clients {
		_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""))
		c.Close()
	}
	all := make([]time.Duration, 0, ops.Load())
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	p99 := 0.0
	if len(all) > 0 {
		p99 = float64(all[len(all)*99/100].Microseconds())
	}
	fmt.Printf("{\"metric\": \"messages_per_s\", \"unit\": \"msg/s\", \"value\": %.1f}\n", float64(ops.Load())/elapsed)
	fmt.Printf("{\"metric\": \"p99_us\", \"unit\": \"us\", \"value\": %.1f}\n", p99)
	fmt.Printf("{\"metric\": \"errors\", \"unit\": \"count\", \"value\": %d}\n", errors.Load())
	fmt.Printf("{\"metric\": \"ops\", \"unit\": \"ops\", \"value\": %d}\n", ops.Load())
	if errors.Load() > 0 {
		os.Exit(3)
	}
}
