// Package httplisten opens the listener of the Go HTTP peers (httphello, fileserver) the way
// weft's HTTP server and nginx's open theirs for weft-bench: with TCP_DEFER_ACCEPT, so that
// accept hands over a connection only once its first request bytes have arrived (weft's
// server_options::defer_accept, nginx's `listen ... deferred`). Every HTTP server of the
// comparison sets it, so none pays a wake-up per connection that the others do not.
package httplisten

import (
	"context"
	"net"
	"syscall"
)

// DeferAcceptSeconds is how long the kernel holds a connection that sent nothing before it
// hands it to accept anyway: 1 s, weft's default.
const DeferAcceptSeconds = 1

// Listen is net.Listen("tcp", addr) with TCP_DEFER_ACCEPT set before listen(2).
func Listen(addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT,
				DeferAcceptSeconds)
		}); err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(context.Background(), "tcp", addr)
}
