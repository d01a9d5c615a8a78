// Command echo is the Go peer for weft-bench's TCP echo benchmark (see ../../../README.md).
//
//	echo [-h HOST] [-p PORT] [-t THREADS]
//
// accepts connections forever; each connection gets its own goroutine that reads up to 4096
// bytes and writes back exactly what it read until the peer closes. THREADS sets GOMAXPROCS
// (0 or absent: number of CPUs). Prints "listening on HOST:PORT" on stdout once the listener is
// bound; exits 0 on SIGTERM/SIGINT. Exit code 2 on bad arguments, 1 if the listener cannot be
// set up.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

const bufSize = 4096

func main() {
	host := flag.String("h", "127.0.0.1", "address to listen on")
	port := flag.Int("p", 8080, "TCP port (0: any free port, the chosen one is printed)")
	threads := flag.Int("t", 0, "GOMAXPROCS (0: number of CPUs)")
	flag.Parse()
	if flag.NArg() > 0 || *port < 0 || *port > 65535 || *threads < 0 {
		fmt.Fprintln(os.Stderr, "usage: echo [-h HOST] [-p PORT] [-t THREADS]")
		os.Exit(2)
	}
	if *threads > 0 {
		runtime.GOMAXPROCS(*threads)
	}

	// Exit 0 on SIGTERM/SIGINT. Connections are simply dropped with the process.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		os.Exit(0)
	}()

	// Go already sets SO_REUSEADDR on listeners; it is set here explicitly so the peers visibly
	// match. The backlog is not settable through package net: Go passes
	// /proc/sys/net/core/somaxconn, which is the kernel's cap on any backlog anyway (so a
	// listen(4096) elsewhere gets the same queue length).
	// KeepAlive -1: no TCP keep-alive on accepted connections (Go's default enables it, the
	// other peers do not).
	lc := net.ListenConfig{KeepAlive: -1, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(nil, "tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
	// os.Stdout is unbuffered: the line is out as soon as Println returns.
	fmt.Printf("listening on %s:%d\n", *host, ln.Addr().(*net.TCPAddr).Port)

	serve(ln.(*net.TCPListener))
}

// serve accepts forever. On EMFILE/ENFILE (and other accept errors) it backs off 5 ms, doubling
// up to 1 s, and retries; the backoff resets after the next successful accept.
func serve(ln *net.TCPListener) {
	var backoff time.Duration
	for {
		c, err := ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if backoff == 0 {
				backoff = 5 * time.Millisecond
			} else if backoff *= 2; backoff > time.Second {
				backoff = time.Second
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				fmt.Fprintf(os.Stderr, "echo: accept: %v; retrying in %v\n", err, backoff)
			}
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		go handle(c)
	}
}

// handle echoes until EOF or any error, then closes the connection. conn.Write returns only
// once every byte has been written (it loops over partial writes itself).
func handle(c *net.TCPConn) {
	defer c.Close()
	_ = c.SetNoDelay(true) // Go's default for TCP connections; explicit for symmetry
	buf := make([]byte, bufSize)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF, reset, ...: this connection only
			return
		}
	}
}
