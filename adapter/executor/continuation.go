package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// maxPreview bounds a queued message's preview in queue.updated.
const maxPreview = 80

var (
	errQueueFull = errors.New("queue full")
	errNoGoal    = errors.New("no goal")
)

// enqueue executes a queue control (mode queue) for owner: the
// message joins the session's FIFO (journaled as queue.updated on the
// active run), or starts a run at once when the session is idle. A
// repeated key does not enqueue twice.
func (a *InProcess) enqueue(ctx context.Context, owner, sid, message, key string) (protocol.ControlResult, error) {
	u := a.store
	id := adapter.NewID("q_")
	startNow := false
	meta, err := u.UpdateSession(ctx, sid, func(m *journal.SessionMeta) error {
		startNow = false
		if m.Owner != owner {
			return journal.ErrNotFound
		}
		if err := adapter.RememberKey(m, key); err != nil {
			return err
		}
		if m.ActiveRun == "" && len(m.Queue) == 0 {
			startNow = true
			return nil
		}
		if len(m.Queue) >= a.opts.MaxQueue {
			return errQueueFull
		}
		m.Queue = append(m.Queue, journal.QueuedMessage{ID: id, Message: message, QueuedAt: protocol.Timestamp(a.opts.Now())})
		return nil
	})
	switch {
	case errors.Is(err, adapter.ErrDuplicate):
		return adapter.Result(protocol.ResultNotActive, "duplicate request: already queued", "", sid, ""), nil
	case errors.Is(err, errQueueFull):
		return adapter.Result(protocol.ResultConflict, "the session's queue is full", "", sid, ""), nil
	case err != nil:
		return protocol.ControlResult{}, notFound(err, "session "+sid)
	}
	if startNow {
		r, err := a.startRun(ctx, meta.Owner, a.inherit(ctx, meta, message, "queue"), func(x *driver.Execution) {
			x.Emit(ctx, protocol.EventQueueUpdated, queuePayload(meta.Queue))
		})
		if err == nil {
			return adapter.Result(protocol.ResultAccepted, "started", r.RunID, sid, r.Cursor), nil
		}
		if !errors.Is(err, adapter.ErrConflict) {
			return protocol.ControlResult{}, err
		}
		// A run began meanwhile: queue behind it instead.
		if meta, err = u.UpdateSession(ctx, sid, func(m *journal.SessionMeta) error {
			m.Queue = append(m.Queue, journal.QueuedMessage{ID: id, Message: message, QueuedAt: protocol.Timestamp(a.opts.Now())})
			return nil
		}); err != nil {
			return protocol.ControlResult{}, err
		}
	}
	eventID := ""
	if meta.ActiveRun != "" {
		e, err := a.appendTo(ctx, meta.ActiveRun, sid, protocol.EventQueueUpdated, queuePayload(meta.Queue))
		if err == nil {
			eventID = e.EventID
		}
	} else {
		a.drain(ctx, sid) // idle with a backlog (e.g. after a crash): start it
	}
	return adapter.Result(protocol.ResultAccepted, "queued", meta.ActiveRun, sid, eventID), nil
}

// errTitled makes adoptTitle's update a no-op: the session has a title.
var errTitled = errors.New("the session has a title")

// adoptTitle names a session that has no title after the first
// title.updated of its runs, so that a later run does not rename it: a
// session keeps the title it was given (session.Session folds the same
// rule). A failure only logs: the run goes on, and its title still shows
// while it is the latest.
func (a *InProcess) adoptTitle(ctx context.Context, sid, title string) {
	u := a.store
	_, err := u.UpdateSession(ctx, sid, func(m *journal.SessionMeta) error {
		if m.Title != "" {
			return errTitled
		}
		m.Title = title
		return nil
	})
	if err != nil && !errors.Is(err, errTitled) {
		a.opts.Logger.Warn("could not keep the run's title as the session's", "session_id", sid, "err", err)
	}
}

func queuePayload(q []journal.QueuedMessage) protocol.QueueUpdatedPayload {
	items := make([]protocol.QueueItem, 0, len(q))
	for _, m := range q {
		items = append(items, protocol.QueueItem{ID: m.ID, Preview: firstLine(m.Message, maxPreview)})
	}
	return protocol.QueueUpdatedPayload{Depth: len(q), Items: items}
}

// inherit builds the request of a follow-up run: the session's latest run's
// runtime settings with a new message and source.
func (a *InProcess) inherit(ctx context.Context, meta journal.SessionMeta, message, source string) protocol.StartRunRequest {
	req := protocol.StartRunRequest{}
	if latest := meta.LatestRun(); latest != "" {
		if rm, err := a.store.Run(ctx, latest); err == nil && len(rm.Request) > 0 {
			_ = json.Unmarshal(rm.Request, &req)
		}
	}
	req.SessionID, req.Message, req.Source, req.Attachments = meta.ID, message, source, nil
	return req
}

// appendTo journals one event of a run from outside its executor.
func (a *InProcess) appendTo(ctx context.Context, runID, sid string, typ protocol.EventType, p any) (protocol.Envelope, error) {
	// A run registered but not started (queued for a runner) gets no event
	// from here: its first event is run.started, written by the executor
	// that takes it (an earlier event would make it look started, and
	// runners refuse to adopt a run with events). The session's status
	// still shows the change: the journal announces every session update
	// (journal.SessionChanged).
	if rm, err := a.store.Run(ctx, runID); err != nil {
		return protocol.Envelope{}, err
	} else if rm.LastSeq == 0 {
		return protocol.Envelope{}, errNotStarted
	}
	e, err := protocol.NewEvent(runID, sid, typ, p)
	if err != nil {
		return e, err
	}
	e.CreatedAt = protocol.Timestamp(a.opts.Now())
	out, err := a.store.Append(ctx, e, "")
	if err != nil && !errors.Is(err, journal.ErrTerminal) {
		a.opts.Logger.Warn("journal session event", "run_id", runID, "type", typ, "err", err)
	}
	return out, err
}

// errNotStarted: the run has not started, so it takes no event yet.
var errNotStarted = errors.New("executor: the run has not started")

// Drain starts the session's next queued message when the session is idle,
// for a run of it that ended without its executor (reaped after its lease
// lapsed); it reports whether a run started.
func (a *InProcess) Drain(ctx context.Context, sid string) bool { return a.drain(ctx, sid) }

// drain starts the session's next queued message when it is idle; it
// reports whether a run started. The message leaves the queue in the same
// journal step that registers its run (journal.Queues.BeginRunUpdate), so
// no crash can lose it or start it twice: a run registered but not started
// is started by Recover (embedded) or by a node's reaper (ResumeStranded).
func (a *InProcess) drain(ctx context.Context, sid string) bool {
	// A queue edit (hub/queueedit.go) may change or remove the head between
	// the read and the pop: the pop then refuses (errHeadMoved) and the
	// drain reads again, so the edited text runs and the next message is
	// not left behind on an idle session. Bounded: each retry follows a
	// change someone else committed.
	for range maxDrainTries {
		started, retry := a.drainOnce(ctx, sid)
		if !retry {
			return started
		}
	}
	a.opts.Logger.Warn("start queued message: the queue kept changing", "session_id", sid, "tries", maxDrainTries)
	return false
}

// maxDrainTries bounds a drain's re-reads of a queue that keeps changing.
const maxDrainTries = 8

// drainOnce is one read-and-pop; retry reports that the head changed
// between the two.
func (a *InProcess) drainOnce(ctx context.Context, sid string) (started, retry bool) {
	meta, err := a.store.Session(ctx, sid)
	if err != nil || meta.ActiveRun != "" || len(meta.Queue) == 0 {
		return false, false
	}
	head := meta.Queue[0]
	var rest protocol.QueueUpdatedPayload
	moved := false // the begin step reports errHeadMoved as a conflict
	pop := func(m *journal.SessionMeta) error {
		moved = len(m.Queue) == 0 || m.Queue[0] != head
		if moved {
			return errHeadMoved
		}
		m.Queue = slices.Clone(m.Queue[1:])
		rest = queuePayload(m.Queue)
		return nil
	}
	_, err = a.startRunWith(ctx, meta.Owner, a.inherit(ctx, meta, head.Message, "queue"), pop, func(x *driver.Execution) {
		x.Emit(ctx, protocol.EventQueueUpdated, rest)
	})
	switch {
	case err == nil:
		return true, false
	case moved:
		// Taken by another drain (the next read sees its run) or edited.
		return false, true
	case errors.Is(err, adapter.ErrConflict):
		// A run began meanwhile.
	default:
		a.opts.Logger.Warn("start queued message", "session_id", sid, "err", err)
	}
	return false, false
}

// errHeadMoved: the queue's head is not the message a drain read (another
// drain took it, or it was edited or removed). A conflict, not a journal
// fault.
var errHeadMoved = fmt.Errorf("executor: the queue's head moved: %w", journal.ErrConflict)

// DrainIdle starts the next queued message of every session that has one
// and no active run (a process stopped between a run's end and the start
// of what was queued behind it); it returns how many runs it started. Call
// it at start-up (Recover does) and, with a shared journal, periodically
// (a node's reaper does).
func (a *InProcess) DrainIdle(ctx context.Context) (int, error) {
	ids, err := a.store.IdleQueues(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, sid := range ids {
		if ctx.Err() != nil {
			break
		}
		if a.drain(ctx, sid) {
			n++
		}
	}
	return n, nil
}

// updateGoal executes a goal control for owner: it
// changes the session's goal state (journaled as goal.updated on the active
// run) and, when a goal is set or resumed on an idle session, lets the
// runtime decide whether to continue.
func (a *InProcess) updateGoal(ctx context.Context, owner, sid string, req protocol.GoalRequest) (protocol.ControlResult, error) {
	u := a.store
	changed := false
	meta, err := u.UpdateSession(ctx, sid, func(m *journal.SessionMeta) error {
		changed = false
		if m.Owner != owner {
			return journal.ErrNotFound
		}
		g := m.Goal
		live := g != nil && (g.State == protocol.GoalActive || g.State == protocol.GoalPaused)
		switch req.Action {
		case protocol.GoalSet:
			m.Goal = &protocol.GoalUpdatedPayload{State: protocol.GoalActive, Text: req.Text}
			changed = true
		case protocol.GoalEdit:
			if !live {
				return errNoGoal
			}
			if g.Text != req.Text {
				m.Goal = &protocol.GoalUpdatedPayload{State: g.State, Text: req.Text, Turns: g.Turns}
				changed = true
			}
		case protocol.GoalPause, protocol.GoalResume:
			if !live {
				return errNoGoal
			}
			want := protocol.GoalPaused
			if req.Action == protocol.GoalResume {
				want = protocol.GoalActive
			}
			if g.State != want {
				m.Goal = &protocol.GoalUpdatedPayload{State: want, Text: g.Text, Turns: g.Turns}
				changed = true
			}
		case protocol.GoalClear:
			if g != nil && g.State != protocol.GoalCleared {
				m.Goal = &protocol.GoalUpdatedPayload{State: protocol.GoalCleared, Text: g.Text, Turns: g.Turns}
				changed = true
			}
		case protocol.GoalStatus:
		default:
			return protocol.Errorf(protocol.CodeBadRequest, "action: unknown goal action %q", req.Action)
		}
		return nil
	})
	var pe *protocol.Error
	switch {
	case errors.Is(err, errNoGoal):
		return adapter.Result(protocol.ResultNotActive, "the session has no goal", "", sid, ""), nil
	case errors.As(err, &pe):
		return protocol.ControlResult{}, pe
	case err != nil:
		return protocol.ControlResult{}, notFound(err, "session "+sid)
	}
	msg := "no goal"
	if meta.Goal != nil {
		msg = "goal " + meta.Goal.State
	}
	eventID := ""
	if changed && meta.ActiveRun != "" {
		if e, err := a.appendTo(ctx, meta.ActiveRun, sid, protocol.EventGoalUpdated, meta.Goal); err == nil {
			eventID = e.EventID
		}
	}
	// On an idle session the runtime decides at once whether an active goal
	// goes on; resume also re-kicks a goal left active by a failed or
	// cancelled run.
	if (changed || req.Action == protocol.GoalResume) && meta.ActiveRun == "" && meta.Goal != nil && meta.Goal.State == protocol.GoalActive {
		switch d := a.evaluate(*meta.Goal); {
		case d.Continue:
			a.startGoalRun(ctx, sid)
		case d.Done:
			if m, err := u.UpdateSession(ctx, sid, func(m *journal.SessionMeta) error {
				if m.Goal == nil || m.Goal.State != protocol.GoalActive {
					return errNoGoal
				}
				m.Goal = &protocol.GoalUpdatedPayload{State: protocol.GoalDone, Text: m.Goal.Text, Turns: m.Goal.Turns, Reason: d.Reason}
				return nil
			}); err == nil {
				msg = "goal " + m.Goal.State
			}
		}
	}
	return adapter.Result(protocol.ResultAccepted, msg, meta.ActiveRun, sid, eventID), nil
}

// evaluate asks the default driver whether an active goal continues.
func (a *InProcess) evaluate(g protocol.GoalUpdatedPayload) driver.GoalDecision {
	if ev, ok := a.opts.Drivers[a.opts.DefaultDriver].(driver.GoalEvaluator); ok {
		return ev.EvaluateGoal(g)
	}
	return driver.GoalDecision{}
}

// postTurn is the goal evaluation at the end of a successful run, before
// its terminal event: it journals the goal's new state on the run and
// reports whether the goal wants another run.
func (a *InProcess) postTurn(ctx context.Context, x *driver.Execution, drv driver.Driver) bool {
	u := a.store
	ev, isEv := drv.(driver.GoalEvaluator)
	if !isEv {
		return false
	}
	cont := false
	meta, err := u.UpdateSession(ctx, x.SessionID, func(m *journal.SessionMeta) error {
		cont = false
		g := m.Goal
		if g == nil || g.State != protocol.GoalActive {
			return errNoGoal
		}
		d := ev.EvaluateGoal(*g)
		switch {
		case d.Done:
			m.Goal = &protocol.GoalUpdatedPayload{State: protocol.GoalDone, Text: g.Text, Turns: g.Turns, Reason: d.Reason}
		case d.Continue && g.Turns >= a.opts.MaxGoalContinuations:
			m.Goal = &protocol.GoalUpdatedPayload{State: protocol.GoalPaused, Text: g.Text, Turns: g.Turns,
				Reason: "paused after the maximum of continuations; resume to go on"}
		case d.Continue:
			cont = true
			return errNoGoal // nothing to write; the next run records its turn
		default:
			return errNoGoal
		}
		return nil
	})
	if err == nil {
		x.Emit(ctx, protocol.EventGoalUpdated, meta.Goal)
	}
	return cont
}

// startGoalRun starts the next run of an active goal, counting its turn.
func (a *InProcess) startGoalRun(ctx context.Context, sid string) {
	u := a.store
	meta, err := u.UpdateSession(ctx, sid, func(m *journal.SessionMeta) error {
		g := m.Goal
		if g == nil || g.State != protocol.GoalActive || m.ActiveRun != "" {
			return errNoGoal
		}
		m.Goal = &protocol.GoalUpdatedPayload{State: g.State, Text: g.Text, Turns: g.Turns + 1}
		return nil
	})
	if err != nil {
		return
	}
	goal := *meta.Goal
	_, err = a.startRun(ctx, meta.Owner, a.inherit(ctx, meta, goal.Text, "goal"), func(x *driver.Execution) {
		x.Emit(ctx, protocol.EventGoalUpdated, goal)
	})
	if err != nil {
		u.UpdateSession(context.WithoutCancel(ctx), sid, func(m *journal.SessionMeta) error {
			if m.Goal != nil && m.Goal.Turns == goal.Turns {
				m.Goal.Turns--
			}
			return nil
		})
		if !errors.Is(err, adapter.ErrConflict) {
			a.opts.Logger.Warn("start goal run", "session_id", sid, "err", err)
		}
	}
}
