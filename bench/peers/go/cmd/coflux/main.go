// Command coflux is the Go peer for weft-bench's Coflux scenarios (see ../../../README.md).
//
//	coflux SCENARIO key=value ...
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
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

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

	// Parameters each scenario reads; anything else is reported (not fatal) before the run.
	known := map[string][]string{
		"spawn":         {"tasks"},
		"pipeline":      {"C", "D", "iters"},
		"fib":           {"n"},
		"parked_memory": {"tasks"},
		"idle_cpu":      {"seconds"},
	}
	keys, ok := known[scenario]
	if !ok {
		usage("unknown scenario " + strconv.Quote(scenario))
	}
	params.warnUnknown(append(keys, "workers"))

	switch scenario {
	case "spawn":
		spawn(params.int("tasks", 1000000))
	case "pipeline":
		pipeline(params.int("C", 8), params.int("D", 5), params.int("iters", 2000))
	case "fib":
		fibScenario(params.int("n", 30))
	case "parked_memory":
		parkedMemory(params.int("tasks", 100000))
	case "idle_cpu":
		idleCPU(params.float("seconds", 1))
	}
}

// --- scenarios -------------------------------------------------------------------------------

// spawn: the main goroutine starts `tasks` goroutines, each writing its index into its own
// result slot, and waits for all of them on one WaitGroup.
func spawn(tasks int) {
	requirePositive("tasks", tasks)
	results := make([]int, tasks)
	run := func(n int) time.Duration {
		start := time.Now() // time.Now carries a monotonic reading; Since uses it.
		var wg sync.WaitGroup
		wg.Add(n)
		for i := 0; i < n; i++ {
			go func(i int) {
				results[i] = i
				wg.Done()
			}(i)
		}
		wg.Wait()
		return time.Since(start)
	}
	run(max(tasks/10, 1)) // warm-up: grows the heap and the pool of dead goroutines to reuse
	elapsed := run(tasks)

	// The check keeps the writes observable (and catches a lost task); it is not timed.
	sum := 0
	for _, r := range results {
		sum += r
	}
	if want := tasks * (tasks - 1) / 2; sum != want {
		fail("spawn: sum of results %d, want %d", sum, want)
	}
	emit("ns_per_task", "ns", float64(elapsed.Nanoseconds())/float64(tasks))
}

// stage is one link of a pipeline: stage i < d starts stage i+1 as a new goroutine and blocks
// on its result, so every stage costs one schedule + park + wake-up hand-off.
func stage(i, d int) int {
	if i == d {
		return 1
	}
	ch := make(chan int, 1) // cap 1: the child never blocks on send
	go func() { ch <- stage(i+1, d) }()
	return <-ch + 1
}

// pipeline: each iteration starts C pipelines (stage 1 of each in its own goroutine, so a
// pipeline is D goroutines) and waits for all C results.
func pipeline(c, d, iters int) {
	requirePositive("C", c)
	requirePositive("D", d)
	requirePositive("iters", iters)
	chans := make([]chan int, c)
	run := func(iters int) (time.Duration, bool) {
		ok := true
		start := time.Now()
		for it := 0; it < iters; it++ {
			for p := range chans {
				ch := make(chan int, 1)
				chans[p] = ch
				go func() { ch <- stage(1, d) }()
			}
			for _, ch := range chans {
				if <-ch != d {
					ok = false
				}
			}
		}
		return time.Since(start), ok
	}
	run(max(iters/10, 1)) // warm-up
	elapsed, ok := run(iters)
	if !ok {
		fail("pipeline: a pipeline returned a value other than D=%d", d)
	}
	emit("ns_per_pipeline", "ns", float64(elapsed.Nanoseconds())/float64(iters*c))
}

// fib forks fib(n-1) into a new goroutine, computes fib(n-2) itself, then joins on a
// channel. No sequential cutoff: every call with n >= 2 is a fork.
func fib(n int) int {
	if n < 2 {
		return n
	}
	ch := make(chan int, 1)
	go func() { ch <- fib(n - 1) }()
	b := fib(n - 2)
	return <-ch + b
}

func fibScenario(n int) {
	if n < 0 || n > 40 {
		usage("n must be in [0, 40]")
	}
	fib(max(n-5, 0)) // warm-up
	start := time.Now()
	got := fib(n)
	elapsed := time.Since(start)
	if want := fibSeq(n); got != want {
		fail("fib(%d) = %d, want %d", n, got, want)
	}
	calls := 2*fibSeq(n+1) - 1 // number of fib invocations; 2692537 for n=30
	emit("ns_per_task", "ns", float64(elapsed.Nanoseconds())/float64(calls))
}

func fibSeq(n int) int {
	a, b := 0, 1
	for ; n > 0; n-- {
		a, b = b, a+b
	}
	return a
}

// parkedMemory: RSS growth per goroutine blocked in a long time.Sleep. No warm-up: parked
// goroutines cannot be reclaimed, so a warm-up pass would be counted in the baseline.
func parkedMemory(tasks int) {
	requirePositive("tasks", tasks)
	runtime.GC()
	before := vmRSS()
	var parked sync.WaitGroup
	parked.Add(tasks)
	for i := 0; i < tasks; i++ {
		go func() {
			parked.Done()
			time.Sleep(time.Hour)
		}()
	}
	parked.Wait()
	// Done runs just before Sleep; give the last goroutines a moment to actually park
	// (allocate their timer) before RSS is read.
	time.Sleep(20 * time.Millisecond)
	after := vmRSS()
	emit("bytes_per_parked_task", "B", float64(after-before)/float64(tasks))
	os.Exit(0) // do not wait for the sleepers
}

// idleCPU: process CPU time (user + system, getrusage) while the runtime has nothing to do
// but one goroutine sleeping for `seconds`.
func idleCPU(seconds float64) {
	if math.IsNaN(seconds) || math.IsInf(seconds, 0) || seconds <= 0 {
		usage("seconds must be > 0")
	}
	// Warm-up: let the runtime finish start-up (and any GC/scavenger work it kicks off) so
	// that only the idle steady state is measured.
	time.Sleep(50 * time.Millisecond)

	done := make(chan struct{})
	cpu0, wall0 := cpuTime(), time.Now()
	go func() {
		time.Sleep(time.Duration(seconds * float64(time.Second)))
		close(done)
	}()
	<-done
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	emit("idle_cpu_percent", "%", 100*cpu.Seconds()/wall.Seconds())
}

// --- helpers ---------------------------------------------------------------------------------

var stdout = bufio.NewWriter(os.Stdout)

func emit(metric, unit string, value float64) {
	fmt.Fprintf(stdout, "{\"metric\": %q, \"unit\": %q, \"value\": %s}\n",
		metric, unit, strconv.FormatFloat(value, 'f', -1, 64))
	stdout.Flush()
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "coflux: "+format+"\n", args...)
	os.Exit(1)
}

func usage(msg string) {
	fmt.Fprintf(os.Stderr, "coflux: %s\nusage: coflux spawn|pipeline|fib|parked_memory|idle_cpu key=value ...\n", msg)
	os.Exit(2)
}

func requirePositive(key string, v int) {
	if v <= 0 {
		usage(key + " must be > 0")
	}
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

func (p params) float(key string, def float64) float64 {
	s, ok := p[key]
	if !ok {
		return def
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		usage(key + "=" + s + " is not a number")
	}
	return v
}

func (p params) warnUnknown(known []string) {
	for k := range p {
		if !slices.Contains(known, k) {
			fmt.Fprintf(os.Stderr, "coflux: warning: parameter %q ignored\n", k)
		}
	}
}

// vmRSS returns the resident set size from /proc/self/status, in bytes.
func vmRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fail("read /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				fail("parse VmRSS %q: %v", line, err)
			}
			return kb * 1024
		}
	}
	fail("no VmRSS in /proc/self/status")
	return 0
}

// cpuTime is the user + system CPU time of the whole process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fail("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
