package adaptertest

import (
	"context"
	"sync/atomic"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// CountingStore is a journal that counts the run and session metas read
// through it (Run, Session): a harness wraps each process's journal in one
// and sets Harness.MetaReads to their sum.
type CountingStore struct {
	journal.Store
	reads atomic.Int64
}

// Run implements journal.Log, counted.
func (s *CountingStore) Run(ctx context.Context, id string) (journal.RunMeta, error) {
	s.reads.Add(1)
	return s.Store.Run(ctx, id)
}

// Session implements journal.Registry, counted.
func (s *CountingStore) Session(ctx context.Context, id string) (journal.SessionMeta, error) {
	s.reads.Add(1)
	return s.Store.Session(ctx, id)
}

// Reads is the number of metas read so far.
func (s *CountingStore) Reads() int64 { return s.reads.Load() }

var controlTests = []subtest{
	// Each control of a run reads one meta end to end (the Router, the
	// executor, a runner's listener): the run's, or the session's for a
	// control that names only its session.
	{"OneMetaRead", func(e *env) {
		if e.h.MetaReads == nil {
			e.t.Fatal("the harness counts no meta reads (Harness.MetaReads)")
		}
		ctx, cancel := e.ctx()
		defer cancel()
		counted := func(what string, fn func() (protocol.ControlResult, error)) {
			e.t.Helper()
			before := e.h.MetaReads()
			res, err := fn()
			if err != nil || !res.Accepted {
				e.t.Fatalf("%s: %+v, %v", what, res, err)
			}
			if n := e.h.MetaReads() - before; n != 1 {
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
