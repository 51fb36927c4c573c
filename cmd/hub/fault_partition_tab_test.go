//go:build fault

package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/runhub/runhub/protocol"
)

// pongWithin sends a ping and reports whether its pong came within d
// (recording what else arrives).
func (b *tab) pongWithin(d time.Duration) bool {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	id := fmt.Sprintf("p%d", time.Now().UnixNano())
	if err := b.c.Send(ctx, protocol.Ping{Type: protocol.MsgPing, ID: id}); err != nil {
		return false
	}
	for {
		m, err := b.c.Next(ctx)
		if err != nil {
			return false
		}
		b.record(m)
		if p, ok := m.(*protocol.Pong); ok && p.ID == id {
			return true
		}
	}
}

// The path between the tabs and a hub cut both ways while a tab focuses a
// run, packets dropped without FIN or RST: nothing can tell the tab, so its
// own ping finds out (no pong within 3 s; the socket still looks open),
// and it resumes on the healthy hub from its cursor with no gap or
// duplicate. The cut-off hub drops the dead socket once its writes stall
// for the write timeout (10 s), and the session's presence, seen from the
// other hub, counts the tab once. Healed, the hub takes tabs again.
func TestFault_PartitionTabFromHub(t *testing.T) {
	d := newPartDeploy(t)
	a, b := d.hub("hub-a"), d.hub("hub-b")
	d.runner("runner-1")
	var iv invariants
	ta := d.tab(a)
	res := ta.start(`{"tokens":2500,"token_ms":5}`)
	ta.c.Focus(ta.ctx(), res.SessionID, "")
	ta.until(20*time.Second, "20 tokens", func() bool { return count(ta.run(res.RunID), protocol.EventTokenDelta) >= 20 })
	if !ta.pongWithin(5 * time.Second) {
		t.Fatal("no pong before the cut")
	}

	d.net.Cut(d.tabs, a.node)
	cut := time.Now()
	if ta.pongWithin(3 * time.Second) {
		t.Fatal("a pong across the cut")
	}
	select {
	case <-ta.c.Done():
		t.Fatalf("the tab's socket closed by itself (%v): the cut should be silent", ta.c.Err())
	default:
	}
	ta.c.Close()
	seen := ta.run(res.RunID)
	tb := d.tab(b)
	tb.c.Focus(tb.ctx(), res.SessionID, seen[len(seen)-1].EventID)
	tb.until(60*time.Second, "the rest of the run on hub-b", func() bool { return tb.terminal(res.RunID) })
	iv.moved++
	whole := append(append([]protocol.Envelope(nil), seen...), tb.run(res.RunID)...)
	events := iv.checkRun(t, b.hubProcess, res.RunID)
	checkDone(t, "the run", events, 2500)
	sameEvents(t, "the tab (both hubs) vs. the journal", whole, events)
	iv.checkAcked(t, "the tab", whole, events)

	// The cut-off hub drops the dead socket; presence counts the tab once.
	waitFor(t, 40*time.Second, "hub-a to drop the dead socket", func() bool {
		return hubMetric(t, a.hubProcess, "runhub_sockets_open") == 0
	})
	dropped := time.Since(cut)
	w := d.tab(b)
	w.c.Watch(w.ctx(), false, res.SessionID)
	w.until(30*time.Second, "presence: one focusing tab", func() bool {
		s, ok := w.status[res.SessionID]
		return ok && s.Presence != nil && s.Presence.Focused == 1
	})
	iv.converged = time.Since(cut)

	d.net.Heal(d.tabs, a.node)
	tc := d.tab(a)
	again := tc.start(`{"tokens":20,"token_ms":1}`)
	tc.c.Focus(tc.ctx(), again.SessionID, "")
	tc.until(30*time.Second, "a run through hub-a after the heal", func() bool { return tc.terminal(again.RunID) })
	checkDone(t, "a run after the heal", tc.run(again.RunID), 20)
	iv.runs++
	noPanic(t, a.hubProcess)
	no500(t, a, b)
	t.Logf("tab ⟂ hub: hub-a dropped the dead socket %v after the cut; %s", dropped.Round(10*time.Millisecond), iv)
}
