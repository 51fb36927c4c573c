package hub_test

// The acceptance properties of the contract's control slices (3a cancel, 3b
// approval and clarify, 3c queue/steer and goal), each written once as a
// property over a transport and run over both: the tab socket's `control`
// message (the TestControlsWS_* tests here) and the HTTP endpoints (the
// TestControlsHTTP_* tests in controls_http_test.go). Every answer a
// transport returns is checked on the way: a known ControlResult status,
// Accepted iff accepted, no internal text, and over HTTP the status code of
// protocol.md §3.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// transport carries controls to the hub the way one kind of client does.
type transport interface {
	Name() string
	// Control executes m. key, when set, is its idempotency key: the WS
	// control id or the HTTP Idempotency-Key. It returns the ControlResult,
	// or the protocol error the hub refused m with. Safe to call from any
	// goroutine (it reports transport failures with t.Errorf).
	Control(t testing.TB, m protocol.Control, key string) (protocol.ControlResult, *protocol.Error)
	// Session waits until the session's status, as this kind of client sees
	// it (WS: status messages of a watching tab; HTTP: GET
	// /v1/sessions/{sid}), satisfies cond, and returns it.
	Session(t testing.TB, sid, what string, cond func(protocol.SessionStatus) bool) protocol.SessionStatus
}

// newTransport makes a transport (a new client) for a test hub.
type newTransport func(t testing.TB, th *testHub) transport

// wsTransport sends controls over one tab socket and watches statuses on
// another.
type wsTransport struct {
	th  *testHub
	ctl *client.Conn

	tab     *client.Conn
	col     *collector
	watched map[string]bool
}

// controlSeq numbers WS control ids across sockets: the hub uses a control's
// id as its idempotency key in the session, so ids must not repeat unless a
// test repeats one on purpose.
var controlSeq atomic.Uint64

func newWS(t testing.TB, th *testHub) transport {
	return &wsTransport{th: th, ctl: th.Dial(t), watched: map[string]bool{}}
}

func (w *wsTransport) Name() string { return "ws" }

func (w *wsTransport) Control(t testing.TB, m protocol.Control, key string) (protocol.ControlResult, *protocol.Error) {
	m.ID = key
	if m.ID == "" {
		m.ID = fmt.Sprintf("ctl-%d", controlSeq.Add(1))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := w.ctl.Control(ctx, m)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			checkSafe(t, "ws error "+string(pe.Code), pe.Message)
			// A control_result may follow the error (a refusal by the
			// runtime; a malformed control gets the error alone): it lands
			// in the inbox, before the pong of a ping sent now.
			ping := protocol.Ping{Type: protocol.MsgPing, ID: "barrier-" + m.ID}
			if err := w.ctl.Send(ctx, ping); err != nil {
				t.Errorf("ws ping: %v", err)
				return res, pe
			}
			for {
				msg, err := w.ctl.Next(ctx)
				if err != nil {
					t.Errorf("ws %s: no pong after the error: %v", m.Op, err)
					break
				}
				if cr, ok := msg.(*protocol.ControlResultMessage); ok && cr.ID == m.ID {
					checkResult(t, "ws "+m.Op+" after an error", cr.ControlResult)
					if cr.Accepted {
						t.Errorf("ws %s: refused with %s but accepted", m.Op, pe.Code)
					}
				}
				if p, ok := msg.(*protocol.Pong); ok && p.ID == ping.ID {
					break
				}
			}
			return res, pe
		}
		t.Errorf("ws %s: %v", m.Op, err) // a transport failure or a control that blocked
		return res, &protocol.Error{Code: "transport", Message: err.Error()}
	}
	checkResult(t, "ws "+m.Op, res)
	return res, nil
}

func (w *wsTransport) Session(t testing.TB, sid, what string, cond func(protocol.SessionStatus) bool) protocol.SessionStatus {
	t.Helper()
	if w.tab == nil {
		w.tab, w.col = w.th.Dial(t), newCollector()
	}
	if !w.watched[sid] {
		if err := w.tab.Watch(ctxT(t, 5*time.Second), false, sid); err != nil {
			t.Fatal(err)
		}
		w.watched[sid] = true
	}
	w.col.Until(t, w.tab, 20*time.Second, what, func() bool {
		st, ok := w.col.Statuses[sid]
		return ok && cond(st)
	})
	return w.col.Statuses[sid]
}

// internalMarkers are fragments of Go errors and internal prefixes that
// must never reach a client.
var internalMarkers = []string{"journal:", "adapter:", "journal/", "bolt", "redis", "context deadline",
	"context canceled", "runtime error", "panic", "goroutine", ".go:", "%!", "<nil>", "EOF",
	"i/o timeout", "connection refused", "invalid character", "json:", "unexpected end"}

func checkSafe(t testing.TB, where, s string) {
	t.Helper()
	for _, m := range internalMarkers {
		if strings.Contains(s, m) {
			t.Errorf("%s: message %q carries internal text %q", where, s, m)
		}
	}
}

// checkResult asserts a ControlResult is well formed and safe.
func checkResult(t testing.TB, where string, res protocol.ControlResult) {
	t.Helper()
	switch res.Status {
	case protocol.ResultAccepted, protocol.ResultNotActive, protocol.ResultExpired, protocol.ResultConflict, protocol.ResultUnsupported:
	default:
		t.Errorf("%s: unknown ControlResult status %q (%+v)", where, res.Status, res)
	}
	if res.Accepted != (res.Status == protocol.ResultAccepted) {
		t.Errorf("%s: accepted %v with status %q", where, res.Accepted, res.Status)
	}
	if res.Message == "" {
		t.Errorf("%s: ControlResult without a message: %+v", where, res)
	}
	checkSafe(t, where, res.Message)
}

// --- controls -----------------------------------------------------------

// ctl executes a control that must be answered with a ControlResult.
func ctl(t testing.TB, tr transport, m protocol.Control, key string) protocol.ControlResult {
	t.Helper()
	res, perr := tr.Control(t, m, key)
	if perr != nil {
		t.Fatalf("%s %s: refused with %s: %s", tr.Name(), m.Op, perr.Code, perr.Message)
	}
	return res
}

// want asserts a ControlResult's status.
func want(t testing.TB, res protocol.ControlResult, status, what string) {
	t.Helper()
	if res.Status != status {
		t.Fatalf("%s: got %s (%q), want %s; result %+v", what, res.Status, res.Message, status, res)
	}
}

func simMD(script string) []byte { return []byte(`{"sim":{` + script + `}}`) }

// start starts a simulated run (in a new session when sid is empty).
func start(t testing.TB, tr transport, sid, script string) protocol.ControlResult {
	t.Helper()
	res := ctl(t, tr, protocol.Control{Op: protocol.OpStart, SessionID: sid, Message: "hello sim", Metadata: simMD(script)}, "")
	want(t, res, protocol.ResultAccepted, "start")
	if res.RunID == "" || res.SessionID == "" || res.EventID != protocol.EventID(res.RunID, 1) {
		t.Fatalf("start result %+v", res)
	}
	return res
}

func cancelRun(t testing.TB, tr transport, runID string) protocol.ControlResult {
	t.Helper()
	return ctl(t, tr, protocol.Control{Op: protocol.OpCancel, RunID: runID}, "")
}

func approve(t testing.TB, tr transport, runID, approvalID, choice string) protocol.ControlResult {
	t.Helper()
	return ctl(t, tr, protocol.Control{Op: protocol.OpApprove, RunID: runID, ApprovalID: approvalID, Choice: choice}, "")
}

func answer(t testing.TB, tr transport, runID, clarifyID, response string) protocol.ControlResult {
	t.Helper()
	return ctl(t, tr, protocol.Control{Op: protocol.OpClarify, RunID: runID, ClarifyID: clarifyID, Response: response}, "")
}

func queue(t testing.TB, tr transport, sid, message, mode, key string) protocol.ControlResult {
	t.Helper()
	return ctl(t, tr, protocol.Control{Op: protocol.OpQueue, SessionID: sid, Message: message, Mode: mode}, key)
}

func goal(t testing.TB, tr transport, sid, action, text string) protocol.ControlResult {
	t.Helper()
	return ctl(t, tr, protocol.Control{Op: protocol.OpGoal, SessionID: sid, Action: action, Text: text}, "")
}

// --- journal and status helpers ------------------------------------------

func ofType(events []protocol.Envelope, typ protocol.EventType) []protocol.Envelope {
	var out []protocol.Envelope
	for _, e := range events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// settled waits until the session has n runs and none active.
func settled(t testing.TB, th *testHub, sid string, n int) journal.SessionMeta {
	t.Helper()
	var m journal.SessionMeta
	waitFor(t, 30*time.Second, fmt.Sprintf("session with %d runs, none active", n), func() bool {
		m = sessionMeta(t, th, sid)
		return len(m.Runs) >= n && m.ActiveRun == ""
	})
	if len(m.Runs) != n {
		t.Fatalf("session has %d runs, want %d", len(m.Runs), n)
	}
	return m
}

// nthRun waits until the session has n runs and returns the nth.
func nthRun(t testing.TB, th *testHub, sid string, n int) string {
	t.Helper()
	var m journal.SessionMeta
	waitFor(t, 30*time.Second, fmt.Sprintf("run %d of the session", n), func() bool {
		m = sessionMeta(t, th, sid)
		return len(m.Runs) >= n
	})
	return m.Runs[n-1]
}

// noNewRun asserts the session starts no run within a short window. An
// absence cannot be polled for; a continuation that should not happen
// starts within microseconds of the previous run's end, so a window of a
// few hundred milliseconds catches it.
func noNewRun(t testing.TB, th *testHub, sid string, n int) {
	t.Helper()
	deadline := time.Now().Add(400 * time.Millisecond)
	for time.Now().Before(deadline) {
		if m := sessionMeta(t, th, sid); len(m.Runs) != n || m.ActiveRun != "" {
			t.Fatalf("session started a run it should not have: runs %v, active %q", m.Runs, m.ActiveRun)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runStarted returns a run's run.started payload.
func runStarted(t testing.TB, th *testHub, runID string) protocol.RunStartedPayload {
	t.Helper()
	evs := journalEvents(t, th, runID)
	if len(evs) == 0 || evs[0].Type != protocol.EventRunStarted {
		t.Fatalf("run %s does not begin with run.started: %+v", runID, evs)
	}
	return hubtest.Payload[protocol.RunStartedPayload](t, evs[0])
}

func noErrors(t testing.TB, evs []protocol.Envelope) {
	t.Helper()
	if errs := ofType(evs, protocol.EventError); len(errs) > 0 {
		t.Fatalf("run has error events: %s", errs[0].Payload)
	}
}

// getRunStatus is GET /v1/runs/{rid}.
func getRunStatus(t testing.TB, th *testHub, runID string) protocol.RunStatus {
	t.Helper()
	var st protocol.RunStatus
	if code := do(t, "GET", th.URL+"/v1/runs/"+runID, "", nil, &st); code != 200 {
		t.Fatalf("GET run %s: %d", runID, code)
	}
	return st
}

// getSessionStatus is GET /v1/sessions/{sid}.
func getSessionStatus(t testing.TB, th *testHub, sid string) protocol.SessionStatus {
	t.Helper()
	var st protocol.SessionStatus
	if code := do(t, "GET", th.URL+"/v1/sessions/"+sid, "", nil, &st); code != 200 {
		t.Fatalf("GET session %s: %d", sid, code)
	}
	return st
}

// newSession creates an empty session over HTTP (test setup).
func newSession(t testing.TB, th *testHub) string {
	t.Helper()
	var res protocol.CreateSessionResult
	if code := do(t, "POST", th.URL+"/v1/sessions", `{"title":"controls"}`, nil, &res); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	return res.SessionID
}

func sameList(got, want []string) bool {
	return slices.Equal(got, want) || (len(got) == 0 && len(want) == 0)
}

var idleControls = []string{protocol.OpStart, protocol.OpQueue, protocol.OpGoal}

// start2 is a start that may be refused with a bounded result.
func start2(t testing.TB, tr transport, sid string) protocol.ControlResult {
	t.Helper()
	return ctl(t, tr, protocol.Control{Op: protocol.OpStart, SessionID: sid, Message: "again", Metadata: simMD(`"tokens":1`)}, "")
}

// --- the WebSocket entry points -------------------------------------------

func TestControlsWS_CancelOneTerminal(t *testing.T)     { testCancelOneTerminal(t, newWS) }
func TestControlsWS_CancelConcurrent(t *testing.T)      { testCancelConcurrent(t, newWS) }
func TestControlsWS_CancelRepeat(t *testing.T)          { testCancelRepeat(t, newWS) }
func TestControlsWS_CancelDuringTool(t *testing.T)      { testCancelDuringTool(t, newWS) }
func TestControlsWS_CancelDuringReasoning(t *testing.T) { testCancelDuringReasoning(t, newWS) }
func TestControlsWS_CancelNotStarted(t *testing.T)      { testCancelNotStarted(t, newWS) }
func TestControlsWS_CancelDuringPrompt(t *testing.T)    { testCancelDuringPrompt(t, newWS) }
func TestControlsWS_ApprovalApprove(t *testing.T)       { testApprovalApprove(t, newWS) }
func TestControlsWS_ApprovalDeny(t *testing.T)          { testApprovalDeny(t, newWS) }
func TestControlsWS_ApprovalDuplicate(t *testing.T)     { testApprovalDuplicate(t, newWS) }
func TestControlsWS_PromptUnknownIDs(t *testing.T)      { testPromptUnknownIDs(t, newWS) }
func TestControlsWS_ClarifyAnswered(t *testing.T)       { testClarifyAnswered(t, newWS) }
func TestControlsWS_ClarifyExpiry(t *testing.T)         { testClarifyExpiry(t, newWS) }
func TestControlsWS_ClarifyRaceExpiry(t *testing.T)     { testClarifyRaceExpiry(t, newWS) }
func TestControlsWS_QueueOnActive(t *testing.T)         { testQueueOnActive(t, newWS) }
func TestControlsWS_QueueThreeInOrder(t *testing.T)     { testQueueThreeInOrder(t, newWS) }
func TestControlsWS_QueueOnIdle(t *testing.T)           { testQueueOnIdle(t, newWS) }
func TestControlsWS_QueueIdempotent(t *testing.T)       { testQueueIdempotent(t, newWS) }
func TestControlsWS_Steer(t *testing.T)                 { testSteer(t, newWS) }
func TestControlsWS_GoalTurns(t *testing.T)             { testGoalTurns(t, newWS) }
func TestControlsWS_GoalPauseResume(t *testing.T)       { testGoalPauseResume(t, newWS) }
func TestControlsWS_GoalClearStatus(t *testing.T)       { testGoalClearStatus(t, newWS) }
func TestControlsWS_GoalMaxContinuations(t *testing.T)  { testGoalMaxContinuations(t, newWS) }
func TestControlsWS_ControlsLists(t *testing.T)         { testControlsLists(t, newWS) }
func TestControlsWS_ReplayHistory(t *testing.T)         { testReplayHistory(t, newWS) }
func TestControlsWS_SafeResults(t *testing.T)           { testSafeResults(t, newWS) }

// Over the socket a cancel may name the session: its active run is
// cancelled.
func TestControlsWS_CancelBySession(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	tr := newWS(t, th)
	run := start(t, tr, "", `"tokens":5000,"token_ms":5,"tools":0`)
	res := ctl(t, tr, protocol.Control{Op: protocol.OpCancel, SessionID: run.SessionID}, "")
	want(t, res, protocol.ResultAccepted, "cancel by session")
	if res.RunID != run.RunID {
		t.Fatalf("cancel by session: %+v", res)
	}
	evs := terminal(t, th, run.RunID)
	if evs[len(evs)-1].Type != protocol.EventCancelled {
		t.Fatalf("run ended %s", evs[len(evs)-1].Type)
	}
	want(t, ctl(t, tr, protocol.Control{Op: protocol.OpCancel, SessionID: run.SessionID}, ""), protocol.ResultNotActive, "second cancel by session")
	sid := newSession(t, th)
	if _, perr := tr.Control(t, protocol.Control{Op: protocol.OpCancel, SessionID: sid}, ""); perr == nil || perr.Code != protocol.CodeNotActive {
		t.Fatalf("cancel of a session without runs: %+v", perr)
	}
}
