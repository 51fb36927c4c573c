package main

import (
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// runEnded polls a run until it has ended and returns its status.
func runEnded(t *testing.T, base, runID string, d time.Duration) protocol.RunStatus {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var st protocol.RunStatus
		if code := call(t, "GET", base+"/v1/runs/"+runID, nil, &st); code == 200 && st.Terminal {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not end within %v: %+v", runID, d, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A run queued for runners (RUNHUB_RUNTIME=runners) that no runner ever
// starts ends after RUNHUB_RUN_START_TIMEOUT with exactly one terminal
// error no_runner, even with two hubs reaping it; the session is then free
// for a new start.
func TestProcess_QueuedRunWithoutRunnerEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and hubs")
	}
	rs := redistest.Start(t, redistest.Options{})
	env := []string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_RUNTIME=runners", "RUNHUB_LEASE_TTL=1s", "RUNHUB_RUN_START_TIMEOUT=2s"}
	p := startHub(t, t.TempDir(), env...)
	startHub(t, t.TempDir(), env...) // a second reaper
	var sess protocol.CreateSessionResult
	if code := call(t, "POST", p.URL()+"/v1/sessions", map[string]string{"title": "no runner"}, &sess); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	var run protocol.RunStartResult
	if code := call(t, "POST", p.URL()+"/v1/sessions/"+sess.SessionID+"/runs", map[string]any{"message": "anyone?"}, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	begun := time.Now()
	st := runEnded(t, p.URL(), run.RunID, 30*time.Second)
	if waited := time.Since(begun); waited < 1500*time.Millisecond {
		t.Fatalf("the run ended after %v, before its 2s start timeout", waited)
	}
	events := allEvents(t, p.URL(), run.RunID)
	if len(events) != 1 {
		t.Fatalf("%d events, want the one terminal error: %+v", len(events), events)
	}
	e := events[0]
	ep, _ := protocol.DecodePayload[protocol.ErrorPayload](&e)
	if e.Type != protocol.EventError || !e.Terminal || ep.Code != protocol.ErrorNoRunner || !strings.Contains(ep.Message, "no runner started the run within 2s") {
		t.Fatalf("terminal event %s %s", e.Type, e.Payload)
	}
	if st.Status != protocol.StatusFailed {
		t.Fatalf("run status %s, want failed", st.Status)
	}
	// Still exactly one after more reaper rounds on both hubs.
	time.Sleep(1500 * time.Millisecond)
	if n := len(allEvents(t, p.URL(), run.RunID)); n != 1 {
		t.Fatalf("%d events after more reaping", n)
	}
	var again protocol.RunStartResult
	if code := call(t, "POST", p.URL()+"/v1/sessions/"+sess.SessionID+"/runs", map[string]any{"message": "again"}, &again); code != 202 {
		t.Fatalf("a new start after the expiry: %d", code)
	}
}

// approvalRun starts a sim run that asks an approval and returns its id
// once the approval is pending.
func approvalRun(t *testing.T, base string) (sid, rid, aid string) {
	t.Helper()
	var sess protocol.CreateSessionResult
	if code := call(t, "POST", base+"/v1/sessions", map[string]string{"title": "approve?"}, &sess); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	var run protocol.RunStartResult
	body := map[string]any{"message": "tools", "metadata": map[string]any{"sim": map[string]any{"tokens": 3, "token_ms": 0, "tools": 1, "approval": true}}}
	if code := call(t, "POST", base+"/v1/sessions/"+sess.SessionID+"/runs", body, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var st protocol.RunStatus
		call(t, "GET", base+"/v1/runs/"+run.RunID, nil, &st)
		if st.PendingApprovalID != "" {
			return sess.SessionID, run.RunID, st.PendingApprovalID
		}
		if time.Now().After(deadline) || st.Terminal {
			t.Fatalf("no pending approval: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkApprovalExpired asserts the run's journal: one approval.resolved,
// status expired, choice deny; the tool denied; the run completed.
func checkApprovalExpired(t *testing.T, base, rid string) {
	t.Helper()
	st := runEnded(t, base, rid, 30*time.Second)
	if st.Status != protocol.StatusCompleted {
		t.Fatalf("run %s, want completed", st.Status)
	}
	resolved, denied := 0, false
	for _, e := range allEvents(t, base, rid) {
		switch e.Type {
		case protocol.EventApprovalRes:
			resolved++
			p, _ := protocol.DecodePayload[protocol.ApprovalResolvedPayload](&e)
			if p.Status != "expired" || p.Choice != "deny" {
				t.Fatalf("approval.resolved %s, want status expired, choice deny", e.Payload)
			}
		case protocol.EventToolDone:
			denied = strings.Contains(string(e.Payload), `"denied"`)
		}
	}
	if resolved != 1 || !denied {
		t.Fatalf("%d approval.resolved (want 1), tool denied %v", resolved, denied)
	}
}

// With RUNHUB_APPROVAL_TIMEOUT an approval nobody answers expires: it is
// journaled once as resolved with status expired and choice deny, the run
// goes on as denied, and a late answer gets 409 expired — with the runs in
// the hub (embedded journal) and in a runner (Redis, runners mode).
func TestProcess_ApprovalExpires(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hubs, redis-server and a runner")
	}
	t.Run("inprocess", func(t *testing.T) {
		p := startHub(t, t.TempDir(), "RUNHUB_APPROVAL_TIMEOUT=1s")
		_, rid, aid := approvalRun(t, p.URL())
		checkApprovalExpired(t, p.URL(), rid)
		var res protocol.ControlResult
		if code := call(t, "POST", p.URL()+"/v1/runs/"+rid+"/approvals/"+aid, map[string]string{"choice": "once"}, &res); code != 409 {
			t.Fatalf("late answer: %d %+v", code, res)
		}
	})
	t.Run("runner", func(t *testing.T) {
		rs := redistest.Start(t, redistest.Options{})
		env := []string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_APPROVAL_TIMEOUT=1s", "RUNHUB_LEASE_TTL=2s"}
		p := startHub(t, t.TempDir(), append(env, "RUNHUB_RUNTIME=runners")...)
		startRunner(t, env...)
		_, rid, _ := approvalRun(t, p.URL())
		checkApprovalExpired(t, p.URL(), rid)
	})
	t.Run("answer before expiry wins", func(t *testing.T) {
		p := startHub(t, t.TempDir(), "RUNHUB_APPROVAL_TIMEOUT=3s")
		_, rid, aid := approvalRun(t, p.URL())
		var res protocol.ControlResult
		if code := call(t, "POST", p.URL()+"/v1/runs/"+rid+"/approvals/"+aid, map[string]string{"choice": "once"}, &res); code != 200 || !res.Accepted {
			t.Fatalf("answer: %d %+v", code, res)
		}
		runEnded(t, p.URL(), rid, 30*time.Second)
		time.Sleep(3 * time.Second) // past the expiry: nothing more is journaled
		resolved := 0
		for _, e := range allEvents(t, p.URL(), rid) {
			if e.Type == protocol.EventApprovalRes {
				resolved++
				if !strings.Contains(string(e.Payload), `"resolved"`) || !strings.Contains(string(e.Payload), `"once"`) {
					t.Fatalf("approval.resolved %s", e.Payload)
				}
			}
		}
		if resolved != 1 {
			t.Fatalf("%d approval.resolved", resolved)
		}
	})
}
