package hub_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// checkCancelledEverywhere asserts every status surface classifies the run
// cancelled: the run and session endpoints, the transport's own view, and a
// fresh fold of the journal.
func checkCancelledEverywhere(t testing.TB, th *testHub, tr transport, sid, runID string) {
	t.Helper()
	last := runMeta(t, th, runID)
	rs := getRunStatus(t, th, runID)
	if rs.Status != protocol.StatusCancelled || !rs.Terminal || rs.TerminalState != protocol.StatusCancelled ||
		len(rs.ActiveControls) != 0 || rs.LastEventID != protocol.EventID(runID, last.LastSeq) {
		t.Fatalf("GET run after cancel: %+v (last seq %d)", rs, last.LastSeq)
	}
	ss := getSessionStatus(t, th, sid)
	if ss.RunID != runID || ss.Status != protocol.StatusCancelled || !ss.Terminal || ss.TerminalState != protocol.StatusCancelled ||
		!sameList(ss.ActiveControls, idleControls) {
		t.Fatalf("GET session after cancel: %+v", ss)
	}
	tr.Session(t, sid, "status cancelled", func(s protocol.SessionStatus) bool {
		return s.RunID == runID && s.Status == protocol.StatusCancelled && s.Terminal && s.LastSeq == last.LastSeq
	})
	st, _, err := journal.FoldSession(context.Background(), th.Store, sid)
	if err != nil {
		t.Fatal(err)
	}
	if st.Latest == nil || st.Latest.RunID != runID || st.Latest.TerminalState != protocol.StatusCancelled {
		t.Fatalf("journal fold after cancel: %+v", st.Latest)
	}
}

// --- 3a: cancel ----------------------------------------------------------

// A cancel moves the run to cancelling (a status event, the one the
// accepted result names) and then to exactly one terminal cancelled event,
// partial because output streamed; every status surface says cancelled.
func testCancelOneTerminal(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	run := start(t, tr, "", `"tokens":5000,"token_ms":5,"tools":0`)
	waitEvent(t, th, run.RunID, "a few tokens", func(e *protocol.Envelope) bool { return e.Type == protocol.EventTokenDelta && e.Seq >= 6 })

	res := cancelRun(t, tr, run.RunID)
	want(t, res, protocol.ResultAccepted, "cancel")
	if res.RunID != run.RunID || res.SessionID != run.SessionID || res.EventID == "" {
		t.Fatalf("cancel result %+v", res)
	}
	evs := terminal(t, th, run.RunID)
	text := checkRun(t, evs, run.RunID)
	if text == "" || !strings.HasPrefix(sim.Text(5000), text) {
		t.Fatalf("partial text %q is not a prefix of the answer", text)
	}
	cancelling := -1
	for i, e := range evs {
		if e.Type == protocol.EventStatus && hubtest.Payload[protocol.StatusPayload](t, e).Status == protocol.StatusCancelling {
			if cancelling >= 0 {
				t.Fatalf("two cancelling status events: %d and %d", evs[cancelling].Seq, e.Seq)
			}
			cancelling = i
		}
	}
	if cancelling < 0 || evs[cancelling].EventID != res.EventID {
		t.Fatalf("no cancelling status event named by the result (event %s)", res.EventID)
	}
	if c := hubtest.Payload[protocol.StatusPayload](t, evs[cancelling]).Controls; len(c) != 0 {
		t.Fatalf("a cancelling run lists controls %v", c)
	}
	last := evs[len(evs)-1] // after the cancelling status: checkRun put the terminal last
	if last.Type != protocol.EventCancelled {
		t.Fatalf("terminal event %s %s, want cancelled", last.Type, last.Payload)
	}
	if p := hubtest.Payload[protocol.CancelledPayload](t, last); !p.Partial || p.Reason == "" {
		t.Fatalf("cancelled payload %+v, want partial with a reason", p)
	}
	noErrors(t, evs)
	checkCancelledEverywhere(t, th, tr, run.SessionID, run.RunID)
}

// Twenty clients cancel one run at once: exactly one is accepted, the rest
// are not-active, and the run has one cancelling status and one terminal.
func testCancelConcurrent(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	run := start(t, nt(t, th), "", `"tokens":5000,"token_ms":5,"tools":0`)
	waitEvent(t, th, run.RunID, "a token", isType(protocol.EventTokenDelta))
	const n = 20
	trs := make([]transport, n)
	for i := range trs {
		trs[i] = nt(t, th)
	}
	results := make([]protocol.ControlResult, n)
	perrs := make([]*protocol.Error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range trs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			results[i], perrs[i] = trs[i].Control(t, protocol.Control{Op: protocol.OpCancel, RunID: run.RunID}, "")
		}()
	}
	close(gate)
	wg.Wait()
	accepted := 0
	for i, res := range results {
		if perrs[i] != nil {
			t.Fatalf("cancel %d refused: %s %s", i, perrs[i].Code, perrs[i].Message)
		}
		switch res.Status {
		case protocol.ResultAccepted:
			accepted++
		case protocol.ResultNotActive:
			if res.EventID != "" {
				t.Fatalf("a not-active cancel names event %s", res.EventID)
			}
		default:
			t.Fatalf("cancel %d: %+v", i, res)
		}
	}
	if accepted != 1 {
		t.Fatalf("%d cancels accepted, want exactly 1", accepted)
	}
	evs := terminal(t, th, run.RunID)
	cancelling := 0
	for _, e := range ofType(evs, protocol.EventStatus) {
		if hubtest.Payload[protocol.StatusPayload](t, e).Status == protocol.StatusCancelling {
			cancelling++
		}
	}
	if cancelling != 1 || evs[len(evs)-1].Type != protocol.EventCancelled {
		t.Fatalf("%d cancelling status events, terminal %s", cancelling, evs[len(evs)-1].Type)
	}
}

// Cancelling a run that has ended (cancelled or completed) is not-active
// and journals nothing.
func testCancelRepeat(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	run := start(t, tr, "", `"tokens":5000,"token_ms":5,"tools":0`)
	waitEvent(t, th, run.RunID, "a token", isType(protocol.EventTokenDelta))
	want(t, cancelRun(t, tr, run.RunID), protocol.ResultAccepted, "first cancel")
	terminal(t, th, run.RunID)

	done := start(t, tr, "", `"tokens":3,"token_ms":0,"tools":0`)
	terminal(t, th, done.RunID)

	for _, r := range []protocol.ControlResult{run, done} {
		before := runMeta(t, th, r.RunID)
		for i := 0; i < 3; i++ {
			res := cancelRun(t, tr, r.RunID)
			want(t, res, protocol.ResultNotActive, "repeated cancel")
			if res.EventID != "" {
				t.Fatalf("a not-active cancel names event %s", res.EventID)
			}
		}
		if tr.Name() == "ws" { // the socket may name the session instead of the run
			res := ctl(t, tr, protocol.Control{Op: protocol.OpCancel, SessionID: r.SessionID}, "")
			want(t, res, protocol.ResultNotActive, "cancel by session of an ended run")
		}
		after := runMeta(t, th, r.RunID)
		if after.LastSeq != before.LastSeq || after.TerminalType != before.TerminalType {
			t.Fatalf("repeated cancel changed the run: last seq %d → %d, terminal %s → %s",
				before.LastSeq, after.LastSeq, before.TerminalType, after.TerminalType)
		}
		if n := len(journalEvents(t, th, r.RunID)); uint64(n) != before.LastSeq {
			t.Fatalf("journal has %d events, last seq %d", n, before.LastSeq)
		}
	}
	if got := runMeta(t, th, done.RunID).TerminalType; got != protocol.EventDone {
		t.Fatalf("completed run now ends with %s", got)
	}
	checkCancelledEverywhere(t, th, tr, run.SessionID, run.RunID)
}

// A cancel during a tool call ends the run at once (the tool's pause is
// 30 s and never completes), partial, with no error.
func testCancelDuringTool(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	run := start(t, tr, "", `"tokens":5,"token_ms":30000,"tools":1`)
	waitEvent(t, th, run.RunID, "the tool running", isType(protocol.EventToolUpdated))
	want(t, cancelRun(t, tr, run.RunID), protocol.ResultAccepted, "cancel during a tool")
	evs := terminal(t, th, run.RunID)
	if len(ofType(evs, protocol.EventToolDone)) != 0 {
		t.Fatal("the tool finished: the cancel did not interrupt it")
	}
	last := evs[len(evs)-1]
	if last.Type != protocol.EventCancelled || !hubtest.Payload[protocol.CancelledPayload](t, last).Partial {
		t.Fatalf("terminal %s %s, want cancelled partial", last.Type, last.Payload)
	}
	noErrors(t, evs)
	checkCancelledEverywhere(t, th, tr, run.SessionID, run.RunID)
}

// A cancel during reasoning ends the run at once, partial, with no error.
func testCancelDuringReasoning(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	run := start(t, tr, "", `"reasoning":5,"tokens":5,"token_ms":30000,"tools":0`)
	waitEvent(t, th, run.RunID, "reasoning", isType(protocol.EventReasoningDelta))
	want(t, cancelRun(t, tr, run.RunID), protocol.ResultAccepted, "cancel during reasoning")
	evs := terminal(t, th, run.RunID)
	if len(ofType(evs, protocol.EventReasoningDone)) != 0 || len(ofType(evs, protocol.EventTokenDelta)) != 0 {
		t.Fatal("reasoning finished: the cancel did not interrupt it")
	}
	last := evs[len(evs)-1]
	if last.Type != protocol.EventCancelled || !hubtest.Payload[protocol.CancelledPayload](t, last).Partial {
		t.Fatalf("terminal %s %s, want cancelled partial", last.Type, last.Payload)
	}
	noErrors(t, evs)
	checkCancelledEverywhere(t, th, tr, run.SessionID, run.RunID)
}

// A run that was begun but has no executor (queued, not started) is ended
// by a cancel: one terminal cancelled, not partial; the session is free for
// the next run.
func testCancelNotStarted(t *testing.T, nt newTransport) {
	for _, withStarted := range []bool{false, true} {
		t.Run(fmt.Sprintf("run.started=%v", withStarted), func(t *testing.T) {
			th := newTestHub(t, hub.Config{})
			tr := nt(t, th)
			sid := newSession(t, th)
			ctx := ctxT(t, 10*time.Second)
			rid := adapter.NewID("r_")
			if err := th.Store.BeginRun(ctx, journal.RunMeta{ID: rid, SessionID: sid, Owner: "local",
				CreatedAt: protocol.Timestamp(time.Now())}); err != nil {
				t.Fatal(err)
			}
			if withStarted {
				e, err := protocol.NewEvent(rid, sid, protocol.EventRunStarted, protocol.RunStartedPayload{
					Message: "waiting", Toolsets: []string{}, Provider: "sim", Source: "user"})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := th.Store.Append(ctx, e, ""); err != nil {
					t.Fatal(err)
				}
			}
			if rs := getRunStatus(t, th, rid); rs.Terminal || !slices.Equal(rs.ActiveControls, []string{protocol.OpCancel}) {
				t.Fatalf("queued run before the cancel: %+v", rs)
			}
			res := cancelRun(t, tr, rid)
			want(t, res, protocol.ResultAccepted, "cancel of a queued run")
			evs := terminal(t, th, rid)
			last := evs[len(evs)-1]
			if res.EventID != last.EventID || last.Type != protocol.EventCancelled || hubtest.Payload[protocol.CancelledPayload](t, last).Partial {
				t.Fatalf("result %+v, terminal %s %s: want the result to name a cancelled, not partial", res, last.EventID, last.Payload)
			}
			want(t, cancelRun(t, tr, rid), protocol.ResultNotActive, "second cancel of the queued run")
			if n := len(journalEvents(t, th, rid)); n != len(evs) {
				t.Fatalf("second cancel journaled: %d events, was %d", n, len(evs))
			}
			checkCancelledEverywhere(t, th, tr, sid, rid)
			next := start(t, tr, sid, `"tokens":2,"token_ms":0,"tools":0`)
			if evs := terminal(t, th, next.RunID); evs[len(evs)-1].Type != protocol.EventDone {
				t.Fatalf("the next run ended %s", evs[len(evs)-1].Type)
			}
		})
	}
}

// A cancel while a prompt waits ends the run (not partial: nothing
// streamed) without resolving the prompt; a response after it is
// not-active and the prompt no longer shows.
func testCancelDuringPrompt(t *testing.T, nt newTransport) {
	for _, kind := range []string{"approval", "clarify"} {
		t.Run(kind, func(t *testing.T) {
			th := newTestHub(t, hub.Config{})
			tr := nt(t, th)
			run := start(t, tr, "", `"`+kind+`":true,"tools":0,"tokens":5,"token_ms":1`)
			reqType, resType := protocol.EventApprovalReq, protocol.EventApprovalRes
			if kind == "clarify" {
				reqType, resType = protocol.EventClarifyReq, protocol.EventClarifyRes
			}
			req := waitEvent(t, th, run.RunID, string(reqType), isType(reqType))
			want(t, cancelRun(t, tr, run.RunID), protocol.ResultAccepted, "cancel while a prompt waits")
			evs := terminal(t, th, run.RunID)
			last := evs[len(evs)-1]
			if last.Type != protocol.EventCancelled || hubtest.Payload[protocol.CancelledPayload](t, last).Partial {
				t.Fatalf("terminal %s %s, want cancelled, not partial", last.Type, last.Payload)
			}
			var res protocol.ControlResult
			if kind == "approval" {
				res = approve(t, tr, run.RunID, hubtest.Payload[protocol.ApprovalRequestedPayload](t, req).ApprovalID, "once")
			} else {
				res = answer(t, tr, run.RunID, hubtest.Payload[protocol.ClarifyRequestedPayload](t, req).ClarifyID, "short")
			}
			want(t, res, protocol.ResultNotActive, "response after the cancel")
			if n := len(ofType(journalEvents(t, th, run.RunID), resType)); n != 0 {
				t.Fatalf("%d %s events after a cancel", n, resType)
			}
			noErrors(t, evs)
			checkCancelledEverywhere(t, th, tr, run.SessionID, run.RunID)
			if ss := getSessionStatus(t, th, run.SessionID); ss.PendingApproval != nil || ss.PendingClarify != nil {
				t.Fatalf("a cancelled run still shows a prompt: %+v %+v", ss.PendingApproval, ss.PendingClarify)
			}
		})
	}
}

// --- 3b: approval and clarify --------------------------------------------
