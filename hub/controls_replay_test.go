package hub_test

import (
	"slices"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// active_controls are exactly the valid ops at each point of a run: cancel
// while running; approve or clarify while one is pending; nothing for a
// cancelling run; start/queue/goal once the session is idle.
func testControlsLists(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	sid := newSession(t, th)
	if st := tr.Session(t, sid, "new session", func(protocol.SessionStatus) bool { return true }); !sameList(st.ActiveControls, idleControls) {
		t.Fatalf("new session lists %v", st.ActiveControls)
	}
	run := start(t, tr, sid, `"approval":true,"clarify":true,"tools":1,"tokens":3000,"token_ms":5`)
	check := func(what string, status protocol.Status, runCtl []string, cond func(protocol.SessionStatus) bool) {
		t.Helper()
		st := tr.Session(t, sid, what, func(s protocol.SessionStatus) bool {
			return s.RunID == run.RunID && s.Status == status && cond(s)
		})
		wantSession := append(slices.Clone(runCtl), protocol.OpQueue, protocol.OpGoal)
		if !sameList(st.ActiveControls, wantSession) {
			t.Fatalf("%s: session controls %v, want %v", what, st.ActiveControls, wantSession)
		}
		rs := getRunStatus(t, th, run.RunID)
		if rs.Status != status || !sameList(rs.ActiveControls, runCtl) {
			t.Fatalf("%s: run %s controls %v, want %s %v", what, rs.Status, rs.ActiveControls, status, runCtl)
		}
	}
	anyStatus := func(protocol.SessionStatus) bool { return true }
	check("awaiting approval", protocol.StatusAwaitingApproval, []string{protocol.OpCancel, protocol.OpApprove}, anyStatus)
	aid := getRunStatus(t, th, run.RunID).PendingApprovalID
	want(t, approve(t, tr, run.RunID, aid, "once"), protocol.ResultAccepted, "approve")
	check("awaiting clarify", protocol.StatusAwaitingClarify, []string{protocol.OpCancel, protocol.OpClarify}, anyStatus)
	cid := getRunStatus(t, th, run.RunID).PendingClarifyID
	want(t, answer(t, tr, run.RunID, cid, "short"), protocol.ResultAccepted, "clarify")
	check("running", protocol.StatusRunning, []string{protocol.OpCancel}, func(s protocol.SessionStatus) bool { return s.Tokens > 0 })

	want(t, cancelRun(t, tr, run.RunID), protocol.ResultAccepted, "cancel")
	evs := terminal(t, th, run.RunID)
	// The cancelling state lasts as long as the executor takes to stop, too
	// short to poll for: fold the journal up to it, as every status surface
	// does.
	for i, e := range evs {
		if e.Type != protocol.EventStatus || hubtest.Payload[protocol.StatusPayload](t, e).Status != protocol.StatusCancelling {
			continue
		}
		r, err := session.Fold(run.RunID, sid, evs[:i+1])
		if err != nil {
			t.Fatal(err)
		}
		if rs := r.RunStatus(); rs.Status != protocol.StatusCancelling || len(rs.ActiveControls) != 0 {
			t.Fatalf("cancelling run status %+v: want no controls", rs)
		}
		s := session.NewSession(sid, "")
		s.SetLatest(r)
		if got := s.Controls(); !sameList(got, []string{protocol.OpQueue, protocol.OpGoal}) {
			t.Fatalf("session of a cancelling run lists %v", got)
		}
	}
	st := tr.Session(t, sid, "idle", func(s protocol.SessionStatus) bool { return s.RunID == run.RunID && s.Terminal })
	if !sameList(st.ActiveControls, idleControls) {
		t.Fatalf("idle session lists %v", st.ActiveControls)
	}
	if rs := getRunStatus(t, th, run.RunID); len(rs.ActiveControls) != 0 {
		t.Fatalf("ended run lists %v", rs.ActiveControls)
	}
}

// --- replay after reconnect ----------------------------------------------

// historyTypes are the request/resolution events a tab renders controls
// from.
var historyTypes = []protocol.EventType{protocol.EventApprovalReq, protocol.EventApprovalRes,
	protocol.EventClarifyReq, protocol.EventClarifyRes, protocol.EventQueueUpdated, protocol.EventGoalUpdated}

func history(evs []protocol.Envelope) []string {
	var out []string
	for _, e := range evs {
		if slices.Contains(historyTypes, e.Type) {
			out = append(out, e.EventID+" "+string(e.Type)+" "+string(e.Payload))
		}
	}
	return out
}

// A fresh tab focusing the session sees the same request/resolution
// history (approval, clarify, queue, goal) as the tab that watched it live.
func testReplayHistory(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	sid := newSession(t, th)
	ctx := ctxT(t, 60*time.Second)
	live := th.Dial(t)
	if err := live.Focus(ctx, sid, ""); err != nil {
		t.Fatal(err)
	}
	liveCol := newCollector()
	liveCol.Until(t, live, 10*time.Second, "replayed of the empty session", func() bool { return len(liveCol.Replayed) == 1 })

	r1 := start(t, tr, sid, `"approval":true,"clarify":true,"tools":1,"tokens":20,"token_ms":10`)
	areq := hubtest.Payload[protocol.ApprovalRequestedPayload](t, waitEvent(t, th, r1.RunID, "approval", isType(protocol.EventApprovalReq)))
	want(t, approve(t, tr, r1.RunID, areq.ApprovalID, "once"), protocol.ResultAccepted, "approve")
	creq := hubtest.Payload[protocol.ClarifyRequestedPayload](t, waitEvent(t, th, r1.RunID, "clarify", isType(protocol.EventClarifyReq)))
	want(t, goal(t, tr, sid, protocol.GoalSet, "keep going"), protocol.ResultAccepted, "goal set")
	want(t, queue(t, tr, sid, "and then this", "", ""), protocol.ResultAccepted, "queue")
	want(t, answer(t, tr, r1.RunID, creq.ClarifyID, "short"), protocol.ResultAccepted, "clarify")
	terminal(t, th, r1.RunID)

	// The queued message runs next, inheriting the script: answer it too.
	r2 := nthRun(t, th, sid, 2)
	areq = hubtest.Payload[protocol.ApprovalRequestedPayload](t, waitEvent(t, th, r2, "approval", isType(protocol.EventApprovalReq)))
	want(t, approve(t, tr, r2, areq.ApprovalID, "deny"), protocol.ResultAccepted, "deny")
	creq = hubtest.Payload[protocol.ClarifyRequestedPayload](t, waitEvent(t, th, r2, "clarify", isType(protocol.EventClarifyReq)))
	want(t, goal(t, tr, sid, protocol.GoalPause, ""), protocol.ResultAccepted, "goal pause")
	want(t, answer(t, tr, r2, creq.ClarifyID, "detailed"), protocol.ResultAccepted, "clarify")
	terminal(t, th, r2)
	settled(t, th, sid, 2)

	liveCol.Until(t, live, 20*time.Second, "both runs live", func() bool { return liveCol.TerminalOf(r2) })
	checkRun(t, liveCol.Events, r1.RunID)
	checkRun(t, liveCol.Events, r2)
	liveHist := history(liveCol.Events)
	counts := map[protocol.EventType]int{}
	for _, e := range liveCol.Events {
		counts[e.Type]++
	}
	if counts[protocol.EventApprovalReq] != 2 || counts[protocol.EventApprovalRes] != 2 || counts[protocol.EventClarifyReq] != 2 ||
		counts[protocol.EventClarifyRes] != 2 || counts[protocol.EventQueueUpdated] != 2 || counts[protocol.EventGoalUpdated] != 2 {
		t.Fatalf("live history counts %v", counts)
	}

	fresh := th.Dial(t)
	if err := fresh.Focus(ctx, sid, protocol.EventID(r1.RunID, 0)); err != nil {
		t.Fatal(err)
	}
	freshCol := newCollector()
	freshCol.Until(t, fresh, 20*time.Second, "replay", func() bool { return len(freshCol.Replayed) == 1 })
	if len(freshCol.Errors) > 0 {
		t.Fatalf("replay errors %+v", freshCol.Errors)
	}
	if got := history(freshCol.Events); !slices.Equal(got, liveHist) {
		t.Fatalf("replayed history differs from the live one:\nlive   %q\nreplay %q", liveHist, got)
	}
	if len(freshCol.Events) != len(liveCol.Events) {
		t.Fatalf("replay has %d events, live had %d", len(freshCol.Events), len(liveCol.Events))
	}
	// The HTTP event pages tell the same story.
	var paged []protocol.Envelope
	for _, rid := range []string{r1.RunID, r2} {
		var page protocol.EventPage
		if code := do(t, "GET", th.URL+"/v1/runs/"+rid+"/events?limit=1000", "", nil, &page); code != 200 || !page.Terminal {
			t.Fatalf("events of %s: %d terminal %v", rid, code, page.Terminal)
		}
		paged = append(paged, page.Events...)
	}
	if got := history(paged); !slices.Equal(got, liveHist) {
		t.Fatalf("HTTP history differs from the live one:\nlive %q\nhttp %q", liveHist, got)
	}
	// And a fresh watcher sees the state the history ends in.
	if err := fresh.Watch(ctx, false, sid); err != nil {
		t.Fatal(err)
	}
	freshCol.Until(t, fresh, 10*time.Second, "status", func() bool { _, ok := freshCol.Statuses[sid]; return ok })
	if st := freshCol.Statuses[sid]; st.RunID != r2 || st.QueueDepth != 0 || st.Goal == nil || st.Goal.State != protocol.GoalPaused ||
		st.PendingApproval != nil || st.PendingClarify != nil {
		t.Fatalf("fresh status %+v goal %+v", st, st.Goal)
	}
}

// --- safe results --------------------------------------------------------

// Every refusal and bounded outcome carries a safe message, including when
// the journal has gone away underneath the hub.
func testSafeResults(t *testing.T, nt newTransport) {
	th := newTestHubRuntime(t, hub.Config{}, runtimeOpts{Adapter: executor.Options{MaxQueue: 1}, Faults: true})
	tr := nt(t, th)
	run := start(t, tr, "", `"tokens":3000,"token_ms":5,"tools":0`)
	sid := run.SessionID
	refusals := []struct {
		m    protocol.Control
		code protocol.Code
	}{
		{protocol.Control{Op: protocol.OpCancel, RunID: "r_missing"}, protocol.CodeNotFound},
		{protocol.Control{Op: protocol.OpApprove, RunID: "r_missing", ApprovalID: "a_1", Choice: "once"}, protocol.CodeNotFound},
		{protocol.Control{Op: protocol.OpClarify, RunID: "r_missing", ClarifyID: "c_1", Response: "x"}, protocol.CodeNotFound},
		{protocol.Control{Op: protocol.OpQueue, SessionID: "s_missing", Message: "x"}, protocol.CodeNotFound},
		{protocol.Control{Op: protocol.OpGoal, SessionID: "s_missing", Action: protocol.GoalStatus}, protocol.CodeNotFound},
		{protocol.Control{Op: protocol.OpGoal, SessionID: sid, Action: "explode"}, protocol.CodeBadRequest},
		{protocol.Control{Op: protocol.OpQueue, SessionID: sid, Message: "x", Mode: "shout"}, protocol.CodeBadRequest},
		{protocol.Control{Op: protocol.OpStart, SessionID: sid, Message: "x", Provider: "nope"}, protocol.CodeBadRequest},
	}
	for _, rf := range refusals {
		res, perr := tr.Control(t, rf.m, "")
		if perr == nil || perr.Code != rf.code || perr.Message == "" {
			t.Fatalf("%s %+v: %+v %+v, want %s", rf.m.Op, rf.m, res, perr, rf.code)
		}
	}
	want(t, start2(t, tr, sid), protocol.ResultConflict, "start while active")
	want(t, queue(t, tr, sid, "one", "", ""), protocol.ResultAccepted, "queue")
	want(t, queue(t, tr, sid, "two", "", ""), protocol.ResultConflict, "queue past its bound")
	want(t, approve(t, tr, run.RunID, "a_nope", "once"), protocol.ResultNotActive, "approve with no prompt")
	want(t, goal(t, tr, sid, protocol.GoalPause, ""), protocol.ResultNotActive, "pause without a goal")
	want(t, cancelRun(t, tr, run.RunID), protocol.ResultAccepted, "cancel")
	terminal(t, th, run.RunID)
	queued := nthRun(t, th, sid, 2)
	want(t, cancelRun(t, tr, queued), protocol.ResultAccepted, "cancel the queued run")
	terminal(t, th, queued)
	settled(t, th, sid, 2)
	want(t, cancelRun(t, tr, run.RunID), protocol.ResultNotActive, "cancel an ended run")
	want(t, queue(t, tr, sid, "steer", protocol.ModeSteer, ""), protocol.ResultNotActive, "steer without a run")

	every := []protocol.Control{
		{Op: protocol.OpStart, SessionID: sid, Message: "x"},
		{Op: protocol.OpCancel, RunID: run.RunID},
		{Op: protocol.OpApprove, RunID: run.RunID, ApprovalID: "a_1", Choice: "once"},
		{Op: protocol.OpClarify, RunID: run.RunID, ClarifyID: "c_1", Response: "x"},
		{Op: protocol.OpQueue, SessionID: sid, Message: "x"},
		{Op: protocol.OpQueue, SessionID: sid, Message: "x", Mode: protocol.ModeSteer},
		{Op: protocol.OpGoal, SessionID: sid, Action: protocol.GoalSet, Text: "x"},
	}
	// The journal fails with an internal error: every control is refused
	// as internal, and the error text never reaches the client (the
	// transports check each answer).
	th.Fault.Failing.Store(true)
	for _, m := range every {
		res, perr := tr.Control(t, m, "")
		if perr == nil || perr.Code != protocol.CodeInternal {
			t.Fatalf("%s with a failing journal: %+v %+v, want internal", m.Op, res, perr)
		}
	}
	th.Fault.Failing.Store(false)
	want(t, goal(t, tr, sid, protocol.GoalStatus, ""), protocol.ResultAccepted, "status once the journal recovers")

	// The journal goes away: every answer is still safe; none may be
	// accepted.
	th.Store.Close()
	for _, m := range every {
		res, perr := tr.Control(t, m, "")
		if perr == nil && res.Accepted {
			t.Fatalf("%s accepted with the journal closed: %+v", m.Op, res)
		}
		if perr != nil && (perr.Code == protocol.CodeNotFound || perr.Message == "") {
			t.Fatalf("%s with the journal closed: %s %q", m.Op, perr.Code, perr.Message)
		}
	}
}
