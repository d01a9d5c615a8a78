// A Go net/http server (the standard library only) that weft's pooled HTTP client is tested
// against: the same routes over HTTP on -http and over HTTPS on -https (-cert, -key).
//
//	GET  /hello       "hello from go\n" (Content-Length)
//	POST /echo        the request body
//	GET  /chunked     ten parts, each flushed: a chunked body
//	GET  /redirect/N  302 to /redirect/N-1; /redirect/0 302 to /hello
//	GET  /loop        302 to itself
//	GET  /close       "closing" with Connection: close (the server closes after it)
//	GET  /drop        "dropped" as a keep-alive response, then the connection closed unannounced
//	GET  /conns       the connections accepted so far (both listeners)
//
// HTTPS offers h2 and http/1.1 by ALPN (net/http's own HTTP/2).
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

var accepted atomic.Int64

func chunkedPart(i int) string { return fmt.Sprintf("part %d of a streamed body\n", i) }

func routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "hello from go\n")
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
	})
	mux.HandleFunc("GET /chunked", func(w http.ResponseWriter, _ *http.Request) {
		f := w.(http.Flusher)
		for i := 0; i < 10; i++ {
			io.WriteString(w, chunkedPart(i))
			f.Flush()
		}
	})
	mux.HandleFunc("GET /redirect/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.PathValue("n"))
		if err != nil || n < 0 {
			http.NotFound(w, r)
			return
		}
		to := "/hello"
		if n > 0 {
			to = "/redirect/" + strconv.Itoa(n-1)
		}
		http.Redirect(w, r, to, http.StatusFound)
	})
	mux.HandleFunc("GET /loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("GET /close", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "closing")
	})
	mux.HandleFunc("GET /drop", func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Type: text/plain\r\n\r\ndropped")
		buf.Flush()
		conn.Close()
	})
	mux.HandleFunc("GET /conns", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, strconv.FormatInt(accepted.Load(), 10))
	})
	return mux
}

func server(h http.Handler) *http.Server {
	return &http.Server{
		Handler: h,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				accepted.Add(1)
			}
		},
	}
}

func main() {
	httpAddr := flag.String("http", "127.0.0.1:18090", "plain HTTP listen address")
	httpsAddr := flag.String("https", "127.0.0.1:18091", "HTTPS listen address")
	cert := flag.String("cert", "", "certificate chain (PEM)")
	key := flag.String("key", "", "private key (PEM)")
	flag.Parse()
	h := routes()
	plain, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		log.Fatal(err)
	}
	secure, err := net.Listen("tcp", *httpsAddr)
	if err != nil {
		log.Fatal(err)
	}
	errs := make(chan error, 2)
	go func() { errs <- server(h).Serve(plain) }()
	go func() { errs <- server(h).ServeTLS(secure, *cert, *key) }()
	log.Printf("listening on %s and %s", strings.TrimSpace(*httpAddr), *httpsAddr)
	log.Fatal(<-errs)
}
