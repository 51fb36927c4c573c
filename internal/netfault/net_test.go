//go:build fault

package netfault_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/internal/netfault"
)

// echoServer answers every line a connection sends with the same line.
func echoServer(t *testing.T, nd *netfault.Node) string {
	t.Helper()
	l, err := nd.Listen("tcp", nd.IP+":7000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return l.Addr().String()
}

// roundTrip sends a line on c and reports whether it came back within d.
func roundTrip(c net.Conn, r *bufio.Reader, d time.Duration) bool {
	c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return false
	}
	line, err := r.ReadString('\n')
	return err == nil && line == "ping\n"
}

// A connection between two nodes carries data; cut both ways it carries
// nothing (no error either: the packets vanish), and healed it carries
// data again — the same connection, TCP retransmits what was dropped. A
// one-way cut stops the round trip too; a new dial across a cut times out.
func TestFault_NetCutAndHeal(t *testing.T) {
	n := netfault.New(t)
	a, b := n.Node("a"), n.Node("b")
	addr := echoServer(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := a.Dial(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if la := c.LocalAddr().(*net.TCPAddr).IP.String(); la != a.IP {
		t.Fatalf("the connection is from %s, want the node's address %s", la, a.IP)
	}
	r := bufio.NewReader(c)
	if !roundTrip(c, r, 5*time.Second) {
		t.Fatal("no round trip before the cut")
	}
	n.Cut(a, b)
	if roundTrip(c, r, 500*time.Millisecond) {
		t.Fatal("a round trip across the cut")
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err = a.Dial(dctx, "tcp", addr)
	dcancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("a dial across the cut: %v, want a timeout (no refusal: nothing answers)", err)
	}
	n.Heal(a, b)
	// The line sent during the cut is retransmitted and comes back, then
	// the one sent now.
	if !roundTrip(c, r, 10*time.Second) {
		t.Fatal("no round trip after the heal")
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("the second echo after the heal: %q %v", line, err)
	}
	n.CutOneWay(b, a)
	if roundTrip(c, r, 500*time.Millisecond) {
		t.Fatal("a round trip with b→a cut")
	}
	n.HealAll()
}

// Delay holds every packet a node receives for at least the delay; loss
// drops some; with both gone a round trip is fast again. The root
// namespace gets no address of the network, and Close leaves no namespace.
func TestFault_NetShapeAndLeaveNothing(t *testing.T) {
	n := netfault.New(t)
	a, b := n.Node("a"), n.Node("b")
	addr := echoServer(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := a.Dial(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	b.Shape(netfault.Shaping{Delay: 200 * time.Millisecond})
	a.Shape(netfault.Shaping{Delay: 200 * time.Millisecond, Loss: 0.05})
	for range 3 {
		start := time.Now()
		if !roundTrip(c, r, 20*time.Second) {
			t.Fatal("no round trip with delay and loss")
		}
		if took := time.Since(start); took < 400*time.Millisecond {
			t.Fatalf("a round trip through two 200 ms delays took %v", took)
		}
	}
	a.Shape(netfault.Shaping{})
	b.Shape(netfault.Shaping{})
	if !roundTrip(c, r, 10*time.Second) {
		t.Fatal("no round trip after the shaping is removed")
	}
	// The forwarder: a loopback address of this namespace that talks from a.
	fc, err := net.Dial("tcp", a.Forward(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	if !roundTrip(fc, bufio.NewReader(fc), 10*time.Second) {
		t.Fatal("no round trip through the forwarder")
	}
	out, _ := exec.Command("ip", "-4", "addr").Output()
	if strings.Contains(string(out), "10.213.") {
		t.Fatalf("the root namespace has an address of the test network:\n%s", out)
	}
	names := []string{a.NS, b.NS}
	n.Close()
	out, _ = exec.Command("ip", "netns", "list").Output()
	for _, ns := range names {
		if strings.Contains(string(out), ns) {
			t.Fatalf("namespace %s left behind:\n%s", ns, out)
		}
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			t.Fatalf("/run/netns/%s left behind", ns)
		}
	}
}

// New deletes the namespaces a killed earlier run left (named after a
// process that is gone) and keeps those of a live process.
func TestFault_NetSweepsStale(t *testing.T) {
	if os.Geteuid() != 0 {
		netfault.New(t) // skips (fails under CI) saying why
	}
	dead := 4190000
	for ; ; dead++ {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", dead)); err != nil {
			break
		}
	}
	stale, live := fmt.Sprintf("rhnf%dx1-sw", dead), "rhnf1x1-sw" // pid 1 always runs
	for _, ns := range []string{stale, live} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v %s", ns, err, out)
		}
	}
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", live).Run()
		exec.Command("ip", "netns", "del", stale).Run()
	})
	netfault.New(t)
	if _, err := os.Stat("/run/netns/" + stale); err == nil {
		t.Fatal("the stale namespace survived New")
	}
	if _, err := os.Stat("/run/netns/" + live); err != nil {
		t.Fatal("New deleted the namespace of a live process")
	}
}
