//go:build fault

package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/internal/netfault"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// The partition tests (fault_partition_*_test.go): a scaled deployment
// whose every part runs in a network namespace of its own on one bridge
// (internal/netfault): Redis, each hub, each runner, the tabs and the
// upstream agents; the test cuts and heals the paths between them and
// adds loss and delay, then checks the invariants (invariants below).
//
// The test process is two more parts: the tabs (their sockets come from
// the "tabs" node: tabAddr forwards a loopback port to a hub from there)
// and an observer that is never cut nor shaped (hubProcess.addr forwards
// from the "obs" node, so every helper that takes a *hubProcess reads
// through it), plus its own view of Redis through its unix socket, a
// file, outside every network.

// partitionTimeouts are what every process of a partition test gets: a
// 2 s lease and 1 s Redis timeouts, so that "longer than the timeouts"
// and "past the lease TTL" take seconds.
const (
	partLease       = 2 * time.Second
	partRedisParams = "dial_timeout=1s&read_timeout=1s&write_timeout=1s"
)

type partDeploy struct {
	t     *testing.T
	net   *netfault.Net
	redis *netfault.Node
	tabs  *netfault.Node // the tabs' machine
	obs   *netfault.Node // the observer's, never cut
	agent *netfault.Node // an upstream agent's, when a test has one
	rs    *redistest.Server
	rdb   *goredis.Client // the test's view of Redis (unix socket)
	url   string          // RUNHUB_REDIS_URL, without parameters
	mu    sync.Mutex
	outs  []namedOutput
}

// partHub is a hub in its own namespace.
type partHub struct {
	*hubProcess // addr: through the observer
	node        *netfault.Node
	tabAddr     string // a loopback port forwarding from the tabs' node
}

// partRunner is a runner in its own namespace, serving /metrics.
type partRunner struct {
	*runnerProcess
	node    *netfault.Node
	metrics string // its /metrics, through the observer
}

// newPartDeploy makes the network, Redis (AOF, fsync always) in its node,
// and the tabs' and observer's nodes.
func newPartDeploy(t *testing.T) *partDeploy {
	t.Helper()
	n := netfault.New(t)
	d := &partDeploy{t: t, net: n}
	d.redis, d.tabs, d.obs = n.Node("redis"), n.Node("tabs"), n.Node("obs")
	// Protected mode refuses clients from other addresses without a password.
	d.rs = redistest.Start(t, redistest.Options{AOF: true, Port: 6379, Bind: d.redis.IP, Command: d.redis.Command,
		Args: []string{"--protected-mode", "no"}})
	d.rdb = goredis.NewClient(&goredis.Options{Network: "unix", Addr: d.rs.Socket(), ClientName: "test"})
	d.url = "redis://" + d.redis.IP + ":6379"
	t.Cleanup(func() {
		d.rdb.Close()
		if t.Failed() || os.Getenv("RUNHUB_TEST_LOGS") != "" {
			d.mu.Lock()
			for _, o := range d.outs {
				t.Logf("--- %s:\n%s", o.name, tail(o.out.String(), 6000))
			}
			d.mu.Unlock()
		}
	})
	return d
}

func (d *partDeploy) env(name string) []string {
	return []string{"RUNHUB_TEST_AS_HUB=1", "RUNHUB_REDIS_URL=" + d.url + "?client_name=" + name + "&" + partRedisParams,
		"RUNHUB_NODE_ID=" + name, "RUNHUB_LEASE_TTL=" + partLease.String(), "RUNHUB_LOG_LEVEL=info"}
}

func (d *partDeploy) record(name string, out *syncBuffer) {
	d.mu.Lock()
	d.outs = append(d.outs, namedOutput{name, out})
	d.mu.Unlock()
}

// hub starts `hub serve` (runners mode) in a node of its own, listening on
// its address, and waits for /healthz through the observer.
func (d *partDeploy) hub(name string, env ...string) *partHub {
	d.t.Helper()
	nd := d.net.Node(name)
	listen := nd.IP + ":8080"
	p := &hubProcess{t: d.t, addr: d.obs.Forward(listen), data: d.t.TempDir(), out: &syncBuffer{}}
	cmd := nd.Command(os.Args[0], "serve")
	cmd.Env = append(append(os.Environ(), d.env(name)...), "RUNHUB_RUNTIME=runners", "RUNHUB_ADDR="+listen,
		"RUNHUB_INSECURE_LISTEN=1", "RUNHUB_DATA="+p.data, "RUNHUB_STATUS_INTERVAL=20ms")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	var err error
	if p.child, err = startChild(cmd); err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(p.kill)
	d.record("hub "+name, p.out)
	waitFor(d.t, 20*time.Second, "hub "+name+" healthy", func() bool {
		c := http.Client{Timeout: time.Second}
		resp, err := c.Get(p.URL() + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return &partHub{hubProcess: p, node: nd, tabAddr: d.tabs.Forward(listen)}
}

// runner starts `hub runner` in a node of its own, its /metrics served on
// its address, and waits until it has started.
func (d *partDeploy) runner(name string, env ...string) *partRunner {
	d.t.Helper()
	nd := d.net.Node(name)
	maddr := nd.IP + ":9090"
	r := &runnerProcess{out: &syncBuffer{}}
	cmd := nd.Command(os.Args[0], "runner")
	cmd.Env = append(append(append(os.Environ(), d.env(name)...), "RUNHUB_METRICS_ADDR="+maddr), env...)
	cmd.Stdout, cmd.Stderr = r.out, r.out
	var err error
	if r.child, err = startChild(cmd); err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(r.kill)
	d.record("runner "+name, r.out)
	waitFor(d.t, 20*time.Second, "runner "+name+" to start", func() bool {
		return strings.Contains(r.out.String(), "runhub runner started")
	})
	return &partRunner{runnerProcess: r, node: nd, metrics: "http://" + d.obs.Forward(maddr) + "/metrics"}
}

// metric is one series of the runner's /metrics (-1 when absent).
func (r *partRunner) metric(t *testing.T, series string) float64 {
	t.Helper()
	code, body := httpBody(t, "GET", r.metrics, "")
	if code != 200 {
		t.Fatalf("runner /metrics: %d", code)
	}
	return seriesValue(string(body), series)
}

// tab dials a tab from the tabs' node to h.
func (d *partDeploy) tab(h *partHub) *tab {
	d.t.Helper()
	return dialTab(d.t, &hubProcess{t: d.t, addr: h.tabAddr})
}

// owner is the node holding runID's lease ("" when none does).
func (d *partDeploy) owner(runID string) string {
	v, err := d.rdb.Get(d.t.Context(), "rh:run:{"+runID+"}:lease").Result()
	if err != nil {
		return ""
	}
	return v
}

// ---- invariants ----

// invariants counts, for a scenario, what each invariant checked.
type invariants struct {
	runs      int // runs checked: seq contiguous from 1, exactly one terminal
	acked     int // acknowledged appends (events the journal answered, seen by a tab) found in the journal
	fenced    int // appends of a fenced runner refused
	answers   int // HTTP answers while Redis was cut: all 503, none 500
	moved     int // tabs told to move (goaway or close reason) that resumed from their cursor
	converged time.Duration
}

func (iv invariants) String() string {
	return fmt.Sprintf("runs %d, acknowledged events %d, fenced appends %d, answers while cut %d, tabs moved %d, converged within %v",
		iv.runs, iv.acked, iv.fenced, iv.answers, iv.moved, iv.converged.Round(10*time.Millisecond))
}

// checkRun checks a run's journal (read through h): seqs 1… without gap
// or duplicate, exactly one terminal event, the last; it returns the
// events.
func (iv *invariants) checkRun(t *testing.T, h *hubProcess, runID string) []protocol.Envelope {
	t.Helper()
	events := allEvents(t, h.URL(), runID)
	if len(events) == 0 {
		t.Fatalf("run %s has no events", runID)
	}
	contiguous(t, "run "+runID, events, 1)
	if k := terminals(events); k != 1 || !events[len(events)-1].Terminal {
		t.Fatalf("run %s: %d terminal events, the last is %s", runID, k, events[len(events)-1].Type)
	}
	iv.runs++
	return events
}

// checkAcked fails unless every event a tab got of a run (each was
// acknowledged to its writer: a tab only gets journaled events) is in the
// journal, the same at the same seq.
func (iv *invariants) checkAcked(t *testing.T, what string, got, journal []protocol.Envelope) {
	t.Helper()
	bySeq := map[uint64]protocol.Envelope{}
	for _, e := range journal {
		bySeq[e.Seq] = e
	}
	for _, e := range got {
		j, ok := bySeq[e.Seq]
		if !ok || j.EventID != e.EventID || string(j.Payload) != string(e.Payload) {
			t.Fatalf("%s: the tab got %s at seq %d (%s), the journal has %s (lost or changed)", what, e.EventID, e.Seq, e.Type, j.EventID)
		}
		iv.acked++
	}
}

// noDupes fails if a tab got a run's event twice or out of order.
func noDupes(t *testing.T, what string, events []protocol.Envelope) {
	t.Helper()
	for i := 1; i < len(events); i++ {
		if events[i].Seq != events[i-1].Seq+1 {
			t.Fatalf("%s: seq %d after %d (gap or duplicate)", what, events[i].Seq, events[i-1].Seq)
		}
	}
}

// lastSeq is the seq of the last event of runID a tab got (0: none).
func lastSeq(b *tab, runID string) uint64 {
	ev := b.run(runID)
	if len(ev) == 0 {
		return 0
	}
	return ev[len(ev)-1].Seq
}

// sessionStatus is GET /v1/sessions/{sid} on a hub (its status as the
// hub's tracker holds it).
func sessionStatus(t testing.TB, h *hubProcess, sid string) (protocol.SessionStatus, int) {
	t.Helper()
	var ss protocol.SessionStatus
	code := call(t, "GET", h.URL()+"/v1/sessions/"+sid, nil, &ss)
	return ss, code
}

// no500 fails if a hub ever answered 500 (its request counter has no
// code="500" series).
func no500(t *testing.T, hubs ...*partHub) {
	t.Helper()
	for _, h := range hubs {
		if strings.Contains(scrapeURL(t, h.URL()+"/metrics"), `code="500"`) {
			t.Fatalf("%s answered 500", h.node.Name)
		}
	}
}
