//go:build fault

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/protocol"
)

// A runner cut off from Redis (both ways, packets dropped) past its lease
// TTL while a run executes in it, then healed. The lease lapses; a reaper
// (the hub's) journals the run's one terminal `interrupted`; the tab gets
// it. Once healed, the runner's late writes for that run are refused (the
// journal takes nothing after a run's terminal event: the fence) and
// counted by its runhub_journal_appends_fenced_total; it stops the run
// (runs_executing 0) and nothing reaches the journal after the takeover.
// Meanwhile a start goes to the other runner and completes, and after the
// heal the cut-off runner executes new runs again.
func TestFault_PartitionRunnerFromRedis(t *testing.T) {
	d := newPartDeploy(t)
	a := d.hub("hub-a")
	r1 := d.runner("runner-1")
	var iv invariants
	ta := d.tab(a)
	res := ta.start(`{"tokens":100000,"token_ms":5}`)
	ta.c.Focus(ta.ctx(), res.SessionID, "")
	ta.until(20*time.Second, "50 tokens", func() bool { return count(ta.run(res.RunID), protocol.EventTokenDelta) >= 50 })
	if o := d.owner(res.RunID); o != "runner-1" {
		t.Fatalf("the run's lease is %q's", o)
	}
	r2 := d.runner("runner-2")
	if f := r1.metric(t, "runhub_journal_appends_fenced_total"); f != 0 {
		t.Fatalf("fenced appends before the cut: %v", f)
	}

	d.net.Cut(r1.node, d.redis)
	cut := time.Now()
	// The takeover: the lease lapses, a reaper journals interrupted.
	ta.until(30*time.Second, "the run's terminal event", func() bool { return endsWith(ta, res.RunID) })
	tookOver := time.Since(cut)
	events := iv.checkRun(t, a.hubProcess, res.RunID)
	checkInterrupted(t, "the cut-off runner's run", events)
	if ep := lastError(t, events); !strings.Contains(ep.Message, "lease") {
		t.Fatalf("the run ended %+v, want the reaper's interrupted (lease)", ep)
	}
	sameEvents(t, "the tab vs. the journal", ta.run(res.RunID), events)
	iv.checkAcked(t, "the tab", ta.run(res.RunID), events)
	// A start meanwhile executes on the other runner.
	other := ta.start(`{"tokens":20,"token_ms":1}`)
	checkDone(t, "a run started during the cut", waitTerminal(t, a.hubProcess, other.RunID, 30*time.Second), 20)
	if o := d.owner(other.RunID); o == "runner-1" {
		t.Fatalf("the cut-off runner holds the new run's lease")
	}
	iv.runs++

	// Healed: the runner's late write is refused and counted; it stops.
	d.net.Heal(r1.node, d.redis)
	healed := time.Now()
	waitFor(t, 30*time.Second, "the runner's late append to be refused", func() bool {
		return r1.metric(t, "runhub_journal_appends_fenced_total") > 0
	})
	waitFor(t, 30*time.Second, "the runner to stop the run", func() bool {
		return r1.metric(t, "runhub_runs_executing") == 0
	})
	iv.fenced = int(r1.metric(t, "runhub_journal_appends_fenced_total"))
	iv.converged = time.Since(healed)
	sameEvents(t, "the journal after the heal vs. at the takeover", allEvents(t, a.URL(), res.RunID), events)
	if !strings.Contains(r1.out.String(), "run ended elsewhere") && !strings.Contains(r1.out.String(), "lost the lease") {
		t.Fatalf("the runner did not log stopping the run:\n%s", tail(r1.out.String(), 3000))
	}
	// The healed runner takes work again: stop the other one.
	if err := r2.term(20 * time.Second); err != nil {
		t.Fatalf("runner-2 stop: %v", err)
	}
	again := ta.start(`{"tokens":20,"token_ms":1}`)
	checkDone(t, "a run after the heal", waitTerminal(t, a.hubProcess, again.RunID, 30*time.Second), 20)
	iv.runs++
	noPanic(t, a.hubProcess)
	no500(t, a)
	t.Logf("runner ⟂ Redis: takeover journaled %v after the cut; %s", tookOver.Round(10*time.Millisecond), iv)
}
