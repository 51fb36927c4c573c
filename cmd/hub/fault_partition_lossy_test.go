//go:build fault

package main

import (
	"testing"
	"time"

	"github.com/runhub/runhub/internal/netfault"
)

// 5 % loss and 200 ms delay on every path (every packet Redis, the hubs,
// the runner and the tabs receive) for a whole run, with 3 s Redis
// timeouts and 6 s leases (a round trip is 400 ms at best, and a lost
// segment waits for its retransmission): a start on one hub, a tab
// focusing the run there and another watching it on the other hub. The
// run completes once, its seqs contiguous; the focusing tab gets every
// event once, in order, as the journal has it; the watching tab's status
// reaches the run's end.
func TestFault_PartitionLossAndDelay(t *testing.T) {
	d := newPartDeploy(t)
	slow := []string{"RUNHUB_LEASE_TTL=6s"}
	hubEnv := func(name string) []string {
		return append(slow, "RUNHUB_REDIS_URL="+d.url+"?client_name="+name+"&dial_timeout=3s&read_timeout=3s&write_timeout=3s")
	}
	a, b := d.hub("hub-a", hubEnv("hub-a")...), d.hub("hub-b", hubEnv("hub-b")...)
	r := d.runner("runner-1", hubEnv("runner-1")...)
	var iv invariants
	ta, tw := d.tab(a), d.tab(b)
	shaping := netfault.Shaping{Loss: 0.05, Delay: 200 * time.Millisecond}
	for _, nd := range []*netfault.Node{d.redis, d.tabs, a.node, b.node, r.node} {
		nd.Shape(shaping)
	}
	start := time.Now()
	res := ta.start(`{"tokens":10,"token_ms":1,"tools":1}`)
	ta.c.Focus(ta.ctx(), res.SessionID, "")
	tw.c.Watch(tw.ctx(), false, res.SessionID)
	ta.until(120*time.Second, "the run's terminal event", func() bool { return ta.terminal(res.RunID) })
	took := time.Since(start)
	events := iv.checkRun(t, a.hubProcess, res.RunID)
	checkDone(t, "the run through loss and delay", events, 10)
	sameEvents(t, "the tab vs. the journal", ta.run(res.RunID), events)
	iv.checkAcked(t, "the tab", ta.run(res.RunID), events)
	last := events[len(events)-1].Seq
	ended := time.Now()
	tw.until(60*time.Second, "the watching tab's status to reach the run's end", func() bool {
		s, ok := tw.status[res.SessionID]
		return ok && s.Terminal && s.LastSeq == last
	})
	iv.converged = time.Since(ended)
	for _, nd := range d.net.Nodes() {
		nd.Shape(netfault.Shaping{})
	}
	noPanic(t, a.hubProcess)
	noPanic(t, b.hubProcess)
	no500(t, a, b)
	t.Logf("5%% loss, 200 ms delay: the run took %v; %s", took.Round(10*time.Millisecond), iv)
}
