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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
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
	return &wsTransport{th: th, ctl: th.dial(t), watched: map[string]bool{}}
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
		w.tab, w.col = w.th.dial(t), newCollector()
	}
	if !w.watched[sid] {
		if err := w.tab.Watch(ctxT(t, 5*time.Second), false, sid); err != nil {
			t.Fatal(err)
		}
		w.watched[sid] = true
	}
	w.col.until(t, w.tab, 20*time.Second, what, func() bool {
		st, ok := w.col.statuses[sid]
		return ok && cond(st)
	})
	return w.col.statuses[sid]
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

// waitFor polls cond until it holds.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// journalEvents reads every journaled event of a run.
func journalEvents(t testing.TB, th *testHub, runID string) []protocol.Envelope {
	t.Helper()
	var out []protocol.Envelope
	err := journal.ReadAll(context.Background(), th.store, runID, 0, func(e protocol.Envelope) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatalf("read run %s: %v", runID, err)
	}
	return out
}

// waitEvent polls the journal until the run has an event matching pred.
func waitEvent(t testing.TB, th *testHub, runID, what string, pred func(*protocol.Envelope) bool) protocol.Envelope {
	t.Helper()
	var found protocol.Envelope
	waitFor(t, 20*time.Second, what, func() bool {
		for _, e := range journalEvents(t, th, runID) {
			if pred(&e) {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

func isType(typ protocol.EventType) func(*protocol.Envelope) bool {
	return func(e *protocol.Envelope) bool { return e.Type == typ }
}

func ofType(events []protocol.Envelope, typ protocol.EventType) []protocol.Envelope {
	var out []protocol.Envelope
	for _, e := range events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func pl[T any](t testing.TB, e protocol.Envelope) T {
	t.Helper()
	v, err := protocol.DecodePayload[T](&e)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sessionMeta(t testing.TB, th *testHub, sid string) journal.SessionMeta {
	t.Helper()
	m, err := th.store.Session(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func runMeta(t testing.TB, th *testHub, runID string) journal.RunMeta {
	t.Helper()
	m, err := th.store.Run(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return m
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
	return pl[protocol.RunStartedPayload](t, evs[0])
}

// terminal waits for a run's end and returns its events (checked: seq
// 1..N, exactly one terminal event, last).
func terminal(t testing.TB, th *testHub, runID string) []protocol.Envelope {
	t.Helper()
	waitTerminal(t, th, runID)
	evs := journalEvents(t, th, runID)
	checkRun(t, evs, runID)
	return evs
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
	st, _, err := journal.FoldSession(context.Background(), th.store, sid)
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
		if e.Type == protocol.EventStatus && pl[protocol.StatusPayload](t, e).Status == protocol.StatusCancelling {
			if cancelling >= 0 {
				t.Fatalf("two cancelling status events: %d and %d", evs[cancelling].Seq, e.Seq)
			}
			cancelling = i
		}
	}
	if cancelling < 0 || evs[cancelling].EventID != res.EventID {
		t.Fatalf("no cancelling status event named by the result (event %s)", res.EventID)
	}
	if c := pl[protocol.StatusPayload](t, evs[cancelling]).Controls; len(c) != 0 {
		t.Fatalf("a cancelling run lists controls %v", c)
	}
	last := evs[len(evs)-1] // after the cancelling status: checkRun put the terminal last
	if last.Type != protocol.EventCancelled {
		t.Fatalf("terminal event %s %s, want cancelled", last.Type, last.Payload)
	}
	if p := pl[protocol.CancelledPayload](t, last); !p.Partial || p.Reason == "" {
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
		if pl[protocol.StatusPayload](t, e).Status == protocol.StatusCancelling {
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
	if last.Type != protocol.EventCancelled || !pl[protocol.CancelledPayload](t, last).Partial {
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
	if last.Type != protocol.EventCancelled || !pl[protocol.CancelledPayload](t, last).Partial {
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
			if err := th.store.BeginRun(ctx, journal.RunMeta{ID: rid, SessionID: sid, Owner: "local",
				CreatedAt: protocol.Timestamp(time.Now())}); err != nil {
				t.Fatal(err)
			}
			if withStarted {
				e, err := protocol.NewEvent(rid, sid, protocol.EventRunStarted, protocol.RunStartedPayload{
					Message: "waiting", Toolsets: []string{}, Provider: "sim", Source: "user"})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := th.store.Append(ctx, e, ""); err != nil {
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
			if res.EventID != last.EventID || last.Type != protocol.EventCancelled || pl[protocol.CancelledPayload](t, last).Partial {
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
			if last.Type != protocol.EventCancelled || pl[protocol.CancelledPayload](t, last).Partial {
				t.Fatalf("terminal %s %s, want cancelled, not partial", last.Type, last.Payload)
			}
			var res protocol.ControlResult
			if kind == "approval" {
				res = approve(t, tr, run.RunID, pl[protocol.ApprovalRequestedPayload](t, req).ApprovalID, "once")
			} else {
				res = answer(t, tr, run.RunID, pl[protocol.ClarifyRequestedPayload](t, req).ClarifyID, "short")
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

// approvalRun starts a run asking one approval and returns it with the
// request.
func approvalRun(t testing.TB, th *testHub, tr transport, script string) (protocol.ControlResult, protocol.ApprovalRequestedPayload) {
	t.Helper()
	run := start(t, tr, "", `"approval":true,`+script)
	e := waitEvent(t, th, run.RunID, "approval.requested", isType(protocol.EventApprovalReq))
	return run, pl[protocol.ApprovalRequestedPayload](t, e)
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
	if p := pl[protocol.ApprovalResolvedPayload](t, resolved[0]); p.ApprovalID != req.ApprovalID || p.Choice != "once" || p.Status != "resolved" {
		t.Fatalf("approval.resolved %+v", p)
	}
	tools := ofType(evs, protocol.EventToolDone)
	if len(tools) != 2 || tools[0].Seq < resolved[0].Seq {
		t.Fatalf("%d tool.done events, want 2 after the approval", len(tools))
	}
	for _, e := range tools {
		if pl[protocol.ToolDonePayload](t, e).Error {
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
	if len(resolved) != 1 || pl[protocol.ApprovalResolvedPayload](t, resolved[0]).Choice != "deny" {
		t.Fatalf("approval.resolved %v", resolved)
	}
	tools := ofType(evs, protocol.EventToolDone)
	if len(tools) != 2 {
		t.Fatalf("%d tool.done events, want 2", len(tools))
	}
	for _, e := range tools {
		if p := pl[protocol.ToolDonePayload](t, e); !p.Error {
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
		if pl[protocol.ToolDonePayload](t, e).Error {
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
	creq := pl[protocol.ClarifyRequestedPayload](t, waitEvent(t, th, run.RunID, "clarify.requested", isType(protocol.EventClarifyReq)))
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
	req := pl[protocol.ClarifyRequestedPayload](t, waitEvent(t, th, run.RunID, "clarify.requested", isType(protocol.EventClarifyReq)))
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
	if p := pl[protocol.ClarifyResolvedPayload](t, resolved[0]); p.ClarifyID != req.ClarifyID || p.Status != "resolved" || p.Response != "short" {
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
	req := pl[protocol.ClarifyRequestedPayload](t, waitEvent(t, th, run.RunID, "clarify.requested", isType(protocol.EventClarifyReq)))
	res := waitEvent(t, th, run.RunID, "clarify expiry", isType(protocol.EventClarifyRes))
	if p := pl[protocol.ClarifyResolvedPayload](t, res); p.ClarifyID != req.ClarifyID || p.Status != "expired" {
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
		res := answer(t, tr, run.RunID, pl[protocol.ClarifyRequestedPayload](t, req).ClarifyID, "short")
		evs := terminal(t, th, run.RunID)
		resolved := ofType(evs, protocol.EventClarifyRes)
		if len(resolved) != 1 {
			t.Fatalf("%d clarify.resolved events, want 1", len(resolved))
		}
		p := pl[protocol.ClarifyResolvedPayload](t, resolved[0])
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

// A message queued on an active session is journaled as queue.updated on
// the active run, shows as queue_depth, and runs after the active run.
func testQueueOnActive(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	run := start(t, tr, "", `"tokens":100,"token_ms":10,"tools":0`)
	res := queue(t, tr, run.SessionID, "next please", "", "")
	want(t, res, protocol.ResultAccepted, "queue")
	if res.RunID != run.RunID || res.EventID == "" {
		t.Fatalf("queue result %+v, want the active run and the queue.updated event", res)
	}
	ev := waitEvent(t, th, run.RunID, "queue.updated", func(e *protocol.Envelope) bool { return e.EventID == res.EventID })
	p := pl[protocol.QueueUpdatedPayload](t, ev)
	if ev.Type != protocol.EventQueueUpdated || p.Depth != 1 || len(p.Items) != 1 || p.Items[0].Preview != "next please" || p.Items[0].ID == "" {
		t.Fatalf("queue event %s %s", ev.Type, ev.Payload)
	}
	tr.Session(t, run.SessionID, "queue depth 1", func(s protocol.SessionStatus) bool { return s.RunID == run.RunID && s.QueueDepth == 1 })
	if st := getSessionStatus(t, th, run.SessionID); st.QueueDepth != 1 {
		t.Fatalf("GET session queue_depth %d, want 1", st.QueueDepth)
	}
	m := settled(t, th, run.SessionID, 2)
	evs := terminal(t, th, m.Runs[1])
	if p := runStarted(t, th, m.Runs[1]); p.Source != "queue" || p.Message != "next please" {
		t.Fatalf("queued run started with %+v", p)
	}
	if q := ofType(evs, protocol.EventQueueUpdated); len(q) != 1 || pl[protocol.QueueUpdatedPayload](t, q[0]).Depth != 0 {
		t.Fatalf("the queued run's queue.updated events: %v", q)
	}
	tr.Session(t, run.SessionID, "queue drained", func(s protocol.SessionStatus) bool {
		return s.RunID == m.Runs[1] && s.Terminal && s.QueueDepth == 0
	})
}

// Three queued messages run in order after the active run, one run each,
// source queue, never overlapping.
func testQueueThreeInOrder(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	run := start(t, tr, "", `"tokens":40,"token_ms":10,"tools":0`)
	msgs := []string{"first", "second", "third"}
	for i, msg := range msgs {
		res := queue(t, tr, run.SessionID, msg, protocol.ModeQueue, "")
		want(t, res, protocol.ResultAccepted, "queue "+msg)
		if res.RunID != run.RunID {
			t.Fatalf("queue %s: %+v (the run ended too soon? make it longer)", msg, res)
		}
		ev := waitEvent(t, th, run.RunID, "queue.updated", func(e *protocol.Envelope) bool { return e.EventID == res.EventID })
		p := pl[protocol.QueueUpdatedPayload](t, ev)
		if p.Depth != i+1 || len(p.Items) != i+1 {
			t.Fatalf("queue.updated after %s: %+v", msg, p)
		}
		for j := range p.Items {
			if p.Items[j].Preview != msgs[j] {
				t.Fatalf("queue order %+v", p.Items)
			}
		}
	}
	m := settled(t, th, run.SessionID, 4)
	prevEnd := terminal(t, th, m.Runs[0])
	for i, rid := range m.Runs[1:] {
		evs := terminal(t, th, rid)
		p := pl[protocol.RunStartedPayload](t, evs[0])
		if p.Source != "queue" || p.Message != msgs[i] {
			t.Fatalf("run %d started with %+v, want %q from the queue", i+2, p, msgs[i])
		}
		if evs[0].CreatedAt < prevEnd[len(prevEnd)-1].CreatedAt {
			t.Fatalf("run %d started before the previous run ended", i+2)
		}
		if q := ofType(evs, protocol.EventQueueUpdated); len(q) != 1 || pl[protocol.QueueUpdatedPayload](t, q[0]).Depth != 2-i {
			t.Fatalf("run %d's queue.updated: %v", i+2, q)
		}
		if evs[len(evs)-1].Type != protocol.EventDone {
			t.Fatalf("run %d ended %s", i+2, evs[len(evs)-1].Type)
		}
		prevEnd = evs
	}
	if st := getSessionStatus(t, th, run.SessionID); st.QueueDepth != 0 || st.RunID != m.Runs[3] {
		t.Fatalf("session after the queue: %+v", st)
	}
}

// Queueing on an idle session starts a run at once.
func testQueueOnIdle(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	first := start(t, tr, "", `"tokens":3,"token_ms":0,"tools":0`)
	terminal(t, th, first.RunID)
	res := queue(t, tr, first.SessionID, "while idle", "", "")
	want(t, res, protocol.ResultAccepted, "queue on an idle session")
	if res.RunID == "" || res.RunID == first.RunID || res.EventID != protocol.EventID(res.RunID, 1) {
		t.Fatalf("queue on idle: %+v, want a new run", res)
	}
	if p := runStarted(t, th, res.RunID); p.Source != "queue" || p.Message != "while idle" {
		t.Fatalf("run started with %+v", p)
	}
	evs := terminal(t, th, res.RunID)
	if evs[len(evs)-1].Type != protocol.EventDone {
		t.Fatalf("run ended %s", evs[len(evs)-1].Type)
	}
	// Like every run of a queued message: run.started, then the queue left.
	if evs[1].Type != protocol.EventQueueUpdated || pl[protocol.QueueUpdatedPayload](t, evs[1]).Depth != 0 {
		t.Fatalf("the run's second event is %s %s, want queue.updated with depth 0", evs[1].Type, evs[1].Payload)
	}
	settled(t, th, first.SessionID, 2)

	// A session that never ran starts too.
	sid := newSession(t, th)
	res = queue(t, tr, sid, "first words", "", "")
	want(t, res, protocol.ResultAccepted, "queue on a new session")
	if res.RunID == "" {
		t.Fatalf("queue on a new session: %+v", res)
	}
	want(t, cancelRun(t, tr, res.RunID), protocol.ResultAccepted, "cancel the started run")
	terminal(t, th, res.RunID)
}

// Repeating a queue request with the same key (WS control id, HTTP
// Idempotency-Key) does not enqueue twice, on an active or an idle session.
func testQueueIdempotent(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	run := start(t, tr, "", `"tokens":60,"token_ms":10,"tools":0`)
	sid := run.SessionID
	want(t, queue(t, tr, sid, "once", "", "key-1"), protocol.ResultAccepted, "queue")
	dup := queue(t, tr, sid, "once", "", "key-1")
	want(t, dup, protocol.ResultNotActive, "repeated queue")
	want(t, queue(t, tr, sid, "twice", "", "key-2"), protocol.ResultAccepted, "queue with another key")
	if q := sessionMeta(t, th, sid).Queue; len(q) != 2 || q[0].Message != "once" || q[1].Message != "twice" {
		t.Fatalf("queue %+v, want once, twice", q)
	}
	m := settled(t, th, sid, 3)
	if got := len(ofType(journalEvents(t, th, run.RunID), protocol.EventQueueUpdated)); got != 2 {
		t.Fatalf("%d queue.updated events on the active run, want 2", got)
	}
	for i, msg := range []string{"once", "twice"} {
		terminal(t, th, m.Runs[i+1])
		if p := runStarted(t, th, m.Runs[i+1]); p.Message != msg {
			t.Fatalf("run %d message %q, want %q", i+2, p.Message, msg)
		}
	}
	// Idle: the first request starts a run, its repeat starts nothing.
	res := queue(t, tr, sid, "idle", "", "key-3")
	want(t, res, protocol.ResultAccepted, "queue on idle")
	want(t, queue(t, tr, sid, "idle", "", "key-3"), protocol.ResultNotActive, "repeated queue on idle")
	terminal(t, th, res.RunID)
	settled(t, th, sid, 4)
	noNewRun(t, th, sid, 4)
}

// Steer hands the text to the running run (a progress event "steered:
// <text>"), enqueues nothing, and is not-active without an active run.
func testSteer(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	idle := newSession(t, th)
	want(t, queue(t, tr, idle, "nobody listens", protocol.ModeSteer, ""), protocol.ResultNotActive, "steer on a session without runs")

	run := start(t, tr, "", `"tokens":100,"token_ms":10,"tools":0`)
	waitEvent(t, th, run.RunID, "a token", isType(protocol.EventTokenDelta))
	res := queue(t, tr, run.SessionID, "go left", protocol.ModeSteer, "")
	want(t, res, protocol.ResultAccepted, "steer")
	if res.RunID != run.RunID {
		t.Fatalf("steer result %+v", res)
	}
	evs := terminal(t, th, run.RunID)
	steered, recorded := 0, 0
	for _, e := range ofType(evs, protocol.EventProgress) {
		p := pl[protocol.ProgressPayload](t, e)
		if p.Text == "steered: go left" {
			steered++
		}
		// The user's guidance is journaled as it is accepted: the result
		// names that event.
		if p.Steer == "go left" && p.Text == "guidance: go left" {
			recorded++
			if res.EventID != e.EventID {
				t.Fatalf("steer result event %q, the steer record is %s", res.EventID, e.EventID)
			}
		}
	}
	if steered != 1 || recorded != 1 {
		t.Fatalf("%d progress events \"steered: go left\" and %d steer records, want 1 and 1", steered, recorded)
	}
	if evs[len(evs)-1].Type != protocol.EventDone {
		t.Fatalf("steered run ended %s", evs[len(evs)-1].Type)
	}
	want(t, queue(t, tr, run.SessionID, "too late", protocol.ModeSteer, ""), protocol.ResultNotActive, "steer after the run ended")
	if m := sessionMeta(t, th, run.SessionID); len(m.Queue) != 0 || len(m.Runs) != 1 {
		t.Fatalf("steer enqueued work: queue %+v, runs %v", m.Queue, m.Runs)
	}
	noNewRun(t, th, run.SessionID, 1)
}

// --- 3c: goal ------------------------------------------------------------

// goalSession returns a session whose latest run ran the given script, so
// that goal runs (which inherit it) are short.
func goalSession(t testing.TB, th *testHub, tr transport, script string) string {
	t.Helper()
	base := start(t, tr, "", script)
	terminal(t, th, base.RunID)
	return base.SessionID
}

func goalState(t testing.TB, th *testHub, sid string) *protocol.GoalUpdatedPayload {
	t.Helper()
	return sessionMeta(t, th, sid).Goal
}

func goalEvents(t testing.TB, th *testHub, runID string) []protocol.GoalUpdatedPayload {
	t.Helper()
	var out []protocol.GoalUpdatedPayload
	for _, e := range ofType(journalEvents(t, th, runID), protocol.EventGoalUpdated) {
		out = append(out, pl[protocol.GoalUpdatedPayload](t, e))
	}
	return out
}

// A goal "turns=2" set on an idle session makes two runs (source goal), then
// is done: in SessionStatus and as a goal.updated event.
func testGoalTurns(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	sid := goalSession(t, th, tr, `"tokens":3,"token_ms":0,"tools":0`)
	res := goal(t, tr, sid, protocol.GoalSet, "turns=2")
	want(t, res, protocol.ResultAccepted, "goal set")
	waitFor(t, 30*time.Second, "goal done", func() bool {
		g := goalState(t, th, sid)
		return g != nil && g.State == protocol.GoalDone
	})
	m := settled(t, th, sid, 3)
	for i, rid := range m.Runs[1:] {
		evs := terminal(t, th, rid)
		if p := runStarted(t, th, rid); p.Source != "goal" || p.Message != "turns=2" {
			t.Fatalf("goal run %d started with %+v", i+1, p)
		}
		if evs[len(evs)-1].Type != protocol.EventDone {
			t.Fatalf("goal run %d ended %s", i+1, evs[len(evs)-1].Type)
		}
	}
	g2 := goalEvents(t, th, m.Runs[2])
	if len(g2) == 0 || g2[len(g2)-1].State != protocol.GoalDone || g2[len(g2)-1].Text != "turns=2" {
		t.Fatalf("last goal run's goal.updated events %+v, want done last", g2)
	}
	st := tr.Session(t, sid, "goal done", func(s protocol.SessionStatus) bool { return s.Goal != nil && s.Goal.State == protocol.GoalDone })
	if st.Goal.Text != "turns=2" || st.RunID != m.Runs[2] {
		t.Fatalf("session status %+v goal %+v", st, st.Goal)
	}
	want(t, goal(t, tr, sid, protocol.GoalStatus, ""), protocol.ResultAccepted, "goal status")
	noNewRun(t, th, sid, 3)
}

// A paused goal does not continue after the active run; resume continues
// it to done. Pausing twice and asking status report one state.
func testGoalPauseResume(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	sid := goalSession(t, th, tr, `"tokens":60,"token_ms":10,"tools":0`)
	want(t, goal(t, tr, sid, protocol.GoalSet, "turns=3"), protocol.ResultAccepted, "goal set")
	var g1 string
	waitFor(t, 10*time.Second, "the first goal run", func() bool {
		m := sessionMeta(t, th, sid)
		g1 = m.ActiveRun
		return len(m.Runs) == 2 && g1 != ""
	})
	p1 := goal(t, tr, sid, protocol.GoalPause, "")
	want(t, p1, protocol.ResultAccepted, "pause")
	p2 := goal(t, tr, sid, protocol.GoalPause, "")
	want(t, p2, protocol.ResultAccepted, "second pause")
	s := goal(t, tr, sid, protocol.GoalStatus, "")
	if p1.Message != p2.Message || p1.Message != s.Message || !strings.Contains(s.Message, protocol.GoalPaused) {
		t.Fatalf("pause, pause, status answered %q, %q, %q: want one paused state", p1.Message, p2.Message, s.Message)
	}
	if p1.RunID != g1 || p1.EventID == "" || p2.EventID != "" {
		t.Fatalf("pause results %+v, %+v: want the first to journal on the active run, the second nothing", p1, p2)
	}
	evs := terminal(t, th, g1)
	paused := 0
	for _, e := range ofType(evs, protocol.EventGoalUpdated) {
		if pl[protocol.GoalUpdatedPayload](t, e).State == protocol.GoalPaused {
			paused++
		}
	}
	if paused != 1 {
		t.Fatalf("%d goal.updated paused events, want 1", paused)
	}
	settled(t, th, sid, 2)
	noNewRun(t, th, sid, 2)
	st := tr.Session(t, sid, "goal paused", func(s protocol.SessionStatus) bool {
		return s.Terminal && s.Goal != nil && s.Goal.State == protocol.GoalPaused
	})
	if !sameList(st.ActiveControls, idleControls) {
		t.Fatalf("idle session with a paused goal lists %v", st.ActiveControls)
	}

	want(t, goal(t, tr, sid, protocol.GoalResume, ""), protocol.ResultAccepted, "resume")
	waitFor(t, 30*time.Second, "goal done", func() bool {
		g := goalState(t, th, sid)
		return g != nil && g.State == protocol.GoalDone
	})
	m := settled(t, th, sid, 4)
	for _, rid := range m.Runs[2:] {
		terminal(t, th, rid)
		if p := runStarted(t, th, rid); p.Source != "goal" {
			t.Fatalf("run after resume has source %q", p.Source)
		}
	}
	tr.Session(t, sid, "goal done", func(s protocol.SessionStatus) bool { return s.Goal != nil && s.Goal.State == protocol.GoalDone })
}

// Clear ends a goal (cleared) and is safe to repeat; status is safe to
// repeat and writes nothing; pause/resume without a live goal are
// not-active.
func testGoalClearStatus(t *testing.T, nt newTransport) {
	th := newTestHub(t, hub.Config{})
	tr := nt(t, th)
	run := start(t, tr, "", `"tokens":150,"token_ms":10,"tools":0`)
	sid := run.SessionID
	want(t, goal(t, tr, sid, protocol.GoalPause, ""), protocol.ResultNotActive, "pause without a goal")
	want(t, goal(t, tr, sid, protocol.GoalResume, ""), protocol.ResultNotActive, "resume without a goal")
	want(t, goal(t, tr, sid, protocol.GoalStatus, ""), protocol.ResultAccepted, "status without a goal")

	set := goal(t, tr, sid, protocol.GoalSet, "write the docs")
	want(t, set, protocol.ResultAccepted, "set")
	if set.RunID != run.RunID || set.EventID == "" {
		t.Fatalf("set on an active run: %+v", set)
	}
	for i := 0; i < 3; i++ {
		s := goal(t, tr, sid, protocol.GoalStatus, "")
		want(t, s, protocol.ResultAccepted, "status")
		if s.EventID != "" || !strings.Contains(s.Message, protocol.GoalActive) {
			t.Fatalf("status %d: %+v", i, s)
		}
	}
	if got := len(goalEvents(t, th, run.RunID)); got != 1 {
		t.Fatalf("%d goal.updated events after set and three statuses, want 1", got)
	}
	c1 := goal(t, tr, sid, protocol.GoalClear, "")
	c2 := goal(t, tr, sid, protocol.GoalClear, "")
	want(t, c1, protocol.ResultAccepted, "clear")
	want(t, c2, protocol.ResultAccepted, "second clear")
	if c1.Message != c2.Message || !strings.Contains(c1.Message, protocol.GoalCleared) || c1.EventID == "" || c2.EventID != "" {
		t.Fatalf("clear, clear: %+v, %+v", c1, c2)
	}
	want(t, goal(t, tr, sid, protocol.GoalPause, ""), protocol.ResultNotActive, "pause a cleared goal")
	want(t, goal(t, tr, sid, protocol.GoalResume, ""), protocol.ResultNotActive, "resume a cleared goal")
	if s := goal(t, tr, sid, protocol.GoalStatus, ""); !strings.Contains(s.Message, protocol.GoalCleared) {
		t.Fatalf("status after clear: %+v", s)
	}
	states := []string{}
	for _, g := range goalEvents(t, th, run.RunID) {
		states = append(states, g.State)
	}
	if !slices.Equal(states, []string{protocol.GoalActive, protocol.GoalCleared}) {
		t.Fatalf("goal.updated states %v, want active, cleared", states)
	}
	tr.Session(t, sid, "goal cleared", func(s protocol.SessionStatus) bool { return s.Goal != nil && s.Goal.State == protocol.GoalCleared })
	terminal(t, th, run.RunID)
	settled(t, th, sid, 1)
	noNewRun(t, th, sid, 1)
}

// The continuation guard pauses a runaway goal after MaxGoalContinuations
// runs, with a reason in goal.updated.
func testGoalMaxContinuations(t *testing.T, nt newTransport) {
	th := newTestHubRuntime(t, hub.Config{}, runtimeOpts{Adapter: executor.Options{MaxGoalContinuations: 2}})
	tr := nt(t, th)
	sid := goalSession(t, th, tr, `"tokens":2,"token_ms":0,"tools":0`)
	want(t, goal(t, tr, sid, protocol.GoalSet, "turns=50"), protocol.ResultAccepted, "goal set")
	waitFor(t, 30*time.Second, "goal paused", func() bool {
		g := goalState(t, th, sid)
		return g != nil && g.State == protocol.GoalPaused
	})
	m := settled(t, th, sid, 3)
	for _, rid := range m.Runs[1:] {
		terminal(t, th, rid)
		if p := runStarted(t, th, rid); p.Source != "goal" {
			t.Fatalf("goal run source %q", p.Source)
		}
	}
	last := goalEvents(t, th, m.Runs[2])
	if len(last) == 0 || last[len(last)-1].State != protocol.GoalPaused || last[len(last)-1].Reason == "" {
		t.Fatalf("last goal run's goal.updated %+v, want paused with a reason", last)
	}
	checkSafe(t, "goal reason", last[len(last)-1].Reason)
	st := tr.Session(t, sid, "goal paused", func(s protocol.SessionStatus) bool { return s.Goal != nil && s.Goal.State == protocol.GoalPaused })
	if st.Goal.Reason == "" {
		t.Fatalf("session goal %+v without a reason", st.Goal)
	}
	noNewRun(t, th, sid, 3)
}

// --- controls lists -----------------------------------------------------

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
		if e.Type != protocol.EventStatus || pl[protocol.StatusPayload](t, e).Status != protocol.StatusCancelling {
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
	live := th.dial(t)
	if err := live.Focus(ctx, sid, ""); err != nil {
		t.Fatal(err)
	}
	liveCol := newCollector()
	liveCol.until(t, live, 10*time.Second, "replayed of the empty session", func() bool { return len(liveCol.replayed) == 1 })

	r1 := start(t, tr, sid, `"approval":true,"clarify":true,"tools":1,"tokens":20,"token_ms":10`)
	areq := pl[protocol.ApprovalRequestedPayload](t, waitEvent(t, th, r1.RunID, "approval", isType(protocol.EventApprovalReq)))
	want(t, approve(t, tr, r1.RunID, areq.ApprovalID, "once"), protocol.ResultAccepted, "approve")
	creq := pl[protocol.ClarifyRequestedPayload](t, waitEvent(t, th, r1.RunID, "clarify", isType(protocol.EventClarifyReq)))
	want(t, goal(t, tr, sid, protocol.GoalSet, "keep going"), protocol.ResultAccepted, "goal set")
	want(t, queue(t, tr, sid, "and then this", "", ""), protocol.ResultAccepted, "queue")
	want(t, answer(t, tr, r1.RunID, creq.ClarifyID, "short"), protocol.ResultAccepted, "clarify")
	terminal(t, th, r1.RunID)

	// The queued message runs next, inheriting the script: answer it too.
	r2 := nthRun(t, th, sid, 2)
	areq = pl[protocol.ApprovalRequestedPayload](t, waitEvent(t, th, r2, "approval", isType(protocol.EventApprovalReq)))
	want(t, approve(t, tr, r2, areq.ApprovalID, "deny"), protocol.ResultAccepted, "deny")
	creq = pl[protocol.ClarifyRequestedPayload](t, waitEvent(t, th, r2, "clarify", isType(protocol.EventClarifyReq)))
	want(t, goal(t, tr, sid, protocol.GoalPause, ""), protocol.ResultAccepted, "goal pause")
	want(t, answer(t, tr, r2, creq.ClarifyID, "detailed"), protocol.ResultAccepted, "clarify")
	terminal(t, th, r2)
	settled(t, th, sid, 2)

	liveCol.until(t, live, 20*time.Second, "both runs live", func() bool { return liveCol.terminalOf(r2) })
	checkRun(t, liveCol.events, r1.RunID)
	checkRun(t, liveCol.events, r2)
	liveHist := history(liveCol.events)
	counts := map[protocol.EventType]int{}
	for _, e := range liveCol.events {
		counts[e.Type]++
	}
	if counts[protocol.EventApprovalReq] != 2 || counts[protocol.EventApprovalRes] != 2 || counts[protocol.EventClarifyReq] != 2 ||
		counts[protocol.EventClarifyRes] != 2 || counts[protocol.EventQueueUpdated] != 2 || counts[protocol.EventGoalUpdated] != 2 {
		t.Fatalf("live history counts %v", counts)
	}

	fresh := th.dial(t)
	if err := fresh.Focus(ctx, sid, protocol.EventID(r1.RunID, 0)); err != nil {
		t.Fatal(err)
	}
	freshCol := newCollector()
	freshCol.until(t, fresh, 20*time.Second, "replay", func() bool { return len(freshCol.replayed) == 1 })
	if len(freshCol.errors) > 0 {
		t.Fatalf("replay errors %+v", freshCol.errors)
	}
	if got := history(freshCol.events); !slices.Equal(got, liveHist) {
		t.Fatalf("replayed history differs from the live one:\nlive   %q\nreplay %q", liveHist, got)
	}
	if len(freshCol.events) != len(liveCol.events) {
		t.Fatalf("replay has %d events, live had %d", len(freshCol.events), len(liveCol.events))
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
	freshCol.until(t, fresh, 10*time.Second, "status", func() bool { _, ok := freshCol.statuses[sid]; return ok })
	if st := freshCol.statuses[sid]; st.RunID != r2 || st.QueueDepth != 0 || st.Goal == nil || st.Goal.State != protocol.GoalPaused ||
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
	th.fault.failing.Store(true)
	for _, m := range every {
		res, perr := tr.Control(t, m, "")
		if perr == nil || perr.Code != protocol.CodeInternal {
			t.Fatalf("%s with a failing journal: %+v %+v, want internal", m.Op, res, perr)
		}
	}
	th.fault.failing.Store(false)
	want(t, goal(t, tr, sid, protocol.GoalStatus, ""), protocol.ResultAccepted, "status once the journal recovers")

	// The journal goes away: every answer is still safe; none may be
	// accepted.
	th.store.Close()
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
