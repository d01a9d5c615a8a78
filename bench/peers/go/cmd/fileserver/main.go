// Command fileserver is the Go peer of weft-bench's http-static suite: a directory served by
// the standard library's http.FileServer, as a Go user would serve static files (net/http hands
// an *os.File body to the TCP connection's ReadFrom, which uses sendfile(2)).
//
//	fileserver [-h HOST] [-p PORT] [-t THREADS] [-r ROOT]
//
// THREADS sets GOMAXPROCS (0: number of CPUs). Prints "listening on HOST:PORT" once the listener
// is bound; drains (http.Server.Shutdown) and exits 0 on SIGTERM/SIGINT. The listener sets
// TCP_DEFER_ACCEPT as every HTTP server of the comparison does (package httplisten).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"

	"weftbench/peers/go/httplisten"
)

func main() {
	host := flag.String("h", "127.0.0.1", "address to listen on")
	port := flag.Int("p", 8080, "TCP port (0: any free port, the chosen one is printed)")
	threads := flag.Int("t", 0, "GOMAXPROCS (0: number of CPUs)")
	root := flag.String("r", ".", "directory to serve")
	flag.Parse()
	if *threads > 0 {
		runtime.GOMAXPROCS(*threads)
	}
	ln, err := httplisten.Listen(net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fileserver:", err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	srv := &http.Server{Handler: http.FileServer(http.Dir(*root))}
	done := make(chan struct{})
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		<-sig
		srv.Shutdown(context.Background())
		close(done)
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "fileserver:", err)
		os.Exit(1)
	}
	<-done
}
