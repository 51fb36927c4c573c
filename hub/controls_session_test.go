package hub_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/protocol"
)

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
	p := hubtest.Payload[protocol.QueueUpdatedPayload](t, ev)
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
	if q := ofType(evs, protocol.EventQueueUpdated); len(q) != 1 || hubtest.Payload[protocol.QueueUpdatedPayload](t, q[0]).Depth != 0 {
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
		p := hubtest.Payload[protocol.QueueUpdatedPayload](t, ev)
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
		p := hubtest.Payload[protocol.RunStartedPayload](t, evs[0])
		if p.Source != "queue" || p.Message != msgs[i] {
			t.Fatalf("run %d started with %+v, want %q from the queue", i+2, p, msgs[i])
		}
		if evs[0].CreatedAt < prevEnd[len(prevEnd)-1].CreatedAt {
			t.Fatalf("run %d started before the previous run ended", i+2)
		}
		if q := ofType(evs, protocol.EventQueueUpdated); len(q) != 1 || hubtest.Payload[protocol.QueueUpdatedPayload](t, q[0]).Depth != 2-i {
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
	if evs[1].Type != protocol.EventQueueUpdated || hubtest.Payload[protocol.QueueUpdatedPayload](t, evs[1]).Depth != 0 {
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
		p := hubtest.Payload[protocol.ProgressPayload](t, e)
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
		out = append(out, hubtest.Payload[protocol.GoalUpdatedPayload](t, e))
	}
	return out
}

// A goal "turns=2" set on an idle session makes two runs (source goal, the
// goal's text then the continuation prompt), then is done: in
// SessionStatus and as a goal.updated event.
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
		message := "turns=2" // the first goal run's message is the goal; later ones continue it
		if i > 0 {
			message = executor.ContinuationPrompt("turns=2")
		}
		if p := runStarted(t, th, rid); p.Source != "goal" || p.Message != message {
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
		if hubtest.Payload[protocol.GoalUpdatedPayload](t, e).State == protocol.GoalPaused {
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
