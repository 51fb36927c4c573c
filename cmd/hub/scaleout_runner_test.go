package main

import (
	"syscall"
	"testing"
	"time"

	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// SIGKILL the runner executing a run: its lease lapses and the run ends
// with exactly one terminal error "interrupted" within a few lease TTLs,
// while two hubs and the other runner all reap; the other runner keeps
// serving new runs, and a run slower than the lease TTL between events is
// not interrupted.
func TestScaleOut_RunnerKilledInterruptsOnce(t *testing.T) {
	ttl := time.Second
	s := newScaled(t, redistest.Options{}, ttl)
	a, b := s.hub("hubA"), s.hub("hubB")
	procs := map[string]*runnerProcess{"r1": s.runner("r1"), "r2": s.runner("r2")}

	run := startHTTP(t, a, `{"tokens":100000,"token_ms":5,"tools":0}`)
	tb := dialTab(t, b)
	tb.c.Focus(tb.ctx(), run.SessionID, "")
	owner := s.waitOwner(run.RunID)
	tb.until(20*time.Second, "10 tokens", func() bool { return count(tb.run(run.RunID), protocol.EventTokenDelta) >= 10 })
	survivor := "r1"
	if owner == "r1" {
		survivor = "r2"
	}
	// A message queued behind the run: it must go on once the run is
	// reaped, as it does when a run ends.
	var qr protocol.ControlResult
	if code := call(t, "POST", b.URL()+"/v1/sessions/"+run.SessionID+"/queue", map[string]string{"message": "after"}, &qr); code != 200 || !qr.Accepted {
		t.Fatalf("queue: %d %+v", code, qr)
	}
	procs[owner].kill()
	killed := time.Now()
	var events []protocol.Envelope
	waitFor(t, 20*time.Second, "the interrupted terminal", func() bool {
		events = allEvents(t, a.URL(), run.RunID)
		return events[len(events)-1].Terminal
	})
	took := time.Since(killed)
	checkInterrupted(t, "journal", events)
	if took > 5*ttl {
		t.Fatalf("the run ended %v after its runner died: want within 5 lease TTLs (%v)", took, 5*ttl)
	}
	tb.until(10*time.Second, "the terminal event on the tab", func() bool { return tb.terminal(run.RunID) })
	sameEvents(t, "tab on hub B", tb.run(run.RunID), events)
	t.Logf("interrupted %v after SIGKILL (lease TTL %v)", took.Round(time.Millisecond), ttl)

	// The queued message starts the session's next run, on the survivor.
	var ss protocol.SessionStatus
	waitFor(t, 20*time.Second, "the queued message to start a run", func() bool {
		call(t, "GET", a.URL()+"/v1/sessions/"+run.SessionID, nil, &ss)
		return ss.RunID != run.RunID && ss.RunID != "" && ss.Status == protocol.StatusRunning
	})
	if o := s.waitOwner(ss.RunID); o != survivor {
		t.Fatalf("the queued message's run taken by %q, want the survivor %s", o, survivor)
	}
	if cr := cancelHTTP(t, a, ss.RunID); cr.Status != protocol.ResultAccepted {
		t.Fatalf("cancel the queued message's run: %+v", cr)
	}
	checkTerminal(t, "queued message's run", waitTerminal(t, b, ss.RunID, 20*time.Second), protocol.EventCancelled)

	// The survivor serves new runs: a quick one, and a slow one whose pauses
	// are longer than the lease TTL.
	quick := startHTTP(t, b, `{"tokens":20,"token_ms":5,"tools":0}`)
	slow := startHTTP(t, a, `{"tokens":3,"token_ms":1500,"tools":0}`)
	for _, r := range []protocol.RunStartResult{quick, slow} {
		if o := s.waitOwner(r.RunID); o != survivor {
			t.Fatalf("run %s taken by %q, want the survivor %s", r.RunID, o, survivor)
		}
	}
	checkDone(t, "quick run", waitTerminal(t, a, quick.RunID, 20*time.Second), 20)
	checkDone(t, "slow run", waitTerminal(t, b, slow.RunID, 30*time.Second), 3)
}

// A runner asked to stop (SIGTERM) lets a short run finish within the
// grace, and ends a long one with exactly one interrupted terminal before
// it exits; a hub asked to stop sends goaway, and its tab's run goes on in
// the runner.
func TestScaleOut_RunnerSIGTERM(t *testing.T) {
	s := newScaled(t, redistest.Options{}, 2*time.Second)
	a, b := s.hub("hubA"), s.hub("hubB")

	// A generous grace: the run in flight completes.
	r1 := s.runner("r1", "RUNHUB_SHUTDOWN_GRACE=30s")
	short := startHTTP(t, a, `{"tokens":100,"token_ms":10,"tools":0}`)
	if o := s.waitOwner(short.RunID); o != "r1" {
		t.Fatalf("owner %q", o)
	}
	waitFor(t, 10*time.Second, "tokens of the short run", func() bool { return runStatus(t, a, short.RunID).LastSeq >= 10 })
	if err := r1.term(40 * time.Second); err != nil {
		t.Fatalf("runner r1: %v\n%s", err, r1.out.String())
	}
	// The runner waited for it: its terminal is journaled when it exits.
	events := allEvents(t, b.URL(), short.RunID)
	checkDone(t, "short run", events, 100)

	// A short grace: the long run ends interrupted, by the runner itself.
	r2 := s.runner("r2", "RUNHUB_SHUTDOWN_GRACE=300ms")
	long := startHTTP(t, a, `{"tokens":100000,"token_ms":5,"tools":0}`)
	if o := s.waitOwner(long.RunID); o != "r2" {
		t.Fatalf("owner %q", o)
	}
	waitFor(t, 10*time.Second, "tokens of the long run", func() bool { return runStatus(t, a, long.RunID).LastSeq >= 10 })
	exited := r2.sigterm()
	// The runner ends the run itself, before it exits.
	events = waitTerminal(t, b, long.RunID, 10*time.Second)
	checkInterrupted(t, "long run", events)
	// A run queued while the runner is on its way out is not its to take:
	// it is handed back and another runner executes it.
	next := startHTTP(t, a, `{"tokens":20,"token_ms":5,"tools":0}`)
	if err := exited(20 * time.Second); err != nil {
		t.Fatalf("runner r2: %v\n%s", err, r2.out.String())
	}
	if o := s.owner(long.RunID); o != "" {
		t.Fatalf("lease still held by %q after the runner exited", o)
	}
	s.runner("r3")
	checkDone(t, "run queued while r2 stopped", waitTerminal(t, b, next.RunID, 20*time.Second), 20)
	sameEvents(t, "long run after r2 exited", allEvents(t, b.URL(), long.RunID), events)

	// A hub asked to stop: goaway, and the run goes on.
	ta := dialTab(t, a)
	res := ta.start(`{"tokens":200,"token_ms":10,"tools":0}`)
	ta.c.Focus(ta.ctx(), res.SessionID, "")
	ta.until(20*time.Second, "10 tokens", func() bool { return count(ta.run(res.RunID), protocol.EventTokenDelta) >= 10 })
	if err := a.term(20 * time.Second); err != nil {
		t.Fatalf("hub A: %v\n%s", err, a.out.String())
	}
	cerr := ta.drain(10 * time.Second)
	if len(ta.goaway) != 1 || client.CloseStatus(cerr) != protocol.CloseServiceRestart {
		t.Fatalf("goaway %+v, close %v", ta.goaway, cerr)
	}
	seenA := ta.run(res.RunID)
	if ta.terminal(res.RunID) {
		t.Fatalf("the run ended before the hub stopped; make it longer")
	}
	tb := dialTab(t, b)
	tb.c.Focus(tb.ctx(), res.SessionID, seenA[len(seenA)-1].EventID)
	tb.until(20*time.Second, "the rest of the run on hub B", func() bool { return tb.terminal(res.RunID) })
	seen := append(append([]protocol.Envelope{}, seenA...), tb.run(res.RunID)...)
	checkDone(t, "tabs on A then B", seen, 200)
	sameEvents(t, "tabs vs. journal", seen, allEvents(t, b.URL(), res.RunID))
}

// A runner frozen (SIGSTOP) for longer than the lease TTL is, to everyone
// else, dead: its run is reaped as interrupted, exactly once. When it wakes
// up it must give the run up rather than execute it on: here the run waits
// for an approval that can no longer come, and the runner has room for one
// run only, so it serves the next run only if it let go of the first.
func TestScaleOut_FrozenRunnerLetsGo(t *testing.T) {
	ttl := time.Second
	s := newScaled(t, redistest.Options{}, ttl)
	a := s.hub("hubA")
	r1 := s.runner("r1", "RUNHUB_MAX_RUNS=1")
	first := startHTTP(t, a, `{"tokens":5,"token_ms":1,"tools":0,"approval":true}`)
	waitFor(t, 20*time.Second, "the approval prompt", func() bool {
		return runStatus(t, a, first.RunID).Status == protocol.StatusAwaitingApproval
	})
	if err := r1.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	events := waitTerminal(t, a, first.RunID, 5*ttl)
	checkInterrupted(t, "frozen runner's run", events)
	if err := r1.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	next := startHTTP(t, a, `{"tokens":10,"token_ms":1,"tools":0}`)
	checkDone(t, "next run on the thawed runner", waitTerminal(t, a, next.RunID, 20*time.Second), 10)
	sameEvents(t, "the reaped run after the thaw", allEvents(t, a.URL(), first.RunID), events)
}
