package adaptertest

import (
	"context"
	"sync"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// MetaCounter counts the run and session metas (Run, Session) read
// through the stores it wraps (one per process of a harness). Besides the
// total it keeps a window, opened by Begin, that counts a control's own
// reads: it closes at the first event appended through any of its stores
// after Begin, which is the control's effect (the approval resolved, the
// steer, the run's end). The run's own work after that effect (judging
// its goal at the turn's end, draining the session's queue after it) reads
// metas of its own, concurrently with the control returning; those are
// not the control's.
type MetaCounter struct {
	mu     sync.Mutex
	all    int64
	window int64
	open   bool
}

// Wrap returns s counted by c.
func (c *MetaCounter) Wrap(s journal.Store) *CountingStore {
	return &CountingStore{Store: s, c: c}
}

// Begin opens a new window with no reads in it.
func (c *MetaCounter) Begin() {
	c.mu.Lock()
	c.window, c.open = 0, true
	c.mu.Unlock()
}

// Window is the number of metas read since Begin and before the first
// event appended after it.
func (c *MetaCounter) Window() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.window
}

// Reads is the number of metas read so far.
func (c *MetaCounter) Reads() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.all
}

func (c *MetaCounter) read() {
	c.mu.Lock()
	c.all++
	if c.open {
		c.window++
	}
	c.mu.Unlock()
}

func (c *MetaCounter) appended() {
	c.mu.Lock()
	c.open = false
	c.mu.Unlock()
}

// CountingStore is a journal whose meta reads a MetaCounter counts.
type CountingStore struct {
	journal.Store
	c *MetaCounter
}

// Run implements journal.Log, counted.
func (s *CountingStore) Run(ctx context.Context, id string) (journal.RunMeta, error) {
	s.c.read()
	return s.Store.Run(ctx, id)
}

// Session implements journal.Registry, counted.
func (s *CountingStore) Session(ctx context.Context, id string) (journal.SessionMeta, error) {
	s.c.read()
	return s.Store.Session(ctx, id)
}

// Append implements journal.Log; it closes the counter's window.
func (s *CountingStore) Append(ctx context.Context, e protocol.Envelope, key string) (protocol.Envelope, error) {
	s.c.appended()
	return s.Store.Append(ctx, e, key)
}

// Settled waits until the reads of earlier work (a run's start, the work
// after an earlier run's end) are over: no read for 100 ms. It reports
// false if reads never stopped within 5 s.
func (c *MetaCounter) Settled() bool {
	n := c.Reads()
	stable := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		m := c.Reads()
		if m == n {
			if stable++; stable == 5 {
				return true
			}
			continue
		}
		n, stable = m, 0
	}
	return false
}

var controlTests = []subtest{
	// Each control of a run reads one meta end to end (the Router, the
	// executor, a runner's listener): the run's, or the session's for a
	// control that names only its session.
	{"OneMetaRead", func(e *env) {
		if e.h.Metas == nil {
			e.t.Fatal("the harness counts no meta reads (Harness.Metas)")
		}
		ctx, cancel := e.ctx()
		defer cancel()
		counted := func(what string, fn func() (protocol.ControlResult, error)) {
			e.t.Helper()
			if !e.h.Metas.Settled() {
				e.t.Fatalf("before %s: meta reads never settled", what)
			}
			e.h.Metas.Begin()
			res, err := fn()
			if err != nil || !res.Accepted {
				e.t.Fatalf("%s: %+v, %v", what, res, err)
			}
			if n := e.h.Metas.Window(); n != 1 {
				e.t.Errorf("%s read %d metas; want 1", what, n)
			}
		}
		r := e.start("", ScriptApproval)
		id := approval.id(e, e.waitEvent(r.RunID, ofType(protocol.EventApprovalReq)))
		counted("approve", func() (protocol.ControlResult, error) { return e.approve(ctx, r.RunID, id, "allow") })
		e.events(r.RunID)

		r = e.start(r.SessionID, ScriptClarify)
		id = clarify.id(e, e.waitEvent(r.RunID, ofType(protocol.EventClarifyReq)))
		counted("clarify", func() (protocol.ControlResult, error) { return e.clarify(ctx, r.RunID, id, "short") })
		e.events(r.RunID)

		r = e.startReady(r.SessionID, ScriptBlock)
		counted("steer", func() (protocol.ControlResult, error) {
			return e.queue(ctx, r.SessionID, protocol.QueueRequest{Message: "left", Mode: protocol.ModeSteer}, "")
		})
		counted("steer with a key", func() (protocol.ControlResult, error) {
			return e.queue(ctx, r.SessionID, protocol.QueueRequest{Message: "right", Mode: protocol.ModeSteer}, "k1")
		})
		counted("cancel", func() (protocol.ControlResult, error) { return e.cancel(ctx, r.RunID) })
		e.events(r.RunID)

		r = e.startReady(r.SessionID, ScriptBlock)
		counted("cancel by session", func() (protocol.ControlResult, error) {
			return e.control(ctx, Owner, protocol.Control{Op: protocol.OpCancel, SessionID: r.SessionID}, "")
		})
		e.events(r.RunID)
	}},
	// Another owner's run or session is unknown to every control.
	{"Stranger", func(e *env) {
		ctx, cancel := e.ctx()
		defer cancel()
		r := e.startReady("", ScriptBlock)
		for _, m := range []protocol.Control{
			{Op: protocol.OpCancel, RunID: r.RunID},
			{Op: protocol.OpCancel, SessionID: r.SessionID},
			{Op: protocol.OpApprove, RunID: r.RunID, ApprovalID: "a_1", Choice: "allow"},
			{Op: protocol.OpClarify, RunID: r.RunID, ClarifyID: "c_1", Response: "short"},
			{Op: protocol.OpQueue, SessionID: r.SessionID, Message: "done"},
			{Op: protocol.OpQueue, SessionID: r.SessionID, Message: "left", Mode: protocol.ModeSteer},
			{Op: protocol.OpGoal, SessionID: r.SessionID, Action: protocol.GoalSet, Text: "done"},
			{Op: protocol.OpStart, SessionID: r.SessionID, Message: "done"},
		} {
			_, err := e.control(ctx, Stranger, m, "")
			e.wantNotFound("a stranger's "+m.Op+" "+m.Mode, err)
		}
		if st, err := e.a.GetRun(ctx, r.RunID); err != nil || st.Status != protocol.StatusRunning {
			e.t.Errorf("after a stranger's controls GetRun = %+v, %v; want running", st, err)
		}
		if res, err := e.cancel(ctx, r.RunID); err != nil || !res.Accepted {
			e.t.Fatalf("the owner's cancel: %+v, %v", res, err)
		}
		for _, ev := range e.events(r.RunID) {
			if (ev.Type == protocol.EventProgress && !isReady(ev)) || ev.Type == protocol.EventGoalUpdated || ev.Type == protocol.EventQueueUpdated {
				e.t.Errorf("a stranger's control reached the run: %s", types(e.events(r.RunID)))
			}
		}
	}},
}
