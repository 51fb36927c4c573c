package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// newClusterScaled is a scaled deployment on a Redis Cluster of 3 masters
// and 3 replicas whose failover takes about nodeTimeout.
func newClusterScaled(t *testing.T, nodeTimeout, leaseTTL time.Duration) (*scaled, *redistest.Cluster) {
	t.Helper()
	c := redistest.StartCluster(t, redistest.ClusterOptions{NodeTimeout: nodeTimeout})
	rdb := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs(), ClientName: "test"})
	return newScaledOn(t, nil, c.URL(), rdb, leaseTTL), c
}

// Two hubs and two runners on a Redis Cluster; a master holding a running
// run's keys is killed (SIGKILL) mid-run and its replica takes over; the
// killed node comes back as the new master's replica. With
// RUNHUB_REDIS_WAIT_REPLICAS=1 no acknowledged event is lost: every tab
// (two on each hub) gets its run contiguous from seq 1, no duplicate, no
// gap, and every run ends with exactly one terminal (done, all its text),
// the same events the journal holds. Before the kill, a cancel sent
// through one hub stops a run executing in a runner, started on the other.
func TestScaleOut_ClusterFailover(t *testing.T) {
	s, cluster := newClusterScaled(t, 1500*time.Millisecond, 10*time.Second)
	wait := []string{"RUNHUB_REDIS_WAIT_REPLICAS=1", "RUNHUB_REDIS_WAIT_TIMEOUT=2s"}
	hubs := []*hubProcess{s.hub("hubA", wait...), s.hub("hubB", wait...)}
	s.runner("r1", wait...)
	s.runner("r2", wait...)

	const runs, n = 4, 700
	type followed struct {
		tab       *tab
		hub       *hubProcess
		runID, id string
	}
	var fs []*followed
	for i := range runs {
		h := hubs[i%2]
		tb := dialTab(t, h)
		res := tb.start(fmt.Sprintf(`{"tokens":%d,"token_ms":10,"tools":0}`, n))
		tb.c.Focus(tb.ctx(), res.SessionID, "")
		fs = append(fs, &followed{tab: tb, hub: h, runID: res.RunID, id: res.SessionID})
	}
	for _, f := range fs {
		f.tab.until(30*time.Second, "30 tokens of "+f.runID, func() bool {
			return count(f.tab.run(f.runID), protocol.EventTokenDelta) >= 30
		})
	}

	// A control crosses hubs and reaches the runner through its inbox: a
	// run started on hub B is cancelled through hub A.
	tc := dialTab(t, hubs[1])
	cres := tc.start(`{"tokens":100000,"token_ms":10,"tools":0}`)
	tc.c.Focus(tc.ctx(), cres.SessionID, "")
	tc.until(30*time.Second, "tokens of the run to cancel", func() bool { return count(tc.run(cres.RunID), protocol.EventTokenDelta) >= 5 })
	if cr := cancelHTTP(t, hubs[0], cres.RunID); cr.Status != protocol.ResultAccepted {
		t.Fatalf("cancel through the other hub: %+v", cr)
	}
	tc.until(30*time.Second, "the cancelled run's terminal", func() bool { return tc.terminal(cres.RunID) })
	checkTerminal(t, "cancelled run", tc.run(cres.RunID), protocol.EventCancelled)

	// Kill the master that holds the first run's keys.
	ctx := context.Background()
	victim := masterOfRun(t, s.rdb.(*goredis.ClusterClient), fs[0].runID)
	node := cluster.Node(victim)
	if node == nil {
		t.Fatalf("no node at %s", victim)
	}
	for _, f := range fs {
		if f.tab.terminal(f.runID) {
			t.Fatalf("%s had ended before the kill: the fault hits no running run", f.runID)
		}
	}
	t.Logf("killing master %s (holds %s)", victim, fs[0].runID)
	node.Kill()
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cluster.WaitHealthy(hctx); err != nil {
		t.Fatalf("after the kill: %v", err)
	}
	if m := runningMasters(t, cluster); m != 3 {
		t.Fatalf("%d masters after the failover, want 3 (the replica promoted)", m)
	}
	// The promoted master has no replica, so WAIT 1 holds its shards'
	// appends (the executors retry them) until the killed node, restarted
	// as a supervisor would, rejoins as its replica.
	node.Restart(t)
	hctx2, cancel2 := context.WithTimeout(ctx, 30*time.Second)
	defer cancel2()
	if err := cluster.WaitHealthy(hctx2); err != nil {
		t.Fatalf("after the restart: %v", err)
	}

	for _, h := range hubs {
		// The hubs noticed the failover and got their connections back.
		if v := metricLine(scrapeURL(t, h.URL()+"/metrics"), "runhub_redis_reconnects_total"); v == "" || v == "0" {
			t.Fatalf("%s: runhub_redis_reconnects_total %q after a failover, want > 0", h.URL(), v)
		}
	}
	for _, f := range fs {
		f.tab = followToEnd(t, f.tab, f.hub, f.id, f.runID, 60*time.Second)
		seen := f.tab.run(f.runID)
		checkDone(t, "tab of "+f.runID, seen, n)
		sameEvents(t, "tab of "+f.runID+" vs. the journal", seen, allEvents(t, f.hub.URL(), f.runID))
	}
}

// followToEnd reads tb until runID's terminal event; should the socket
// drop, it reconnects to h with its cursor, as a browser would.
func followToEnd(t *testing.T, tb *tab, h *hubProcess, sid, runID string, within time.Duration) *tab {
	t.Helper()
	deadline := time.Now().Add(within)
	for !tb.terminal(runID) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not end; the tab has %d events", runID, len(tb.run(runID)))
		}
		if tb.closed != nil {
			seen := tb.run(runID)
			next := dialTab(t, h)
			next.events = seen
			cursor := ""
			if len(seen) > 0 {
				cursor = seen[len(seen)-1].EventID
			}
			next.c.Focus(next.ctx(), sid, cursor)
			tb = next
			t.Logf("the tab of %s reconnected", runID)
		}
		func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Until(deadline))
			defer cancel()
			m, err := tb.c.Next(ctx)
			if err != nil {
				tb.closed = err
				return
			}
			tb.record(m)
		}()
	}
	return tb
}

// masterOfRun returns the address of the master holding runID's meta.
func masterOfRun(t *testing.T, rdb *goredis.ClusterClient, runID string) string {
	t.Helper()
	ctx := context.Background()
	var key string
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
		keys, err := c.Keys(ctx, "rh:*:run:"+runID).Result()
		if len(keys) > 0 {
			key = keys[0]
		}
		return err
	})
	if err != nil || key == "" {
		t.Fatalf("finding the keys of %s: %q, %v", runID, key, err)
	}
	m, err := rdb.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return m.Options().Addr
}

// runningMasters counts the running nodes that are masters.
func runningMasters(t *testing.T, c *redistest.Cluster) int {
	t.Helper()
	masters := 0
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		rdb := goredis.NewClient(&goredis.Options{Addr: n.Addr()})
		info, err := rdb.Info(context.Background(), "replication").Result()
		rdb.Close()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "role:master") {
			masters++
		}
	}
	return masters
}

func TestRedisWaitConfig(t *testing.T) {
	env := map[string]string{"RUNHUB_REDIS_URL": "redis+cluster://127.0.0.1:7000", "RUNHUB_REDIS_WAIT_REPLICAS": "-1"}
	if _, err := parseRunnerConfig(nil, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "RUNHUB_REDIS_WAIT_REPLICAS -1") {
		t.Fatalf("RUNHUB_REDIS_WAIT_REPLICAS=-1: %v", err)
	}
	env["RUNHUB_REDIS_WAIT_REPLICAS"] = "1"
	cfg, err := parseRunnerConfig(nil, func(k string) string { return env[k] })
	if err != nil || cfg.WaitReplicas != 1 || cfg.WaitTimeout != time.Second {
		t.Fatalf("RUNHUB_REDIS_WAIT_REPLICAS=1: %+v, %v", cfg, err)
	}
}

// metricLine returns the value of the unlabelled sample name in a
// Prometheus text exposition, "" when absent.
func metricLine(text, name string) string {
	for line := range strings.SplitSeq(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
