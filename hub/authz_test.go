package hub_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/protocol"
)

// Every HTTP path answers another subject's session or run exactly as it
// answers one that does not exist (404 not_found, same body), and nothing
// the other subject sends changes the run.
func TestAuthz_HTTPTwoSubjects(t *testing.T) {
	th := newTestHub(t, withAuth(t, hub.Config{}))
	alice := th.DialToken(t, token(t, "alice", time.Hour, ""))
	run := hubtest.StartAliceRun(t, th, alice)
	bob := bearerOf(token(t, "bob", time.Hour, ""))
	sse := map[string]string{"Accept": "text/event-stream"}
	for k, v := range bob {
		sse[k] = v
	}
	const ghostS, ghostR = "s_0000000000000000000000000000dead", "r_0000000000000000000000000000dead"
	for _, tc := range []struct {
		method, path, body string
		hdr                map[string]string
	}{
		{"GET", "/v1/sessions/{sid}", "", bob},
		{"GET", "/v1/sessions/{sid}/runs", "", bob},
		{"PATCH", "/v1/sessions/{sid}", `{"title":"hijack"}`, bob},
		{"DELETE", "/v1/sessions/{sid}", "", bob},
		{"POST", "/v1/sessions/{sid}/runs", `{"message":"hijack"}`, bob},
		{"POST", "/v1/sessions/{sid}/queue", `{"message":"hijack"}`, bob},
		{"POST", "/v1/sessions/{sid}/queue", `{"message":"hijack","mode":"steer"}`, bob},
		{"POST", "/v1/sessions/{sid}/goal", `{"action":"set","text":"hijack"}`, bob},
		{"POST", "/v1/sessions/{sid}/goal", `{"action":"status"}`, bob},
		{"GET", "/v1/runs/{rid}", "", bob},
		{"GET", "/v1/runs/{rid}/events", "", bob},
		{"GET", "/v1/runs/{rid}/events?after_seq=1&limit=5", "", bob},
		{"GET", "/v1/runs/{rid}/events", "", sse},
		{"POST", "/v1/runs/{rid}/cancel", "", bob},
		{"POST", "/v1/runs/{rid}/approvals/{aid}", `{"choice":"deny"}`, bob},
		{"POST", "/v1/runs/{rid}/clarifications/c_x", `{"response":"hijack"}`, bob},
	} {
		path := func(sid, rid string) string {
			return strings.NewReplacer("{sid}", sid, "{rid}", rid, "{aid}", run.Approval).Replace(tc.path)
		}
		code, body := rawDo(t, tc.method, th.URL+path(run.SID, run.RID), tc.body, tc.hdr)
		ghostCode, ghostBody := rawDo(t, tc.method, th.URL+path(ghostS, ghostR), tc.body, tc.hdr)
		if code != 404 || !strings.Contains(body, `"not_found"`) {
			t.Errorf("bob %s %s: %d %s, want 404 not_found", tc.method, tc.path, code, body)
		}
		if code != ghostCode || body != ghostBody {
			t.Errorf("bob %s %s: foreign %d %s differs from missing %d %s", tc.method, tc.path, code, body, ghostCode, ghostBody)
		}
	}
	var list protocol.SessionList
	if do(t, "GET", th.URL+"/v1/sessions", "", bob, &list); len(list.Sessions) != 0 {
		t.Fatalf("bob lists %+v", list.Sessions)
	}
	// Alice's run is untouched: still waiting for her approval, no queue,
	// no goal; her approval completes it.
	aliceHdr := bearerOf(token(t, "alice", time.Hour, ""))
	var st protocol.SessionStatus
	do(t, "GET", th.URL+"/v1/sessions/"+run.SID, "", aliceHdr, &st)
	if st.Status != protocol.StatusAwaitingApproval || st.QueueDepth != 0 || st.Goal != nil || st.RunID != run.RID {
		t.Fatalf("alice's session after bob: %+v", st)
	}
	if code := do(t, "POST", th.URL+"/v1/runs/"+run.RID+"/approvals/"+run.Approval, `{"choice":"once"}`, aliceHdr, nil); code != 200 {
		t.Fatalf("alice approves: %d", code)
	}
	if do(t, "GET", th.URL+"/v1/sessions", "", aliceHdr, &list); len(list.Sessions) != 1 || list.Sessions[0].SessionID != run.SID {
		t.Fatalf("alice lists %+v", list.Sessions)
	}
}

// On the socket another subject's session is unknown: watch and focus get
// not_found, watch-all never shows it, a cursor of its run is bad_cursor
// on one's own session, and every control is not_found.
func TestAuthz_SocketTwoSubjects(t *testing.T) {
	th := newTestHub(t, withAuth(t, hub.Config{}))
	alice := th.DialToken(t, token(t, "alice", time.Hour, ""))
	run := hubtest.StartAliceRun(t, th, alice)
	bob := th.DialToken(t, token(t, "bob", time.Hour, ""))
	ctx := ctxT(t, 30*time.Second)
	bob.Watch(ctx, true)
	own := startRun(t, bob, simStart("", 3, 0, ""))

	bob.Watch(ctx, false, run.SID)
	bob.Focus(ctx, run.SID, "")
	bob.Focus(ctx, own.SessionID, run.RID+":1")
	// Alice starts another session while bob watches all.
	second := startRun(t, alice, simStart("", 3, 0, ""))
	col := newCollector()
	col.Until(t, bob, 10*time.Second, "bob's own run, the two refusals and the bad cursor", func() bool {
		return col.TerminalOf(own.RunID) && len(col.Errors) >= 3 && col.Statuses[own.SessionID].Terminal
	})
	want := []protocol.Code{protocol.CodeNotFound, protocol.CodeNotFound, protocol.CodeBadCursor}
	for i, e := range col.Errors[:3] {
		if e.Code != want[i] {
			t.Fatalf("bob's errors %+v, want %v", col.Errors, want)
		}
	}
	if strings.Contains(col.Errors[2].Message, "alice") {
		t.Fatalf("bad_cursor names the owner: %q", col.Errors[2].Message)
	}
	for _, m := range []protocol.Control{
		simStart(run.SID, 3, 0, ""),
		{Op: protocol.OpCancel, RunID: run.RID},
		{Op: protocol.OpCancel, SessionID: run.SID},
		{Op: protocol.OpApprove, RunID: run.RID, ApprovalID: run.Approval, Choice: "deny"},
		{Op: protocol.OpClarify, RunID: run.RID, ClarifyID: "c_x", Response: "x"},
		{Op: protocol.OpQueue, SessionID: run.SID, Message: "hijack"},
		{Op: protocol.OpQueue, SessionID: run.SID, Message: "hijack", Mode: protocol.ModeSteer},
		{Op: protocol.OpGoal, SessionID: run.SID, Action: protocol.GoalSet, Text: "hijack"},
	} {
		_, err := bob.Control(ctx, m)
		if protocol.CodeOf(err) != protocol.CodeNotFound {
			t.Errorf("bob %s %+v: %v, want not_found", m.Op, m, err)
		}
	}
	// Give alice's second run time to finish and its status to flush, then
	// prove bob saw nothing of alice.
	time.Sleep(300 * time.Millisecond)
	bob.Send(ctx, protocol.Ping{Type: protocol.MsgPing, ID: "end"})
	col.Until(t, bob, 10*time.Second, "pong", func() bool {
		for _, o := range col.Other {
			if p, ok := o.(*protocol.Pong); ok && p.ID == "end" {
				return true
			}
		}
		return false
	})
	for sid := range col.Statuses {
		if sid == run.SID || sid == second.SessionID {
			t.Fatalf("bob got a status of alice's session %s", sid)
		}
	}
	for _, e := range col.Events {
		if e.SessionID != own.SessionID {
			t.Fatalf("bob got an event of %s", e.SessionID)
		}
	}
	var st protocol.SessionStatus
	do(t, "GET", th.URL+"/v1/sessions/"+run.SID, "", bearerOf(token(t, "alice", time.Hour, "")), &st)
	if st.Status != protocol.StatusAwaitingApproval || st.QueueDepth != 0 || st.Goal != nil {
		t.Fatalf("alice's session after bob: %+v", st)
	}
}

// An admin (role claim) reads any session — status, run, events, SSE,
// watch and focus — but steers only its own, and lists only its own.
func TestAuthz_AdminReadsOnly(t *testing.T) {
	th := newTestHub(t, withAuth(t, hub.Config{}))
	alice := th.DialToken(t, token(t, "alice", time.Hour, ""))
	run := hubtest.StartAliceRun(t, th, alice)
	adminTok := token(t, "ops", time.Hour, "admin")
	admin := bearerOf(adminTok)
	var st protocol.SessionStatus
	if code := do(t, "GET", th.URL+"/v1/sessions/"+run.SID, "", admin, &st); code != 200 || st.RunID != run.RID {
		t.Fatalf("admin GET session: %d %+v", code, st)
	}
	var rs protocol.RunStatus
	if code := do(t, "GET", th.URL+"/v1/runs/"+run.RID, "", admin, &rs); code != 200 || rs.SessionID != run.SID {
		t.Fatalf("admin GET run: %d %+v", code, rs)
	}
	var page protocol.EventPage
	if code := do(t, "GET", th.URL+"/v1/runs/"+run.RID+"/events", "", admin, &page); code != 200 || len(page.Events) == 0 {
		t.Fatalf("admin events: %d %+v", code, page)
	}
	req, _ := http.NewRequest("GET", th.URL+"/v1/runs/"+run.RID+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+adminTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	resp.Body.Close()
	if resp.StatusCode != 200 || line != "id: "+run.RID+":1\n" {
		t.Fatalf("admin SSE: %d %q", resp.StatusCode, line)
	}
	for _, p := range []struct{ path, body string }{
		{"/v1/runs/" + run.RID + "/cancel", ""},
		{"/v1/runs/" + run.RID + "/approvals/" + run.Approval, `{"choice":"deny"}`},
		{"/v1/sessions/" + run.SID + "/queue", `{"message":"x"}`},
		{"/v1/sessions/" + run.SID + "/goal", `{"action":"set","text":"x"}`},
		{"/v1/sessions/" + run.SID + "/runs", `{"message":"x"}`},
	} {
		if code, body := rawDo(t, "POST", th.URL+p.path, p.body, admin); code != 404 {
			t.Errorf("admin POST %s: %d %s, want 404", p.path, code, body)
		}
	}
	var list protocol.SessionList
	if do(t, "GET", th.URL+"/v1/sessions", "", admin, &list); len(list.Sessions) != 0 {
		t.Fatalf("admin lists %+v", list.Sessions)
	}

	tab := th.DialToken(t, adminTok)
	ctx := ctxT(t, 20*time.Second)
	tab.Watch(ctx, false, run.SID)
	tab.Focus(ctx, run.SID, "")
	col := newCollector()
	col.Until(t, tab, 10*time.Second, "status and replay of alice's session", func() bool {
		_, ok := col.Statuses[run.SID]
		return ok && len(col.Replayed) == 1
	})
	if len(col.Errors) != 0 || len(col.Events) == 0 || col.Events[0].RunID != run.RID {
		t.Fatalf("admin socket: errors %+v, %d events", col.Errors, len(col.Events))
	}
	if _, err := tab.Control(ctx, protocol.Control{Op: protocol.OpCancel, RunID: run.RID}); protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("admin cancel over the socket: %v", err)
	}
}
