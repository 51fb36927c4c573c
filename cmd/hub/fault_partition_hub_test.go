//go:build fault

package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/protocol"
)

// A hub cut off from Redis (both ways) while a tab on it focuses a run
// that executes in a runner, with a second hub healthy.
//
// Shorter than the timeouts (300 ms, under the 1 s Redis read timeout):
// nothing shows but a pause; the tab stays and gets every event once, in
// order.
//
// Longer (past the lease TTL, 2 s here): the hub's /readyz is 503 `redis
// unreachable`, every API request that needs Redis answers 503 (never 500)
// and a control on the socket `error` `unavailable`; the tab is told to
// move (goaway "redis unreachable", close 1012) and, reconnecting to the
// healthy hub with its cursor, gets the rest of the run without gap or
// duplicate; the run never noticed (it completes in the runner). After the
// heal the hub is ready again and its statuses converge with the journal.
func TestFault_PartitionHubFromRedis(t *testing.T) {
	d := newPartDeploy(t)
	a, b := d.hub("hub-a"), d.hub("hub-b")
	d.runner("runner-1")
	var iv invariants
	ta := d.tab(a)
	res := ta.start(`{"tokens":1500,"token_ms":5}`)
	ta.c.Focus(ta.ctx(), res.SessionID, "")
	ta.until(20*time.Second, "20 tokens", func() bool { return count(ta.run(res.RunID), protocol.EventTokenDelta) >= 20 })

	// Short: a pause.
	before := lastSeq(ta, res.RunID)
	d.net.Cut(a.node, d.redis)
	time.Sleep(300 * time.Millisecond)
	d.net.Heal(a.node, d.redis)
	ta.until(20*time.Second, "events after the short cut", func() bool { return lastSeq(ta, res.RunID) > before+20 })
	if len(ta.goaway) != 0 || ta.closed != nil {
		t.Fatalf("a 300 ms cut moved the tab: %+v %v", ta.goaway, ta.closed)
	}
	noDupes(t, "the tab through the short cut", ta.run(res.RunID))

	// Long: past the lease TTL.
	d.net.Cut(a.node, d.redis)
	cut := time.Now()
	waitFor(t, 10*time.Second, "hub-a /readyz 503", func() bool { return readyz(a.hubProcess) == 503 })
	if code, body := httpBody(t, "GET", a.URL()+"/readyz", ""); code != 503 || !strings.Contains(string(body), "redis unreachable") {
		t.Fatalf("/readyz while cut off: %d %s", code, body)
	}
	reqs := []struct{ method, path, body string }{
		{"POST", "/v1/sessions", `{"title":"x"}`},
		{"GET", "/v1/runs/" + res.RunID, ""},
		{"GET", "/v1/runs/" + res.RunID + "/events?after_seq=0", ""},
		{"POST", "/v1/runs/" + res.RunID + "/cancel", ""},
		{"GET", "/v1/sessions/" + res.SessionID, ""},
	}
	answers := make(chan string, len(reqs))
	for _, req := range reqs {
		go func() {
			start := time.Now()
			code, body := httpBody(t, req.method, a.URL()+req.path, req.body)
			if code != 503 {
				answers <- fmt.Sprintf("%s %s: %d %s, want 503", req.method, req.path, code, body)
				return
			}
			answers <- fmt.Sprintf("ok %s %s 503 after %v", req.method, req.path, time.Since(start).Round(10*time.Millisecond))
		}()
	}
	// The tab is told to move, with the reason, while the requests wait.
	err := ta.drain(20 * time.Second)
	moved := time.Since(cut)
	if len(ta.goaway) != 1 || !strings.Contains(ta.goaway[0].Reason, "redis") {
		t.Fatalf("the tab of the cut-off hub got goaway %+v, closed with %v", ta.goaway, err)
	}
	if code, body := httpBody(t, "GET", a.URL()+"/v1/ws", ""); code != 503 {
		t.Fatalf("the tab socket's upgrade on the cut-off hub: %d %s, want 503", code, body)
	}
	for range reqs {
		if a := <-answers; !strings.HasPrefix(a, "ok ") {
			t.Fatalf("while hub-a is cut off from Redis: %s", a)
		} else {
			t.Log(a)
		}
		iv.answers++
	}
	t.Logf("answers done %v after the cut", time.Since(cut).Round(10*time.Millisecond))
	seen := ta.run(res.RunID)
	cursor := seen[len(seen)-1].EventID
	// It resumes on the healthy hub from its cursor.
	tb := d.tab(b)
	tb.c.Focus(tb.ctx(), res.SessionID, cursor)
	tb.until(60*time.Second, "the rest of the run on hub-b", func() bool { return tb.terminal(res.RunID) })
	iv.moved++
	whole := append(append([]protocol.Envelope(nil), seen...), tb.run(res.RunID)...)
	noDupes(t, "the tab across the move", whole)
	d.net.Heal(a.node, d.redis)
	healed := time.Now()
	waitFor(t, 30*time.Second, "hub-a ready", func() bool { return readyz(a.hubProcess) == 200 })
	t.Logf("hub-a ready %v after the heal", time.Since(healed).Round(10*time.Millisecond))

	events := iv.checkRun(t, b.hubProcess, res.RunID)
	checkDone(t, "the run", events, 1500)
	sameEvents(t, "the tab (both hubs) vs. the journal", whole, events)
	iv.checkAcked(t, "the tab", whole, events)
	// Converged: hub-a ready; a tab watching the session there gets the
	// journal's status.
	waitFor(t, 20*time.Second, "hub-a ready", func() bool { return readyz(a.hubProcess) == 200 })
	w := d.tab(a)
	w.c.Watch(w.ctx(), false, res.SessionID)
	last := events[len(events)-1].Seq
	converged := func() bool {
		s, ok := w.status[res.SessionID]
		return ok && s.Terminal && s.Status == protocol.StatusCompleted && s.LastSeq == last
	}
	// A watch the journal cannot answer yet (the first read after the
	// heal may still fail) is answered `error` `unavailable`, "watch them
	// again later": the tab does, as a client must.
	deadline, handled := time.Now().Add(20*time.Second), 0
	for !converged() {
		if time.Now().After(deadline) {
			t.Fatalf("hub-a's status of the session is %+v (errors %+v), the journal ends at seq %d", w.status[res.SessionID], w.errs, last)
		}
		for _, e := range w.errs[handled:] {
			if e.Code != protocol.CodeUnavailable || e.Ref != protocol.MsgWatch {
				t.Fatalf("the watch after the heal: %+v", e)
			}
			time.Sleep(200 * time.Millisecond)
			w.c.Watch(w.ctx(), false, res.SessionID)
		}
		handled = len(w.errs)
		w.pongWithin(time.Second)
		time.Sleep(50 * time.Millisecond)
	}
	iv.converged = time.Since(healed)
	normalRun(t, a.hubProcess)
	iv.runs++
	noPanic(t, a.hubProcess)
	no500(t, a, b)
	t.Logf("hub ⟂ Redis: tab moved %v after the cut; %s", moved.Round(10*time.Millisecond), iv)
}
