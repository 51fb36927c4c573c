package hub_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/protocol"
)

// approvalRun starts a run asking one approval and returns it with the
// request.
func approvalRun(t testing.TB, th *testHub, tr transport, script string) (protocol.ControlResult, protocol.ApprovalRequestedPayload) {
	t.Helper()
	run := start(t, tr, "", `"approval":true,`+script)
	e := waitEvent(t, th, run.RunID, "approval.requested", isType(protocol.EventApprovalReq))
	return run, hubtest.Payload[protocol.ApprovalRequestedPayload](t, e)
}

// An approval request shows as awaiting_approval with the pending approval
// in SessionStatus and RunStatus; approve resolves it once, the run resumes
// (tools run normally) and completes.
func testApprovalApprove(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	run, req := approvalRun(t, th, tr, `"tools":2,"tokens":5,"token_ms":1`)
	st := tr.Session(t, run.SessionID, "awaiting approval", func(s protocol.SessionStatus) bool {
		return s.RunID == run.RunID && s.Status == protocol.StatusAwaitingApproval
	})
	pa := st.PendingApproval
	if pa == nil || pa.ApprovalID != req.ApprovalID || pa.Summary != req.Summary || pa.Summary == "" ||
		!slices.Equal(pa.Choices, []string{"once", "session", "always", "deny"}) || st.PendingClarify != nil {
		t.Fatalf("pending approval %+v (clarify %+v), want %+v", pa, st.PendingClarify, req)
	}
	if rs := getRunStatus(t, th, run.RunID); rs.Status != protocol.StatusAwaitingApproval || rs.PendingApprovalID != req.ApprovalID {
		t.Fatalf("run status %+v", rs)
	}
	// A choice the prompt does not offer is refused; the prompt still waits.
	if _, perr := tr.Control(t, protocol.Control{Op: protocol.OpApprove, RunID: run.RunID, ApprovalID: req.ApprovalID, Choice: "sometimes"}, ""); perr == nil ||
		perr.Code != protocol.CodeBadRequest || !strings.Contains(perr.Message, "choice") {
		t.Fatalf("approve with a choice not offered: %+v, want bad_request on choice", perr)
	}
	res := approve(t, tr, run.RunID, req.ApprovalID, "once")
	want(t, res, protocol.ResultAccepted, "approve")
	if res.RunID != run.RunID {
		t.Fatalf("approve result %+v", res)
	}
	evs := terminal(t, th, run.RunID)
	resolved := ofType(evs, protocol.EventApprovalRes)
	if len(resolved) != 1 {
		t.Fatalf("%d approval.resolved events, want 1", len(resolved))
	}
	if p := hubtest.Payload[protocol.ApprovalResolvedPayload](t, resolved[0]); p.ApprovalID != req.ApprovalID || p.Choice != "once" || p.Status != "resolved" {
		t.Fatalf("approval.resolved %+v", p)
	}
	tools := ofType(evs, protocol.EventToolDone)
	if len(tools) != 2 || tools[0].Seq < resolved[0].Seq {
		t.Fatalf("%d tool.done events, want 2 after the approval", len(tools))
	}
	for _, e := range tools {
		if hubtest.Payload[protocol.ToolDonePayload](t, e).Error {
			t.Fatalf("an approved tool failed: %s", e.Payload)
		}
	}
	if last := evs[len(evs)-1]; last.Type != protocol.EventDone {
		t.Fatalf("run ended %s", last.Type)
	}
	st = tr.Session(t, run.SessionID, "completed", func(s protocol.SessionStatus) bool { return s.Status == protocol.StatusCompleted })
	if st.PendingApproval != nil {
		t.Fatalf("completed session still shows a pending approval %+v", st.PendingApproval)
	}
}

// deny: the tools end tool.done error:true and the run still completes.
func testApprovalDeny(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	run, req := approvalRun(t, th, tr, `"tools":2,"tokens":5,"token_ms":1`)
	want(t, approve(t, tr, run.RunID, req.ApprovalID, "deny"), protocol.ResultAccepted, "deny")
	evs := terminal(t, th, run.RunID)
	resolved := ofType(evs, protocol.EventApprovalRes)
	if len(resolved) != 1 || hubtest.Payload[protocol.ApprovalResolvedPayload](t, resolved[0]).Choice != "deny" {
		t.Fatalf("approval.resolved %v", resolved)
	}
	tools := ofType(evs, protocol.EventToolDone)
	if len(tools) != 2 {
		t.Fatalf("%d tool.done events, want 2", len(tools))
	}
	for _, e := range tools {
		if p := hubtest.Payload[protocol.ToolDonePayload](t, e); !p.Error {
			t.Fatalf("a denied tool succeeded: %+v", p)
		}
	}
	if last := evs[len(evs)-1]; last.Type != protocol.EventDone {
		t.Fatalf("denied run ended %s %s, want done", last.Type, last.Payload)
	}
	noErrors(t, evs)
	if rs := getRunStatus(t, th, run.RunID); rs.Status != protocol.StatusCompleted {
		t.Fatalf("denied run status %+v", rs)
	}
}

// Duplicate approvals, at once from ten clients and again later, resolve
// the prompt once: one accepted, the rest not-active, one resolution
// event; none of the responses blocks.
func testApprovalDuplicate(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	run, req := approvalRun(t, th, tr, `"tools":1,"tokens":50,"token_ms":10`)
	const n = 10
	trs := make([]transport, n)
	for i := range trs {
		trs[i] = nt(t, th)
	}
	results := make([]protocol.ControlResult, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range trs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			var perr *protocol.Error
			results[i], perr = trs[i].Control(t, protocol.Control{Op: protocol.OpApprove, RunID: run.RunID,
				ApprovalID: req.ApprovalID, Choice: "once"}, "")
			if perr != nil {
				t.Errorf("approve %d refused: %s", i, perr.Message)
			}
		}()
	}
	close(gate)
	wg.Wait()
	accepted := 0
	for _, r := range results {
		switch r.Status {
		case protocol.ResultAccepted:
			accepted++
		case protocol.ResultNotActive:
		default:
			t.Fatalf("duplicate approve: %+v", r)
		}
	}
	if accepted != 1 {
		t.Fatalf("%d approvals accepted, want 1", accepted)
	}
	waitEvent(t, th, run.RunID, "approval.resolved", isType(protocol.EventApprovalRes))
	want(t, approve(t, tr, run.RunID, req.ApprovalID, "deny"), protocol.ResultNotActive, "approve after the resolution")
	evs := terminal(t, th, run.RunID)
	if got := len(ofType(evs, protocol.EventApprovalRes)); got != 1 {
		t.Fatalf("%d approval.resolved events, want 1", got)
	}
	for _, e := range ofType(evs, protocol.EventToolDone) {
		if hubtest.Payload[protocol.ToolDonePayload](t, e).Error {
			t.Fatal("the late deny took effect")
		}
	}
	lastSeq := runMeta(t, th, run.RunID).LastSeq
	want(t, approve(t, tr, run.RunID, req.ApprovalID, "once"), protocol.ResultNotActive, "approve after the run ended")
	if got := runMeta(t, th, run.RunID).LastSeq; got != lastSeq {
		t.Fatalf("a response to an ended run journaled: last seq %d → %d", lastSeq, got)
	}
}

// Responses naming an unknown, wrong-kind or already resolved prompt are
// not-active and change nothing; an unknown run is not_found.
func testPromptUnknownIDs(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	run, req := approvalRun(t, th, tr, `"clarify":true,"tools":1,"tokens":5,"token_ms":1`)
	want(t, approve(t, tr, run.RunID, "a_nope", "once"), protocol.ResultNotActive, "unknown approval id")
	want(t, answer(t, tr, run.RunID, "c_nope", "short"), protocol.ResultNotActive, "clarify while none is pending")
	want(t, answer(t, tr, run.RunID, req.ApprovalID, "short"), protocol.ResultNotActive, "an approval id as a clarify id")
	for _, m := range []protocol.Control{
		{Op: protocol.OpApprove, RunID: "r_nope", ApprovalID: req.ApprovalID, Choice: "once"},
		{Op: protocol.OpClarify, RunID: "r_nope", ClarifyID: "c_nope", Response: "short"},
	} {
		if _, perr := tr.Control(t, m, ""); perr == nil || perr.Code != protocol.CodeNotFound {
			t.Fatalf("%s on an unknown run: %+v, want not_found", m.Op, perr)
		}
	}
	if rs := getRunStatus(t, th, run.RunID); rs.Status != protocol.StatusAwaitingApproval || rs.PendingApprovalID != req.ApprovalID {
		t.Fatalf("wrong responses changed the run: %+v", rs)
	}
	if got := len(ofType(journalEvents(t, th, run.RunID), protocol.EventApprovalRes)); got != 0 {
		t.Fatal("a wrong response resolved the approval")
	}
	want(t, approve(t, tr, run.RunID, req.ApprovalID, "once"), protocol.ResultAccepted, "approve")
	creq := hubtest.Payload[protocol.ClarifyRequestedPayload](t, waitEvent(t, th, run.RunID, "clarify.requested", isType(protocol.EventClarifyReq)))
	want(t, approve(t, tr, run.RunID, req.ApprovalID, "once"), protocol.ResultNotActive, "resolved approval id")
	want(t, approve(t, tr, run.RunID, creq.ClarifyID, "once"), protocol.ResultNotActive, "a clarify id as an approval id")
	want(t, answer(t, tr, run.RunID, "c_nope", "short"), protocol.ResultNotActive, "unknown clarify id")
	want(t, answer(t, tr, run.RunID, creq.ClarifyID, "short"), protocol.ResultAccepted, "clarify")
	evs := terminal(t, th, run.RunID)
	if a, c := len(ofType(evs, protocol.EventApprovalRes)), len(ofType(evs, protocol.EventClarifyRes)); a != 1 || c != 1 {
		t.Fatalf("%d approval and %d clarify resolutions, want 1 each", a, c)
	}
	if evs[len(evs)-1].Type != protocol.EventDone {
		t.Fatalf("run ended %s", evs[len(evs)-1].Type)
	}
}

// A clarify question shows as awaiting_clarify with the pending question;
// the answer resolves it once (a repeat is not-active) and the run
// completes.
func testClarifyAnswered(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	run := start(t, tr, "", `"clarify":true,"tools":0,"tokens":5,"token_ms":1`)
	req := hubtest.Payload[protocol.ClarifyRequestedPayload](t, waitEvent(t, th, run.RunID, "clarify.requested", isType(protocol.EventClarifyReq)))
	st := tr.Session(t, run.SessionID, "awaiting clarify", func(s protocol.SessionStatus) bool {
		return s.RunID == run.RunID && s.Status == protocol.StatusAwaitingClarify
	})
	pc := st.PendingClarify
	if pc == nil || pc.ClarifyID != req.ClarifyID || pc.Question != req.Question || pc.Question == "" ||
		!slices.Equal(pc.Choices, req.Choices) || st.PendingApproval != nil {
		t.Fatalf("pending clarify %+v, want %+v", pc, req)
	}
	if rs := getRunStatus(t, th, run.RunID); rs.Status != protocol.StatusAwaitingClarify || rs.PendingClarifyID != req.ClarifyID {
		t.Fatalf("run status %+v", rs)
	}
	want(t, answer(t, tr, run.RunID, req.ClarifyID, "short"), protocol.ResultAccepted, "clarify")
	want(t, answer(t, tr, run.RunID, req.ClarifyID, "detailed"), protocol.ResultNotActive, "second clarify")
	evs := terminal(t, th, run.RunID)
	resolved := ofType(evs, protocol.EventClarifyRes)
	if len(resolved) != 1 {
		t.Fatalf("%d clarify.resolved events, want 1", len(resolved))
	}
	if p := hubtest.Payload[protocol.ClarifyResolvedPayload](t, resolved[0]); p.ClarifyID != req.ClarifyID || p.Status != "resolved" || p.Response != "short" {
		t.Fatalf("clarify.resolved %+v", p)
	}
	if evs[len(evs)-1].Type != protocol.EventDone {
		t.Fatalf("run ended %s", evs[len(evs)-1].Type)
	}
}

// With a short timeout an unanswered clarify expires: exactly one
// clarify.resolved (expired), the run goes on and completes, and a late
// response is answered expired without an event.
func testClarifyExpiry(t *testing.T, nt newTransport) {
	th := newTestHubRuntime(t, hub.Config{}, runtimeOpts{ClarifyTimeout: 150 * time.Millisecond})
	tr := nt(t, th)
	run := start(t, tr, "", `"clarify":true,"tools":0,"tokens":80,"token_ms":20`)
	req := hubtest.Payload[protocol.ClarifyRequestedPayload](t, waitEvent(t, th, run.RunID, "clarify.requested", isType(protocol.EventClarifyReq)))
	res := waitEvent(t, th, run.RunID, "clarify expiry", isType(protocol.EventClarifyRes))
	if p := hubtest.Payload[protocol.ClarifyResolvedPayload](t, res); p.ClarifyID != req.ClarifyID || p.Status != "expired" {
		t.Fatalf("clarify.resolved %+v, want expired", p)
	}
	late := answer(t, tr, run.RunID, req.ClarifyID, "short")
	if rs := getRunStatus(t, th, run.RunID); rs.Terminal {
		t.Fatal("the run ended before the late response; make it longer")
	}
	want(t, late, protocol.ResultExpired, "late clarify")
	evs := terminal(t, th, run.RunID)
	resolved := ofType(evs, protocol.EventClarifyRes)
	if len(resolved) != 1 {
		t.Fatalf("%d clarify.resolved events, want 1", len(resolved))
	}
	if got := checkRun(t, evs, run.RunID); got != sim.Text(80) {
		t.Fatalf("the run did not go on after the expiry: text %q", got)
	}
	if evs[len(evs)-1].Type != protocol.EventDone {
		t.Fatalf("run ended %s", evs[len(evs)-1].Type)
	}
	lastSeq := runMeta(t, th, run.RunID).LastSeq
	after := answer(t, tr, run.RunID, req.ClarifyID, "short")
	if after.Status != protocol.ResultExpired && after.Status != protocol.ResultNotActive {
		t.Fatalf("response after the run ended: %+v", after)
	}
	if got := runMeta(t, th, run.RunID).LastSeq; got != lastSeq {
		t.Fatal("a late response journaled an event")
	}
}

// A clarify response racing its expiry is either accepted and recorded as
// resolved with the response, or answered expired and recorded expired:
// an accepted response is never lost.
func testClarifyRaceExpiry(t *testing.T, nt newTransport) {
	const timeout = 40 * time.Millisecond
	th := newTestHubRuntime(t, hub.Config{}, runtimeOpts{ClarifyTimeout: timeout})
	tr := nt(t, th)
	var sid string
	outcomes := map[string]int{}
	for i := 0; i < 12; i++ {
		run := start(t, tr, sid, `"clarify":true,"tools":0,"tokens":1,"token_ms":0`)
		sid = run.SessionID
		req := waitEvent(t, th, run.RunID, "clarify.requested", isType(protocol.EventClarifyReq))
		// Aim the response at the expiry: the prompt's timer started just
		// before clarify.requested was journaled.
		time.Sleep(time.Until(time.Unix(0, int64(req.CreatedAt*1e9)).Add(timeout - time.Duration(i%4)*time.Millisecond)))
		res := answer(t, tr, run.RunID, hubtest.Payload[protocol.ClarifyRequestedPayload](t, req).ClarifyID, "short")
		evs := terminal(t, th, run.RunID)
		resolved := ofType(evs, protocol.EventClarifyRes)
		if len(resolved) != 1 {
			t.Fatalf("%d clarify.resolved events, want 1", len(resolved))
		}
		p := hubtest.Payload[protocol.ClarifyResolvedPayload](t, resolved[0])
		outcomes[res.Status+"/"+p.Status]++
		switch {
		case res.Status == protocol.ResultAccepted && (p.Status != "resolved" || p.Response != "short"):
			t.Fatalf("an accepted response was recorded as %+v", p)
		case res.Status == protocol.ResultExpired && p.Status != "expired":
			t.Fatalf("a response answered expired, but the prompt was recorded %+v", p)
		case res.Status != protocol.ResultAccepted && res.Status != protocol.ResultExpired && res.Status != protocol.ResultNotActive:
			t.Fatalf("response racing the expiry: %+v", res)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

// --- 3c: queue and steer -------------------------------------------------
