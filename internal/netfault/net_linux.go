package netfault

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// prefix starts the name of every namespace this package makes.
const prefix = "rhnf"

// Subnet is the network of every Net's bridge (inside its namespaces only).
const Subnet = "10.213.0.0/24"

var nets atomic.Int64 // Nets made by this process, for unique names

// Net is one bridged network of namespaces.
type Net struct {
	t      testing.TB
	name   string // rhnf<pid>x<n>
	sw     string // the switch namespace
	ip     string // path of ip
	ipt    string // path of iptables-restore
	mu     sync.Mutex
	nodes  []*Node
	closed bool
}

// Node is one namespace on the bridge.
type Node struct {
	net   *Net
	Name  string // as the test named it
	NS    string // the namespace's name (ip netns)
	IP    string // its address on the bridge
	port  string // its bridge port in the switch namespace
	mu    sync.Mutex
	drop  map[string]bool // sources whose packets this node drops
	shape Shaping
	delay *delayLine
}

// Shaping is what a node's incoming packets go through.
type Shaping struct {
	Loss  float64       // share dropped at random, 0…1
	Delay time.Duration // how long each packet is held
}

// New makes a network for the test and removes it when the test ends. It
// skips the test (fails it under CI) where it cannot: not Linux, not root,
// no ip or iptables-restore, no network namespaces.
func New(t testing.TB) *Net {
	t.Helper()
	if os.Geteuid() != 0 {
		unable(t, "needs root (network namespaces, veth pairs, iptables)")
	}
	ip, err := lookPath("ip")
	if err != nil {
		unable(t, "needs ip (apt-get install iproute2)")
	}
	ipt, err := lookPath("iptables-restore")
	if err != nil {
		unable(t, "needs iptables-restore (apt-get install iptables)")
	}
	sweep(ip)
	n := &Net{t: t, ip: ip, ipt: ipt, name: fmt.Sprintf("%s%dx%d", prefix, os.Getpid(), nets.Add(1))}
	n.sw = n.name + "-sw"
	if out, err := n.run("netns", "add", n.sw); err != nil {
		unable(t, fmt.Sprintf("cannot make a network namespace: %v: %s", err, out))
	}
	t.Cleanup(n.Close)
	n.must("-n", n.sw, "link", "add", "br0", "type", "bridge")
	n.must("-n", n.sw, "link", "set", "br0", "up")
	return n
}

// unable skips the test with why, or fails it under CI.
func unable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("netfault: %s (CI must run the partition tests)", why)
	}
	t.Skipf("netfault: the partition tests need Linux as root: %s", why)
}

func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/bin"} {
		p := d + "/" + name
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// sweep deletes the namespaces an earlier process of this package left
// (killed before its cleanup ran): those whose creator is gone.
func sweep(ip string) {
	out, err := exec.Command(ip, "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], prefix) {
			continue
		}
		rest := strings.TrimPrefix(f[0], prefix)
		i := strings.IndexByte(rest, 'x')
		if i <= 0 {
			continue
		}
		pid, err := strconv.Atoi(rest[:i])
		if err != nil {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue // its process lives: not ours to delete
		}
		exec.Command(ip, "netns", "del", f[0]).Run()
	}
}

func (n *Net) run(args ...string) ([]byte, error) {
	var out bytes.Buffer
	cmd := exec.Command(n.ip, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

func (n *Net) must(args ...string) {
	n.t.Helper()
	if out, err := n.run(args...); err != nil {
		n.t.Fatalf("netfault: ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// Node adds a namespace named after name to the bridge, with the next
// address (10.213.0.10, .11, …).
func (n *Net) Node(name string) *Node {
	n.t.Helper()
	n.mu.Lock()
	i := len(n.nodes)
	nd := &Node{net: n, Name: name, NS: fmt.Sprintf("%s-%d", n.name, i), IP: fmt.Sprintf("10.213.0.%d", 10+i),
		port: fmt.Sprintf("p%d", i), drop: map[string]bool{}}
	n.nodes = append(n.nodes, nd)
	n.mu.Unlock()
	n.must("netns", "add", nd.NS)
	n.must("-n", n.sw, "link", "add", nd.port, "type", "veth", "peer", "name", "e0", "netns", nd.NS)
	n.must("-n", n.sw, "link", "set", nd.port, "master", "br0", "up")
	n.must("-n", nd.NS, "addr", "add", nd.IP+"/24", "dev", "e0")
	n.must("-n", nd.NS, "link", "set", "e0", "up")
	n.must("-n", nd.NS, "link", "set", "lo", "up")
	return nd
}

// Nodes returns the nodes, in the order they were made.
func (n *Net) Nodes() []*Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*Node(nil), n.nodes...)
}

// Cut drops every packet between a and b, both ways.
func (n *Net) Cut(a, b *Node) { n.CutOneWay(a, b); n.CutOneWay(b, a) }

// CutOneWay drops every packet from a to b (b→a still passes).
func (n *Net) CutOneWay(from, to *Node) { to.setDrop(from.IP, true) }

// Heal undoes Cut(a, b).
func (n *Net) Heal(a, b *Node) { n.HealOneWay(a, b); n.HealOneWay(b, a) }

// HealOneWay undoes CutOneWay(from, to).
func (n *Net) HealOneWay(from, to *Node) { to.setDrop(from.IP, false) }

// HealAll undoes every cut (shaping stays).
func (n *Net) HealAll() {
	for _, nd := range n.Nodes() {
		nd.mu.Lock()
		nd.drop = map[string]bool{}
		nd.mu.Unlock()
		nd.apply()
	}
}

// Isolate cuts a from every other node, both ways.
func (n *Net) Isolate(a *Node) {
	for _, b := range n.Nodes() {
		if b != a {
			n.Cut(a, b)
		}
	}
}

// Shape sets what every packet nd receives goes through (the zero Shaping
// removes it).
func (nd *Node) Shape(s Shaping) {
	nd.net.t.Helper()
	nd.mu.Lock()
	nd.shape = s
	old := nd.delay
	nd.delay = nil
	nd.mu.Unlock()
	if old != nil {
		old.close()
	}
	if s.Delay > 0 {
		d, err := newDelayLine(nd, s.Delay)
		if err != nil {
			nd.net.t.Fatalf("netfault: delay line in %s: %v", nd.Name, err)
		}
		nd.mu.Lock()
		nd.delay = d
		nd.mu.Unlock()
	}
	nd.apply()
}

func (nd *Node) setDrop(src string, on bool) {
	nd.mu.Lock()
	if on {
		nd.drop[src] = true
	} else {
		delete(nd.drop, src)
	}
	nd.mu.Unlock()
	nd.apply()
}

// apply writes the node's INPUT chain: its drops, then its loss, then its
// delay line.
func (nd *Node) apply() {
	nd.net.t.Helper()
	nd.mu.Lock()
	srcs := make([]string, 0, len(nd.drop))
	for s := range nd.drop {
		srcs = append(srcs, s)
	}
	shape, delayed := nd.shape, nd.delay != nil
	nd.mu.Unlock()
	sort.Strings(srcs)
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n")
	for _, s := range srcs {
		fmt.Fprintf(&b, "-A INPUT -i e0 -s %s/32 -j DROP\n", s)
	}
	if shape.Loss > 0 {
		fmt.Fprintf(&b, "-A INPUT -i e0 -m statistic --mode random --probability %.4f -j DROP\n", shape.Loss)
	}
	if delayed {
		fmt.Fprintf(&b, "-A INPUT -i e0 -j NFQUEUE --queue-num %d --queue-bypass\n", queueNum)
	}
	b.WriteString("COMMIT\n")
	cmd := exec.Command(nd.net.ip, "netns", "exec", nd.NS, nd.net.ipt)
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		nd.net.t.Fatalf("netfault: iptables-restore in %s: %v: %s\n%s", nd.Name, err, out, b.String())
	}
}

// Close removes the network: every delay line, then every namespace
// (their veths, the bridge and the rules with them). It kills no process:
// the test stops what it started first (cleanups run last-in first-out).
func (n *Net) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	nodes := n.nodes
	n.mu.Unlock()
	for _, nd := range nodes {
		nd.mu.Lock()
		d := nd.delay
		nd.delay = nil
		nd.mu.Unlock()
		if d != nil {
			d.close()
		}
	}
	for _, nd := range nodes {
		n.run("netns", "del", nd.NS)
	}
	n.run("netns", "del", n.sw)
}
