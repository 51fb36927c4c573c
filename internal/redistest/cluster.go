package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ClusterOptions configures a test Redis Cluster.
type ClusterOptions struct {
	// Masters is the number of masters (default 3); each gets Replicas
	// replicas (default 1; -1 for none).
	Masters, Replicas int
	// NodeTimeout is cluster-node-timeout: how long a master may be
	// unreachable before its replica takes over. Default 2s.
	NodeTimeout time.Duration
	// Args are extra redis-server arguments for every node.
	Args []string
	// Hosts, when set, places node i (masters first) on Hosts[i]: its
	// address and the command that runs its server (a network namespace
	// of its own: internal/netfault), every node on port HostPort of its
	// own address; redis-cli runs with Hosts[0]'s command. Default: every
	// node on a free port of 127.0.0.1.
	Hosts []Host
}

// Host is where a Cluster node runs (ClusterOptions.Hosts).
type Host struct {
	Bind    string
	Command func(name string, args ...string) *exec.Cmd
}

// HostPort is the port of every node placed on a Host (bus: +10000).
const HostPort = 7000

// Cluster is a Redis Cluster of redis-server processes on 127.0.0.1, made
// with redis-cli --cluster create.
type Cluster struct {
	// Nodes are the servers, masters first (as created; a failover swaps
	// roles without reordering them).
	Nodes []*Server
}

// ClusterStartTimeout bounds how long NewCluster waits for the cluster to
// be formed (cluster_state:ok everywhere, every replica in sync).
const ClusterStartTimeout = 60 * time.Second

// StartCluster starts a cluster for the test and stops its processes (and
// removes their files) when the test ends. It fails the test when
// redis-server or redis-cli is missing or the cluster does not form.
func StartCluster(tb testing.TB, opts ClusterOptions) *Cluster {
	tb.Helper()
	c, err := NewCluster(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// NewCluster starts a cluster outside a test (from TestMain). The caller
// must Close it.
func NewCluster(opts ClusterOptions) (*Cluster, error) {
	if opts.Masters <= 0 {
		opts.Masters = 3
	}
	switch {
	case opts.Replicas == 0:
		opts.Replicas = 1
	case opts.Replicas < 0:
		opts.Replicas = 0
	}
	if opts.NodeTimeout <= 0 {
		opts.NodeTimeout = 2 * time.Second
	}
	cli, err := findCLI()
	if err != nil {
		return nil, err
	}
	var last error
	for range 3 { // a port taken between picking and binding: pick again
		c, err := newCluster(cli, opts)
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

func newCluster(cli string, opts ClusterOptions) (*Cluster, error) {
	count := opts.Masters * (1 + opts.Replicas)
	var ports []int
	if len(opts.Hosts) > 0 {
		if len(opts.Hosts) != count {
			return nil, fmt.Errorf("redistest: %d hosts for %d nodes", len(opts.Hosts), count)
		}
		for range count {
			ports = append(ports, HostPort)
		}
	} else {
		var err error
		if ports, err = freePorts(count); err != nil {
			return nil, err
		}
	}
	c := &Cluster{}
	for i, p := range ports {
		args := append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(opts.NodeTimeout.Milliseconds(), 10)}, opts.Args...)
		o := Options{Port: p, Args: args}
		if len(opts.Hosts) > 0 {
			o.Bind, o.Command = opts.Hosts[i].Bind, opts.Hosts[i].Command
		}
		s, err := New(o)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	create := []string{"--cluster", "create"}
	for _, s := range c.Nodes {
		create = append(create, s.Addr())
	}
	create = append(create, "--cluster-replicas", strconv.Itoa(opts.Replicas), "--cluster-yes")
	cmd := exec.Command(cli, create...)
	if len(opts.Hosts) > 0 && opts.Hosts[0].Command != nil {
		cmd = opts.Hosts[0].Command(cli, create...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("redistest: redis-cli %s: %w\n%s", strings.Join(create, " "), err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ClusterStartTimeout)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// findCLI locates redis-cli: $REDIS_CLI, then PATH, then /usr/bin/redis-cli.
func findCLI() (string, error) {
	if p := os.Getenv("REDIS_CLI"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("redis-cli"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/redis-cli"); err == nil {
		return "/usr/bin/redis-cli", nil
	}
	return "", errors.New("redistest: redis-cli not found (not on PATH, not at /usr/bin/redis-cli, $REDIS_CLI unset); " +
		"install it (apt-get install redis-tools) — tests that need a Redis Cluster fail rather than skip")
}

// freePorts returns n TCP ports free on 127.0.0.1 whose cluster bus ports
// (port+10000) are free too.
func freePorts(n int) ([]int, error) {
	var ports []int
	var hold []net.Listener
	defer func() {
		for _, l := range hold {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			return nil, errors.New("redistest: no free ports for a cluster")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("redistest: %w", err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		if p+10000 > 65535 {
			l.Close()
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			l.Close()
			continue
		}
		hold = append(hold, l, bus)
		ports = append(ports, p)
	}
	return ports, nil
}

// URL is the cluster's address for journal/redis.NewClient:
// redis+cluster://127.0.0.1:P1,127.0.0.1:P2,…
func (c *Cluster) URL() string {
	addrs := make([]string, 0, len(c.Nodes))
	for _, s := range c.Nodes {
		addrs = append(addrs, s.Addr())
	}
	return "redis+cluster://" + strings.Join(addrs, ",")
}

// Addrs are the nodes' TCP addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, 0, len(c.Nodes))
	for _, s := range c.Nodes {
		addrs = append(addrs, s.Addr())
	}
	return addrs
}

// Node returns the server listening on addr, or nil.
func (c *Cluster) Node(addr string) *Server {
	for _, s := range c.Nodes {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// WaitHealthy waits until every running node reports cluster_state:ok and
// every slot is served, with as many masters as before, and every replica's
// link to its master is up.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	var last error
	for {
		if last = c.healthy(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: cluster not healthy: %v", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) healthy(ctx context.Context) error {
	for _, s := range c.Nodes {
		if !s.Running() {
			continue
		}
		rdb := goredis.NewClient(&goredis.Options{Network: "unix", Addr: s.Socket(), MaxRetries: -1})
		info, err := rdb.ClusterInfo(ctx).Result()
		if err == nil && !strings.Contains(info, "cluster_state:ok") {
			err = fmt.Errorf("%s: cluster_state is not ok", s.Addr())
		}
		if err == nil && !strings.Contains(info, "cluster_slots_ok:16384") {
			err = fmt.Errorf("%s: not every slot is ok", s.Addr())
		}
		var repl string
		if err == nil {
			repl, err = rdb.Info(ctx, "replication").Result()
		}
		rdb.Close()
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("%s: replica not in sync", s.Addr())
		}
	}
	return nil
}

// Close stops every node and removes their files.
func (c *Cluster) Close() {
	for _, s := range c.Nodes {
		s.Close()
	}
}
