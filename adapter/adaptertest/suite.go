package adaptertest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/protocol"
)

// Setup is what every executor a harness builds must carry.
type Setup struct {
	// Drivers are registered in every executor (executor.Options.Drivers),
	// the hub's and the runners' alike.
	Drivers map[string]driver.Driver
	// DefaultDriver is every executor's executor.Options.DefaultDriver.
	DefaultDriver string
	// Capabilities is every executor's executor.Options.Capabilities:
	// DriverNamePlain can do less than the suite's other drivers.
	Capabilities adapter.Capabilities
}

// Harness is one adapter under test, fresh for each subtest. Its builder
// registers t.Cleanup to close what it started.
type Harness struct {
	Adapter adapter.RuntimeAdapter
	// Dispatched says starts are handed to another executor
	// (executor.Options.Dispatch): StartRun answers status queued with the
	// cursor <run>:0 instead of running with the run.started cursor
	// <run>:1, and so does a queue control that starts a run.
	Dispatched bool
	// Metas, when set, counts the run and session metas read from the
	// journal by every process of the harness (each process's journal
	// wrapped by Metas.Wrap): the suite checks each control of a run reads
	// one.
	Metas *MetaCounter
}

// NewHarness builds a Harness with s's drivers.
type NewHarness func(t *testing.T, s Setup) Harness

// Owner owns every session the suite makes; Stranger owns none.
const (
	Owner    = "conformance-owner"
	Stranger = "conformance-stranger"
)

// waitFor bounds every wait for something asynchronous.
const waitFor = 20 * time.Second

// Run runs every conformance subtest against the adapters newHarness builds.
func Run(t *testing.T, newHarness NewHarness) {
	groups := []struct {
		name  string
		tests []subtest
	}{
		{"StartRun", startTests},
		{"GetRun", getTests},
		{"ObserveRun", observeTests},
		{"CancelRun", cancelTests},
		{"Respond", respondTests},
		{"QueueMessage", queueTests},
		{"Steer", steerTests},
		{"UpdateGoal", goalTests},
		{"Control", controlTests},
		{"Capabilities", capabilityTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, st := range g.tests {
				t.Run(st.name, func(t *testing.T) {
					drivers, rec := newDrivers()
					h := newHarness(t, Setup{Drivers: drivers, DefaultDriver: DriverName, Capabilities: capabilities})
					st.fn(&env{t: t, h: h, a: h.Adapter, rec: rec})
				})
			}
		})
	}
}

// subtest is one named conformance check.
type subtest struct {
	name string
	fn   func(e *env)
}

// env is one subtest's adapter and helpers.
type env struct {
	t   *testing.T
	h   Harness
	a   adapter.RuntimeAdapter
	rec *record
}

func (e *env) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), waitFor)
}

// control sends m for owner with key through the adapter's Control.
func (e *env) control(ctx context.Context, owner string, m protocol.Control, key string) (protocol.ControlResult, error) {
	return e.a.Control(ctx, adapter.NewControl(&m, owner, key))
}

// cancel cancels a run of Owner's.
func (e *env) cancel(ctx context.Context, runID string) (protocol.ControlResult, error) {
	return e.control(ctx, Owner, protocol.Control{Op: protocol.OpCancel, RunID: runID}, "")
}

// approve answers an approval of a run of Owner's.
func (e *env) approve(ctx context.Context, runID, approvalID, choice string) (protocol.ControlResult, error) {
	return e.control(ctx, Owner, protocol.Control{Op: protocol.OpApprove, RunID: runID, ApprovalID: approvalID, Choice: choice}, "")
}

// clarify answers a clarify of a run of Owner's.
func (e *env) clarify(ctx context.Context, runID, clarifyID, response string) (protocol.ControlResult, error) {
	return e.control(ctx, Owner, protocol.Control{Op: protocol.OpClarify, RunID: runID, ClarifyID: clarifyID, Response: response}, "")
}

// queue queues (or, in mode steer, steers) a message in a session of
// Owner's.
func (e *env) queue(ctx context.Context, sid string, req protocol.QueueRequest, key string) (protocol.ControlResult, error) {
	return e.control(ctx, Owner, protocol.Control{Op: protocol.OpQueue, SessionID: sid, Message: req.Message, Mode: req.Mode}, key)
}

// goal changes the goal of a session of Owner's.
func (e *env) goal(ctx context.Context, sid string, req protocol.GoalRequest) (protocol.ControlResult, error) {
	return e.control(ctx, Owner, protocol.Control{Op: protocol.OpGoal, SessionID: sid, Action: req.Action, Text: req.Text}, "")
}

// start starts a run of script in sid (a new session when empty) and fails
// the test when the start is refused.
func (e *env) start(sid, message string) protocol.RunStartResult {
	e.t.Helper()
	return e.startReq(protocol.StartRunRequest{SessionID: sid, Message: message})
}

func (e *env) startReq(req protocol.StartRunRequest) protocol.RunStartResult {
	e.t.Helper()
	ctx, cancel := e.ctx()
	defer cancel()
	r, err := e.a.StartRun(ctx, Owner, req)
	if err != nil {
		e.t.Fatalf("StartRun(%q): %v", req.Message, err)
	}
	return r
}

// startReady starts a run and waits until its driver runs (Ready).
func (e *env) startReady(sid, message string) protocol.RunStartResult {
	e.t.Helper()
	r := e.start(sid, message)
	e.waitEvent(r.RunID, isReady)
	return r
}

// events waits for the run's terminal event and returns all its events.
func (e *env) events(runID string) []protocol.Envelope {
	e.t.Helper()
	return e.observe(runID, 0)
}

// observe reads the run from afterSeq until the observation ends; it fails
// the test unless the last event is terminal.
func (e *env) observe(runID string, afterSeq uint64) []protocol.Envelope {
	e.t.Helper()
	ctx, cancel := e.ctx()
	defer cancel()
	var out []protocol.Envelope
	for ev, err := range e.a.ObserveRun(ctx, runID, afterSeq) {
		if err != nil {
			e.t.Fatalf("ObserveRun(%s, %d): %v after %s", runID, afterSeq, err, types(out))
		}
		out = append(out, ev)
	}
	if len(out) > 0 && !out[len(out)-1].Terminal {
		e.t.Fatalf("ObserveRun(%s, %d) ended without a terminal event: %s", runID, afterSeq, types(out))
	}
	return out
}

// waitEvent waits for the run's first event for which match is true.
func (e *env) waitEvent(runID string, match func(protocol.Envelope) bool) protocol.Envelope {
	e.t.Helper()
	ctx, cancel := e.ctx()
	defer cancel()
	var seen []protocol.Envelope
	for ev, err := range e.a.ObserveRun(ctx, runID, 0) {
		if err != nil {
			break
		}
		if match(ev) {
			return ev
		}
		seen = append(seen, ev)
	}
	e.t.Fatalf("run %s: no such event within %v; saw %s", runID, waitFor, types(seen))
	return protocol.Envelope{}
}

// waitRun waits until the suite's driver executes a run of sid with message.
func (e *env) waitRun(sid, message string) Started {
	e.t.Helper()
	ctx, cancel := e.ctx()
	defer cancel()
	s, ok := e.rec.wait(ctx, func(s Started) bool { return s.SessionID == sid && s.Message == message })
	if !ok {
		e.t.Fatalf("no run of %q started in session %s within %v", message, sid, waitFor)
	}
	return s
}

// cancelAndEnd cancels a run and waits for its end (cleanup of a blocking
// run).
func (e *env) cancelAndEnd(runID string) []protocol.Envelope {
	e.t.Helper()
	ctx, cancel := e.ctx()
	defer cancel()
	res, err := e.cancel(ctx, runID)
	if err != nil || !res.Accepted {
		e.t.Fatalf("CancelRun(%s) = %+v, %v; want accepted", runID, res, err)
	}
	return e.events(runID)
}

// wantResult checks a ControlResult's status, Accepted, RunID and SessionID
// ("-": not checked).
func (e *env) wantResult(what string, res protocol.ControlResult, err error, status, runID, sid string) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: error %v; want status %s", what, err, status)
	}
	if res.Status != status || res.Accepted != (status == protocol.ResultAccepted) {
		e.t.Fatalf("%s = %+v; want status %s (accepted %v)", what, res, status, status == protocol.ResultAccepted)
	}
	if runID != "-" && res.RunID != runID {
		e.t.Errorf("%s: run_id %q; want %q", what, res.RunID, runID)
	}
	if sid != "-" && res.SessionID != sid {
		e.t.Errorf("%s: session_id %q; want %q", what, res.SessionID, sid)
	}
}

// wantMessage checks a ControlResult's message (protocol.md lists them).
func (e *env) wantMessage(res protocol.ControlResult, message string) {
	e.t.Helper()
	if res.Message != message {
		e.t.Errorf("%s result message %q; want %q", res.Status, res.Message, message)
	}
}

// wantCode checks that err is a *protocol.Error with code.
func (e *env) wantCode(what string, err error, code protocol.Code) {
	e.t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != code {
		e.t.Fatalf("%s: error %v; want a protocol error %s", what, err, code)
	}
}

// wantNotFound checks that err is adapter.ErrNotFound.
func (e *env) wantNotFound(what string, err error) {
	e.t.Helper()
	if !errors.Is(err, adapter.ErrNotFound) {
		e.t.Fatalf("%s: error %v; want adapter.ErrNotFound", what, err)
	}
}

// wantRun checks a run's whole event sequence: seqs 1..n without a gap,
// run.started first, exactly one terminal event, last, of type end.
func (e *env) wantRun(runID string, evs []protocol.Envelope, end protocol.EventType) {
	e.t.Helper()
	if len(evs) == 0 {
		e.t.Fatalf("run %s: no events", runID)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) || ev.RunID != runID || ev.EventID != protocol.EventID(runID, ev.Seq) {
			e.t.Fatalf("run %s: event %d is %s seq %d (%s); want seq %d: %s", runID, i, ev.Type, ev.Seq, ev.EventID, i+1, types(evs))
		}
		if ev.Terminal != (i == len(evs)-1) {
			e.t.Fatalf("run %s: terminal events not exactly the last one: %s", runID, types(evs))
		}
	}
	if evs[0].Type != protocol.EventRunStarted {
		e.t.Fatalf("run %s: first event %s; want run.started: %s", runID, evs[0].Type, types(evs))
	}
	if last := evs[len(evs)-1]; last.Type != end {
		e.t.Fatalf("run %s ended with %s; want %s: %s", runID, last.Type, end, types(evs))
	}
}

// count returns how many events match.
func count(evs []protocol.Envelope, match func(protocol.Envelope) bool) int {
	n := 0
	for _, ev := range evs {
		if match(ev) {
			n++
		}
	}
	return n
}

func find(evs []protocol.Envelope, match func(protocol.Envelope) bool) (protocol.Envelope, bool) {
	i := slices.IndexFunc(evs, match)
	if i < 0 {
		return protocol.Envelope{}, false
	}
	return evs[i], true
}

func ofType(typ protocol.EventType) func(protocol.Envelope) bool {
	return func(ev protocol.Envelope) bool { return ev.Type == typ }
}

func isReady(ev protocol.Envelope) bool { return progressText(ev) == Ready }

// progressText is a progress event's text ("" for other events).
func progressText(ev protocol.Envelope) string {
	if ev.Type != protocol.EventProgress {
		return ""
	}
	p, err := protocol.DecodePayload[protocol.ProgressPayload](&ev)
	if err != nil {
		return ""
	}
	return p.Text
}

// payload decodes an event's payload, failing the test on error.
func payload[T any](t *testing.T, ev protocol.Envelope) T {
	t.Helper()
	p, err := protocol.DecodePayload[T](&ev)
	if err != nil {
		t.Fatalf("%s payload: %v", ev.Type, err)
	}
	return p
}

func types(evs []protocol.Envelope) string {
	s := make([]string, len(evs))
	for i, ev := range evs {
		s[i] = string(ev.Type)
	}
	return "[" + strings.Join(s, " ") + "]"
}
