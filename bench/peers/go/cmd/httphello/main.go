// Command httphello is the Go net/http peer for weft's HTTP benchmarks: the routes of
// examples/hello_http.cpp, served by the standard library as a Go user would write them.
//
//	httphello [-h HOST] [-p PORT] [-t THREADS] [-cert CHAIN.pem -key KEY.pem] [-h2c]
//
// GET / answers 200 "Hello, World!" (text/plain); POST /echo answers the request body. THREADS
// sets GOMAXPROCS (0: number of CPUs). With -cert and -key it serves HTTPS (crypto/tls at
// net/http's defaults: TLS 1.2 minimum, HTTP/2 offered by ALPN to clients that ask for it). With
// -h2c it also serves HTTP/2 with prior knowledge on the plaintext listener (net/http's
// Protocols.SetUnencryptedHTTP2, Go 1.24), beside HTTP/1.1. Prints "listening on HOST:PORT"
// once the listener is bound; drains (http.Server.Shutdown) and exits 0 on SIGTERM/SIGINT. The
// listener sets TCP_DEFER_ACCEPT as every HTTP server of the comparison does (package
// httplisten).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
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
	cert := flag.String("cert", "", "certificate chain (PEM): serve HTTPS")
	key := flag.String("key", "", "private key (PEM) of -cert")
	h2c := flag.Bool("h2c", false, "serve HTTP/2 with prior knowledge (h2c) too")
	flag.Parse()
	if (*cert == "") != (*key == "") {
		fmt.Fprintln(os.Stderr, "httphello: -cert and -key go together")
		os.Exit(2)
	}
	if *threads > 0 {
		runtime.GOMAXPROCS(*threads)
	}
	hello := []byte("Hello, World!")
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(hello)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "Bad Request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(body)
	})
	ln, err := httplisten.Listen(net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "httphello:", err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	srv := &http.Server{Handler: mux}
	if *h2c {
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(true)
	}
	done := make(chan struct{})
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		<-sig
		srv.Shutdown(context.Background())
		close(done)
	}()
	serve := func() error { return srv.Serve(ln) }
	if *cert != "" {
		serve = func() error { return srv.ServeTLS(ln, *cert, *key) }
	}
	if err := serve(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "httphello:", err)
		os.Exit(1)
	}
	<-done
}
