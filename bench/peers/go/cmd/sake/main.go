// Command sake is the Go peer for weft-bench's Sake scenarios (seed 000; see ../../../README.md):
// the five rows of the seed's micro-benchmark table written with goroutines, channels and a
// worker pool, plus channel ping-pong, throughput and uncontended send+recv.
//
//	sake SCENARIO key=value ...
//
// runs one measurement and prints one JSON object per line on stdout:
//
//	{"metric": "<name>", "unit": "<unit>", "value": <number>}
//
// Diagnostics go to stderr. Exit codes: 0 ok, 1 wrong result, 2 usage error or unsupported
// scenario.
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

var stdout = bufio.NewWriter(os.Stdout)

func main() {
	if len(os.Args) < 2 {
		usage("missing scenario")
	}
	scenario := os.Args[1]
	params := parseParams(os.Args[2:])

	// workers=N -> GOMAXPROCS(N); 0 or absent keeps Go's default (number of CPUs).
	if w := params.int("workers", 0); w > 0 {
		runtime.GOMAXPROCS(w)
	}

	table := []string{"iters", "repeat"}
	pooled := []string{"iters", "repeat", "pool", "cap"}
	known := map[string][]string{
		"direct":           table,
		"spawn_only":       table,
		"pool_map_serial":  {"iters", "repeat", "pool"},
		"chan_coord":       pooled,
		"spawn_pool_map":   pooled,
		"chan_pingpong":    {"rounds", "cap"},
		"chan_throughput":  {"items", "cap"},
		"chan_uncontended": {"pairs", "cap"},
	}
	keys, ok := known[scenario]
	if !ok {
		usage("unknown scenario " + strconv.Quote(scenario))
	}
	params.warnUnknown(append(keys, "workers"))

	iters := func(def int) int { return params.positive("iters", def) }
	repeat := params.positive("repeat", 1)
	poolSize := params.int("pool", 0)
	if poolSize == 0 {
		poolSize = runtime.GOMAXPROCS(0)
	}
	capacity := params.int("cap", 1024)

	switch scenario {
	case "direct":
		measure("direct", iters(100000), repeat, direct)
	case "spawn_only":
		measure("spawn_only", iters(10000), repeat, spawnOnly)
	case "pool_map_serial":
		p := newPool(poolSize, minimalHandler)
		measure("pool_map_serial", iters(10000), repeat, func(n int) int { return mapSerially(p, n) })
	case "chan_coord":
		p := newPool(poolSize, minimalHandler)
		measure("chan_coord", iters(10000), repeat, func(n int) int { return coordinated(p, n, capacity) })
	case "spawn_pool_map":
		p := newPool(poolSize, minimalHandler)
		measure("spawn_pool_map", iters(10000), repeat, func(n int) int { return contended(p, n, capacity) })
	case "chan_pingpong":
		chanPingPong(params.positive("rounds", 100000), params.int("cap", 1))
	case "chan_throughput":
		chanThroughput(params.positive("items", 1000000), params.positive("cap", 1024))
	case "chan_uncontended":
		chanUncontended(params.positive("pairs", 1000000), params.positive("cap", 1024))
	}
}

// --- the seed's workload ---------------------------------------------------------------------

// makeInput is `test_${i}`, as the seed's request spawns build it.
func makeInput(i int) string { return "test_" + strconv.Itoa(i) }

// minimalHandler is the seed's minimal_handler: string in, string out; it returns its input.
//
//go:noinline
func minimalHandler(s string) string { return s }

func expectedLength(n int) int {
	sum := 0
	for i := 0; i < n; i++ {
		sum += len(makeInput(i))
	}
	return sum
}

// measure runs pass(n) (returning the sum of the result lengths) once untimed with n = iters/10,
// then `repeat` times timed; checks every sum; emits us_per_op and ops_per_s.
func measure(name string, iters, repeat int, pass func(n int) int) {
	warm := max(iters/10, 1)
	if pass(warm) != expectedLength(warm) {
		fail("%s: wrong result (warm-up)", name)
	}
	want := expectedLength(iters)
	var total time.Duration
	for r := 0; r < repeat; r++ {
		start := time.Now()
		got := pass(iters)
		total += time.Since(start)
		if got != want {
			fail("%s: sum of result lengths %d, want %d", name, got, want)
		}
	}
	ops := float64(iters * repeat)
	emit("us_per_op", "us", total.Seconds()*1e6/ops)
	emit("ops_per_s", "ops/s", ops/total.Seconds())
}

// --- a worker pool, the way Go programs write one ---------------------------------------------

type job struct {
	in    string
	reply chan string
}

// pool is `size` long-lived goroutines reading a shared jobs channel (capacity 2*size, as
// weft's worker_pool intake). Map sends a job carrying a reply channel and waits on it. The
// reply channels are recycled through a sync.Pool (the lowest-cost idiomatic form: a channel
// made per call cost an allocation and its garbage every time, which weft's awaitable map does
// not pay); a channel goes back to the pool only after its one reply was received, so it is
// always empty when reused.
type pool struct {
	jobs    chan job
	replies sync.Pool
}

func newPool(size int, handler func(string) string) *pool {
	p := &pool{jobs: make(chan job, 2*size)}
	p.replies.New = func() any { return make(chan string, 1) }
	for i := 0; i < size; i++ {
		go func() {
			for j := range p.jobs {
				j.reply <- handler(j.in)
			}
		}()
	}
	return p
}

func (p *pool) Map(in string) string {
	reply := p.replies.Get().(chan string)
	p.jobs <- job{in, reply}
	out := <-reply
	p.replies.Put(reply)
	return out
}

// --- the five rows of the seed's table ----------------------------------------------------------

// direct: the baseline, no goroutine at all.
func direct(n int) int {
	sum := 0
	for i := 0; i < n; i++ {
		sum += len(minimalHandler(makeInput(i)))
	}
	return sum
}

// spawnOnly: one goroutine per iteration calling the handler, results in their own slots, one
// WaitGroup.
func spawnOnly(n int) int {
	slots := make([]int, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			slots[i] = len(minimalHandler(makeInput(i)))
			wg.Done()
		}(i)
	}
	wg.Wait()
	sum := 0
	for _, v := range slots {
		sum += v
	}
	return sum
}

// mapSerially: one goroutine (main) calling pool.Map once per iteration.
func mapSerially(p *pool, n int) int {
	sum := 0
	for i := 0; i < n; i++ {
		sum += len(p.Map(makeInput(i)))
	}
	return sum
}

type sakeTask struct {
	id   int
	data string
}

// coordinated: request goroutines only send their task; one coordinator goroutine is the only
// caller of pool.Map and forwards every result; main collects n results.
func coordinated(p *pool, n, capacity int) int {
	tasks := make(chan sakeTask, capacity)
	results := make(chan string, capacity)
	go func() {
		for t := range tasks {
			results <- p.Map(t.data)
		}
	}()
	for i := 0; i < n; i++ {
		go func(i int) { tasks <- sakeTask{i, makeInput(i)} }(i)
	}
	sum := 0
	for i := 0; i < n; i++ {
		sum += len(<-results)
	}
	close(tasks) // ends the coordinator
	return sum
}

// contended: every request goroutine calls the shared pool's Map and sends the result; main
// collects n results.
func contended(p *pool, n, capacity int) int {
	results := make(chan string, capacity)
	for i := 0; i < n; i++ {
		go func(i int) { results <- p.Map(makeInput(i)) }(i)
	}
	sum := 0
	for i := 0; i < n; i++ {
		sum += len(<-results)
	}
	return sum
}

// --- channel micro-benchmarks ------------------------------------------------------------------

// chanPingPong: main sends i on ping, the other goroutine answers i+1 on pong.
func chanPingPong(rounds, capacity int) {
	run := func(rounds int) (time.Duration, bool) {
		ping := make(chan int, capacity)
		pong := make(chan int, capacity)
		done := make(chan struct{})
		go func() {
			for v := range ping {
				pong <- v + 1
			}
			close(done)
		}()
		ok := true
		start := time.Now()
		for i := 0; i < rounds; i++ {
			ping <- i
			if <-pong != i+1 {
				ok = false
			}
		}
		elapsed := time.Since(start)
		close(ping)
		<-done
		return elapsed, ok
	}
	run(max(rounds/10, 1))
	elapsed, ok := run(rounds)
	if !ok {
		fail("chan_pingpong: wrong value")
	}
	emit("ns_per_round_trip", "ns", float64(elapsed.Nanoseconds())/float64(rounds))
}

// chanThroughput: one producer goroutine, main consumes until the channel is closed.
func chanThroughput(items, capacity int) {
	run := func(n int) (time.Duration, int) {
		start := time.Now()
		ch := make(chan int, capacity)
		go func() {
			for i := 0; i < n; i++ {
				ch <- i
			}
			close(ch)
		}()
		sum := 0
		for v := range ch {
			sum += v
		}
		return time.Since(start), sum
	}
	run(max(items/10, 1))
	elapsed, sum := run(items)
	if sum != items*(items-1)/2 {
		fail("chan_throughput: lost an item")
	}
	emit("ns_per_item", "ns", float64(elapsed.Nanoseconds())/float64(items))
}

// chanUncontended: send then receive on one goroutine; the buffer never fills.
func chanUncontended(pairs, capacity int) {
	run := func(n int) (time.Duration, int) {
		ch := make(chan int, capacity)
		sum := 0
		start := time.Now()
		for i := 0; i < n; i++ {
			ch <- i
			sum += <-ch
		}
		return time.Since(start), sum
	}
	run(max(pairs/10, 1))
	elapsed, sum := run(pairs)
	if sum != pairs*(pairs-1)/2 {
		fail("chan_uncontended: lost an item")
	}
	emit("ns_per_pair", "ns", float64(elapsed.Nanoseconds())/float64(pairs))
}

// --- protocol helpers -------------------------------------------------------------------------

func emit(metric, unit string, value float64) {
	fmt.Fprintf(stdout, "{\"metric\": %q, \"unit\": %q, \"value\": %s}\n",
		metric, unit, strconv.FormatFloat(value, 'f', -1, 64))
	stdout.Flush()
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "sake: "+format+"\n", args...)
	os.Exit(1)
}

func usage(msg string) {
	fmt.Fprintf(os.Stderr, "sake: %s\nusage: sake direct|spawn_only|pool_map_serial|chan_coord|spawn_pool_map|chan_pingpong|chan_throughput|chan_uncontended key=value ...\n", msg)
	os.Exit(2)
}

type params map[string]string

func parseParams(args []string) params {
	p := params{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			usage("bad argument " + strconv.Quote(a) + ", want key=value")
		}
		p[k] = v
	}
	return p
}

func (p params) int(key string, def int) int {
	s, ok := p[key]
	if !ok {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		usage(key + "=" + s + " is not a non-negative integer")
	}
	return v
}

func (p params) positive(key string, def int) int {
	v := p.int(key, def)
	if v <= 0 {
		usage(key + " must be > 0")
	}
	return v
}

func (p params) warnUnknown(known []string) {
	for k := range p {
		if !slices.Contains(known, k) {
			fmt.Fprintf(os.Stderr, "sake: warning: parameter %q ignored\n", k)
		}
	}
}
