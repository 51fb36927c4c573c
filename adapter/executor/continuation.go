package executor

import (
	"context"
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

var errQueueFull = errors.New("queue full")

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
	req := a.latestRequest(ctx, meta)
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
	// A queue edit (hub/httpapi/queue.go) may change or remove the head between
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
