package netfault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// in runs fn on a thread switched into the node's namespace: a socket fn
// makes belongs to the node's network for good. The thread goes back to
// the root namespace after; if it cannot, it ends with the goroutine.
func (nd *Node) in(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("netfault: %w", err)
			return
		}
		defer unix.Close(self)
		target, err := unix.Open("/run/netns/"+nd.NS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("netfault: namespace %s: %w", nd.NS, err)
			return
		}
		err = unix.Setns(target, unix.CLONE_NEWNET)
		unix.Close(target)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netfault: setns %s: %w", nd.NS, err)
			return
		}
		ferr := fn()
		if unix.Setns(self, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else the thread stays locked and exits with this goroutine
		errc <- ferr
	}()
	return <-errc
}

// Dial connects from the node (network "tcp", an address on the bridge).
func (nd *Node) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := nd.in(func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen listens in the node (e.g. "tcp", nd.IP+":0").
func (nd *Node) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := nd.in(func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// Command is name run in the node's namespace (ip netns exec: the process
// is name itself, its pid the Cmd's). It is killed if this process dies.
func (nd *Node) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(nd.net.ip, append([]string{"netns", "exec", nd.NS, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Forward listens on a loopback port of the root namespace and forwards
// every connection to target, dialed from the node: a client of this
// process that dials the returned address talks from the node. A cut
// between the node and target shows to that client as silence (its own
// connection stays open). It stops when the test ends.
func (nd *Node) Forward(target string) string {
	t := nd.net.t
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("netfault: forward listener: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]struct{}{}
	track := func(c net.Conn, on bool) bool {
		mu.Lock()
		defer mu.Unlock()
		if on {
			if ctx.Err() != nil {
				return false
			}
			open[c] = struct{}{}
		} else {
			delete(open, c)
		}
		return true
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if !track(c, true) {
					return
				}
				defer track(c, false)
				up, err := nd.Dial(ctx, "tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				if !track(up, true) {
					return
				}
				defer track(up, false)
				pipe(c, up)
			}()
		}
	}()
	t.Cleanup(func() {
		cancel()
		l.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// pipe copies both ways; a side that ends half-closes the other, and the
// first error closes both.
func pipe(a, b net.Conn) {
	done := make(chan error, 2)
	cp := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			cw.CloseWrite()
		}
		done <- err
	}
	go cp(a, b)
	go cp(b, a)
	for range 2 {
		if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) {
			break
		}
	}
	a.Close()
	b.Close()
}
