package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub/auth"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// The contract's Execution-Survives-WebUI-Restart gate, automated:
//
//  1. start a long-running run from a tab on hub A;
//  2. restart only the hub (SIGKILL A);
//  3. the run keeps executing outside it (in the runner);
//  4. reload: a tab on hub B rediscovers the active run;
//  5. it catches up from its cursor;
//  6. with no duplicate and no gap across both hubs' deliveries;
//  7. cancel through B works: exactly one terminal, cancelled, partial.
func TestScaleOut_ExecutionSurvivesHubRestart(t *testing.T) {
	s := newScaled(t, redistest.Options{}, 2*time.Second)
	a, b := s.hub("hubA"), s.hub("hubB")
	s.runner("r1")

	// 1.
	ta := dialTab(t, a)
	res := ta.start(`{"tokens":100000,"token_ms":5,"tools":0}`)
	runID, sid := res.RunID, res.SessionID
	ta.c.Focus(ta.ctx(), sid, "")
	ta.until(20*time.Second, "20 tokens through hub A", func() bool { return count(ta.run(runID), protocol.EventTokenDelta) >= 20 })

	// 2.
	a.kill()
	ta.drain(10 * time.Second)
	seenA := ta.run(runID)
	contiguous(t, "tab on hub A", seenA, 1)
	cursor, lastA := seenA[len(seenA)-1].EventID, seenA[len(seenA)-1].Seq

	// 3. The journal grows with no tab connected and hub A gone.
	waitFor(t, 20*time.Second, "the run to go on after hub A died", func() bool {
		return runStatus(t, b, runID).LastSeq >= lastA+20
	})
	if st := runStatus(t, b, runID); st.Terminal || st.Status != protocol.StatusRunning {
		t.Fatalf("after hub A died the run is %+v, want running", st)
	}

	// 4. Reload: the tab comes back on hub B and finds the run active.
	tb := dialTab(t, b)
	tb.c.Watch(tb.ctx(), true)
	tb.until(10*time.Second, "the active run's status on hub B", func() bool {
		ss, ok := tb.status[sid]
		return ok && ss.RunID == runID && ss.Status == protocol.StatusRunning && !ss.Terminal
	})

	// 5. and 6.
	tb.c.Focus(tb.ctx(), sid, cursor)
	tb.until(20*time.Second, "catch-up and live tokens on hub B", func() bool {
		ev := tb.run(runID)
		return len(tb.replayed) > 0 && len(ev) > 0 && ev[len(ev)-1].Seq >= lastA+60
	})
	seenB := tb.run(runID)
	if len(tb.errs) > 0 {
		t.Fatalf("focus with cursor %s: %+v", cursor, tb.errs)
	}
	contiguous(t, "tab on hub B", seenB, lastA+1)
	if r := tb.replayed[0]; r.SessionID != sid || r.Count < 1 {
		t.Fatalf("replayed %+v", r)
	}

	// 7.
	cr, err := tb.c.Control(tb.ctx(), protocol.Control{Op: protocol.OpCancel, RunID: runID})
	if err != nil || cr.Status != protocol.ResultAccepted {
		t.Fatalf("cancel through hub B: %+v %v", cr, err)
	}
	tb.until(20*time.Second, "the terminal event on hub B", func() bool { return tb.terminal(runID) })
	seen := append(append([]protocol.Envelope{}, seenA...), tb.run(runID)...)
	contiguous(t, "tabs on A then B", seen, 1)
	last := seen[len(seen)-1]
	cp, _ := protocol.DecodePayload[protocol.CancelledPayload](&last)
	if terminals(seen) != 1 || last.Type != protocol.EventCancelled || !cp.Partial {
		t.Fatalf("%d terminal events, last %s %s", terminals(seen), last.Type, last.Payload)
	}
	if got, n := tokenText(seen), count(seen, protocol.EventTokenDelta); got != sim.Text(n) {
		t.Fatalf("the transcript across both hubs is not the run's text: %q", got)
	}
	sameEvents(t, "what the tabs got vs. the journal", seen, allEvents(t, b.URL(), runID))
	var ss protocol.SessionStatus
	call(t, "GET", b.URL()+"/v1/sessions/"+sid, nil, &ss)
	if ss.Status != protocol.StatusCancelled || !ss.Terminal {
		t.Fatalf("session status after cancel: %+v", ss)
	}
	again, err := tb.c.Control(tb.ctx(), protocol.Control{Op: protocol.OpCancel, RunID: runID})
	if err != nil || again.Status != protocol.ResultNotActive {
		t.Fatalf("second cancel: %+v %v", again, err)
	}
}

// A tab on replica B watching all sessions gets the status of a run started
// through replica A at once and, focused, its tokens live; with two runners
// sharing the work, every run executes exactly once and both take runs.
func TestScaleOut_CrossReplicaStatusAndFocus(t *testing.T) {
	s := newScaled(t, redistest.Options{}, 2*time.Second)
	a, b := s.hub("hubA"), s.hub("hubB")
	// At most 4 runs each: 8 runs at once must use both runners.
	s.runner("r1", "RUNHUB_MAX_RUNS=4")
	s.runner("r2", "RUNHUB_MAX_RUNS=4")

	tb := dialTab(t, b)
	tb.c.Watch(tb.ctx(), true)
	tb.ping()
	ta := dialTab(t, a)
	res := ta.start(`{"tokens":200,"token_ms":10,"tools":0}`)
	tb.until(10*time.Second, "hub B's status of the run started on hub A", func() bool {
		ss, ok := tb.status[res.SessionID]
		return ok && ss.RunID == res.RunID
	})
	if ss := tb.status[res.SessionID]; ss.Terminal {
		t.Fatalf("the first status on hub B came after the run ended: %+v", ss)
	}
	tb.c.Focus(tb.ctx(), res.SessionID, "")
	tb.until(20*time.Second, "the run's events on hub B", func() bool { return tb.terminal(res.RunID) })
	got := tb.run(res.RunID)
	checkDone(t, "tab on hub B", got, 200)
	if len(tb.replayed) != 1 || tb.replayed[0].Count >= len(got) {
		t.Fatalf("replayed %+v of %d events: nothing came live", tb.replayed, len(got))
	}
	if ss := tb.status[res.SessionID]; !ss.Terminal {
		// statuses are coalesced; the final one follows the terminal event
		tb.until(10*time.Second, "the final status on hub B", func() bool { return tb.status[res.SessionID].Terminal })
	}

	// N runs through both hubs, two runners.
	const n = 8
	runs := make([]protocol.RunStartResult, n)
	for i := range runs {
		p := a
		if i%2 == 1 {
			p = b
		}
		runs[i] = startHTTP(t, p, `{"tokens":50,"token_ms":20,"tools":0}`)
	}
	owners := map[string]string{}
	used := map[string]int{}
	waitFor(t, 30*time.Second, "every run to have had an owner", func() bool {
		for _, r := range runs {
			if owners[r.RunID] == "" {
				if o := s.owner(r.RunID); o != "" {
					owners[r.RunID] = o
					used[o]++
				}
			}
		}
		return len(owners) == n
	})
	for i, r := range runs {
		p := a
		if i%2 == 0 {
			p = b // read through the other replica
		}
		checkDone(t, "run "+r.RunID, waitTerminal(t, p, r.RunID, 30*time.Second), 50)
	}
	if used["r1"] == 0 || used["r2"] == 0 {
		t.Fatalf("runs per runner %v: want both runners used", used)
	}
	tb.until(10*time.Second, "hub B's final status of every run", func() bool {
		for _, r := range runs {
			if ss := tb.status[r.SessionID]; ss.RunID != r.RunID || ss.Status != protocol.StatusCompleted {
				return false
			}
		}
		return true
	})
	t.Logf("runs per runner: %v", used)
}

// What changes a session without an event reaches a tab on the other
// replica at once: a session created through hub A, a run started through
// A that no runner has taken yet (queued, no event journaled), a message
// queued behind it and a goal set on an idle session. Then a runner comes
// and the run completes, also seen on B.
func TestScaleOut_ChangesWithoutEventsReachOtherReplicas(t *testing.T) {
	s := newScaled(t, redistest.Options{}, 2*time.Second)
	a, b := s.hub("hubA"), s.hub("hubB") // no runner yet: runs stay queued
	tb := dialTab(t, b)
	tb.c.Watch(tb.ctx(), true)
	tb.ping()

	var sess protocol.CreateSessionResult
	if code := call(t, "POST", a.URL()+"/v1/sessions", map[string]string{"title": "made on A"}, &sess); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	tb.until(10*time.Second, "hub B's status of the session created on hub A", func() bool {
		ss, ok := tb.status[sess.SessionID]
		return ok && ss.Title == "made on A"
	})

	var run protocol.RunStartResult
	body := map[string]any{"message": "wait for a runner", "metadata": map[string]any{"sim": jsonRaw(`{"tokens":20,"token_ms":5,"tools":0}`)}}
	if code := call(t, "POST", a.URL()+"/v1/sessions/"+sess.SessionID+"/runs", body, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	tb.until(10*time.Second, "hub B's status of the queued run", func() bool {
		ss := tb.status[sess.SessionID]
		return ss.RunID == run.RunID && ss.Status == protocol.StatusQueued
	})
	if s.runKey(run.RunID, "") == "" {
		t.Fatalf("the queued run %s has no meta in Redis", run.RunID)
	}
	if k := s.runKey(run.RunID, ":ev"); k != "" {
		n, _ := s.rdb.XLen(context.Background(), k).Result()
		t.Fatalf("the queued run has %d journaled events, want none (the status must not have come from an event)", n)
	}

	var qres protocol.ControlResult
	if code := call(t, "POST", a.URL()+"/v1/sessions/"+sess.SessionID+"/queue", map[string]string{"message": "then this"}, &qres); code != 200 || !qres.Accepted {
		t.Fatalf("queue: %d %+v", code, qres)
	}
	tb.until(10*time.Second, "hub B's queue depth", func() bool { return tb.status[sess.SessionID].QueueDepth == 1 })

	var idle protocol.CreateSessionResult
	if code := call(t, "POST", a.URL()+"/v1/sessions", map[string]string{"title": "idle"}, &idle); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	var gres protocol.ControlResult
	if code := call(t, "POST", a.URL()+"/v1/sessions/"+idle.SessionID+"/goal",
		map[string]string{"action": "set", "text": "ship the release"}, &gres); code != 200 || !gres.Accepted {
		t.Fatalf("goal: %d %+v", code, gres)
	}
	tb.until(10*time.Second, "hub B's status of the goal set on hub A", func() bool {
		g := tb.status[idle.SessionID].Goal
		return g != nil && g.Text == "ship the release"
	})

	s.runner("r1")
	tb.until(30*time.Second, "hub B's status of the queued message's run completed", func() bool {
		ss := tb.status[sess.SessionID]
		return ss.RunID != "" && ss.RunID != run.RunID && ss.Status == protocol.StatusCompleted && ss.QueueDepth == 0
	})
	checkDone(t, "the first run", waitTerminal(t, b, run.RunID, 10*time.Second), 20)
	// Runs of queued messages executed by a runner begin run.started,
	// queue.updated (the queue left), as in-process ones do: the one the
	// runner started after the first run, and one a message on an idle
	// session started through hub A (dispatched to the runner).
	var fresh protocol.CreateSessionResult
	if code := call(t, "POST", a.URL()+"/v1/sessions", map[string]string{"title": "fresh"}, &fresh); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	var started protocol.ControlResult
	if code := call(t, "POST", a.URL()+"/v1/sessions/"+fresh.SessionID+"/queue", map[string]string{"message": "go at once"}, &started); code != 200 || started.RunID == "" {
		t.Fatalf("queue on an idle session: %d %+v", code, started)
	}
	for _, rid := range []string{tb.status[sess.SessionID].RunID, started.RunID} {
		evs := waitTerminal(t, b, rid, 20*time.Second)
		if len(evs) < 2 || evs[0].Type != protocol.EventRunStarted || evs[1].Type != protocol.EventQueueUpdated {
			var types []protocol.EventType
			for _, e := range evs[:min(len(evs), 2)] {
				types = append(types, e.Type)
			}
			t.Fatalf("run %s of a queued message begins %v, want run.started, queue.updated", rid, types)
		}
		var q protocol.QueueUpdatedPayload
		if err := json.Unmarshal(evs[1].Payload, &q); err != nil || q.Depth != 0 {
			t.Fatalf("queue.updated %s: %v", evs[1].Payload, err)
		}
	}
}

// RUNHUB_MAX_SOCKETS_PER_SUBJECT bounds a subject's sockets over every hub
// sharing the Redis, not per hub: with a limit of 2, alice's third socket
// is refused on either hub (limit_exceeded), bob is counted apart, and a
// socket alice closes on one hub frees a place on the other.
func TestScaleOut_SocketLimitAcrossHubs(t *testing.T) {
	secret := strings.Repeat("s", 32)
	s := newScaled(t, redistest.Options{}, 2*time.Second)
	env := []string{"RUNHUB_JWT_SECRET=" + secret, "RUNHUB_MAX_SOCKETS_PER_SUBJECT=2"}
	a, b := s.hub("hubA", env...), s.hub("hubB", env...)
	token := func(sub string) string {
		tok, err := auth.Sign([]byte(secret), auth.Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: sub,
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	dial := func(p *hubProcess, sub string) (*client.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := client.Dial(ctx, "ws://"+p.addr+"/v1/ws", client.Options{Token: token(sub)})
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		return c, err
	}
	first, err := dial(a, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dial(b, "alice"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*hubProcess{a, b} {
		if _, err := dial(p, "alice"); err == nil || !strings.Contains(err.Error(), string(protocol.CodeLimitExceeded)) {
			t.Fatalf("alice's third socket on %s: %v, want limit_exceeded", p.addr, err)
		}
	}
	if _, err := dial(b, "bob"); err != nil {
		t.Fatalf("bob: %v", err)
	}
	first.Close()
	waitFor(t, 10*time.Second, "alice's closed socket to free a place on hub B", func() bool {
		c, err := dial(b, "alice")
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}
