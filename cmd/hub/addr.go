package main

import (
	"fmt"
	"net"
	"strconv"
)

// checkAddr refuses a listen address that is not host:port with a port in
// 0..65535, naming where it came from (src: the flag or the variable).
func checkAddr(src, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			err = fmt.Errorf("port %q is not a number in 0..65535", port)
		}
	}
	if err != nil {
		return fmt.Errorf("%s %q: %v (want host:port, e.g. 127.0.0.1:8080 or 0.0.0.0:8080)", src, addr, stripAddrErr(err))
	}
	return nil
}

// stripAddrErr drops the "address X: " prefix net's errors repeat.
func stripAddrErr(err error) error {
	if ae, ok := err.(*net.AddrError); ok {
		return fmt.Errorf("%s", ae.Err)
	}
	return err
}

// listen listens on addr; an error names where the address came from.
func listen(src, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", src, addr, err)
	}
	return ln, nil
}

// shownAddr is the address to report for a listener on addr: the host as
// the operator gave it (0.0.0.0 stays 0.0.0.0, not the [::] Go's
// dual-stack listener reports) with the port it got (for port 0).
func shownAddr(addr string, ln net.Listener) string {
	host, _, err := net.SplitHostPort(addr)
	_, port, perr := net.SplitHostPort(ln.Addr().String())
	if err != nil || perr != nil || host == "" {
		return ln.Addr().String()
	}
	return net.JoinHostPort(host, port)
}

// orDefault is src, or def when src is empty (a config built in code).
func orDefault(src, def string) string {
	if src == "" {
		return def
	}
	return src
}
