package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// controlTimeout bounds one control's trip through the runtime.
const controlTimeout = 15 * time.Second

// watches is what a socket watches. The reader alone changes and reads it
// (watch, unwatch); leave reads it once serve has returned. It has no lock:
// the tracker and presence keep their own records under their own locks.
type watches struct {
	all bool     // every session of the socket's subject, now and future
	ids []string // sorted; the tracker's copy of each id (shared by every socket watching it)
}

// watch handles a watch message. However many of its ids fail, it is
// answered with at most one error per kind (not_found, a journal fault),
// each listing the ids in sessions: a watch of 1,000 unknown ids must not
// fill the socket's message queue with 1,000 errors.
func (c *conn) watch(w *protocol.Watch) {
	if w.All {
		metas, err := c.store.Sessions(c.ctx, c.subject)
		if err != nil {
			c.sendError(journalCode(err), "could not list sessions", protocol.MsgWatch)
			return
		}
		c.watches.all = true
		c.tracker.watchOwner(c, c.subject, metas)
		c.presence.watchAll(c)
	}
	byID := map[string]string{} // watched now: session → owner
	defer func() { c.presence.watch(c, byID) }()
	var unknown []string
	defer func() {
		switch len(unknown) {
		case 0:
		case 1:
			c.sendWatchError(protocol.CodeNotFound, "no such session: "+unknown[0], unknown)
		default:
			c.sendWatchError(protocol.CodeNotFound, fmt.Sprintf("no such sessions: %d ids (listed in sessions)", len(unknown)), unknown)
		}
	}()
	for i, sid := range w.Sessions {
		if _, already := slices.BinarySearch(c.watches.ids, sid); already {
			continue
		}
		if len(c.watches.ids) >= c.cfg.MaxWatch {
			c.sendError(protocol.CodeLimitExceeded, "watching more than the limit of sessions; unwatch some first", protocol.MsgWatch)
			return
		}
		meta, err := c.store.Session(c.ctx, sid)
		if err != nil || !c.mayRead(meta.Owner) {
			if err != nil && !errors.Is(err, journal.ErrNotFound) {
				// The journal fails: the rest would fail alike (and each
				// could wait out a timeout); watch them again later.
				rest := slices.Clone(w.Sessions[i:])
				c.sendWatchError(journalCode(err), fmt.Sprintf("could not load %d sessions (listed in sessions); watch them again later", len(rest)), rest)
				return
			}
			unknown = append(unknown, sid)
			continue
		}
		id := c.tracker.watch(c, meta)
		byID[id] = meta.Owner
		if i, found := slices.BinarySearch(c.watches.ids, id); !found {
			c.watches.ids = slices.Insert(c.watches.ids, i, id)
		}
	}
}

// sendWatchError sends one watch error about sids.
func (c *conn) sendWatchError(code protocol.Code, msg string, sids []string) {
	c.send(protocol.ErrorMessage{Type: protocol.MsgError, Code: code, Message: msg, Ref: protocol.MsgWatch, Sessions: sids})
}

// unwatch handles an unwatch message.
func (c *conn) unwatch(w *protocol.Watch) {
	sids := w.Sessions
	if w.All {
		sids = sids[:0:0]
		sids = append(sids, c.watches.ids...)
		c.watches.all = false
	}
	for _, sid := range sids {
		if i, found := slices.BinarySearch(c.watches.ids, sid); found {
			c.watches.ids = slices.Delete(c.watches.ids, i, i+1)
		}
	}
	c.out.dropStatuses(sids) // an unsent status of an unwatched session is void
	c.tracker.unwatch(c, sids)
	c.presence.unwatch(c, sids, w.All)
	if w.All {
		c.tracker.unwatchOwner(c, c.subject)
	}
}

// control handles a control message and answers control_result.
func (c *conn) control(m *protocol.Control) {
	ctx, cancel := context.WithTimeout(c.ctx, controlTimeout)
	defer cancel()
	res, err := c.hub.Control(ctx, c.subject, m, m.ID)
	if err != nil {
		if code := protocol.CodeOf(err); code == protocol.CodeInternal || code == protocol.CodeUnavailable {
			c.log.Warn("control failed", "conn_id", c.id, "op", m.Op, "session_id", m.SessionID, "run_id", m.RunID, "code", code)
		}
		c.sendError(protocol.CodeOf(err), safeMessage(err), m.ID)
		res = protocol.ControlResult{Status: protocol.ResultNotActive, Message: safeMessage(err)}
	}
	c.send(protocol.ControlResultMessage{Type: protocol.MsgControlResult, ID: m.ID, ControlResult: res})
}

// Control executes one control for subject through the runtime. Errors are
// *protocol.Error values safe to show; a ControlResult carries every bounded
// outcome (accepted, not-active, expired, conflict, unsupported). The hub
// applies its limit of runs to a control that may start one; the runtime
// checks the caller owns the run or session, on the one meta it reads.
func (h *Hub) Control(ctx context.Context, subject string, m *protocol.Control, key string) (res protocol.ControlResult, err error) {
	defer func() { h.cfg.Metrics.Control(m.Op, res.Status, err) }()
	c := adapter.NewControl(m, subject, key)
	if c.MayStartRun() {
		release, err := h.runGate(ctx, subject, m.SessionID)
		if err != nil {
			return protocol.ControlResult{}, err
		}
		defer release()
	}
	// A queue or goal changes the session: the journal announces it on
	// every hub's feed (journal.SessionChanged), so its status follows.
	res, err = h.runtime.Control(ctx, c)
	return res, h.publicError(err)
}

// errUnknown is the one answer for a run or session that does not exist or
// is not the caller's: it never tells which.
var errUnknown = protocol.Errorf(protocol.CodeNotFound, "no such run or session")

// ownSession loads a session the subject owns.
func (h *Hub) ownSession(ctx context.Context, subject, sid string) (journal.SessionMeta, error) {
	meta, err := h.store.Session(ctx, sid)
	if errors.Is(err, journal.ErrNotFound) || (err == nil && meta.Owner != subject) {
		return meta, errUnknown
	}
	return meta, err
}

// readSession loads a session p may read: its own, or any for an admin.
func (h *Hub) readSession(ctx context.Context, p Principal, sid string) (journal.SessionMeta, error) {
	meta, err := h.store.Session(ctx, sid)
	if errors.Is(err, journal.ErrNotFound) || (err == nil && !p.mayRead(meta.Owner)) {
		return meta, errUnknown
	}
	return meta, err
}

// readRun loads a run p may read: its own, or any for an admin.
func (h *Hub) readRun(ctx context.Context, p Principal, runID string) (journal.RunMeta, error) {
	meta, err := h.store.Run(ctx, runID)
	if errors.Is(err, journal.ErrNotFound) || (err == nil && !p.mayRead(meta.Owner)) {
		return meta, errUnknown
	}
	return meta, err
}

// mayRead reports whether the socket's caller may read a session of owner.
func (c *conn) mayRead(owner string) bool { return owner == c.subject || c.rd.admin }

// errJournalUnavailable answers a request the journal (or Redis) could not
// serve for now: HTTP 503 with Retry-After, WebSocket error unavailable.
var errJournalUnavailable = protocol.Errorf(protocol.CodeUnavailable, "the journal is unavailable; try again shortly")

// journalCode is the code of a journal failure: unavailable when the
// journal cannot be reached now (journal.Unavailable), else internal.
func journalCode(err error) protocol.Code {
	if journal.Unavailable(err) || errors.Is(err, journal.ErrClosed) {
		return protocol.CodeUnavailable
	}
	return protocol.CodeInternal
}

// publicError maps internal errors to safe protocol errors.
func (h *Hub) publicError(err error) error {
	if err == nil {
		return nil
	}
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe):
		return pe
	case errors.Is(err, adapter.ErrNotFound), errors.Is(err, journal.ErrNotFound):
		return errUnknown
	case errors.Is(err, adapter.ErrBusy):
		return protocol.Errorf(protocol.CodeLimitExceeded, "too many runs are executing; try again later")
	case errors.Is(err, adapter.ErrClosed), errors.Is(err, journal.ErrClosed):
		return protocol.Errorf(protocol.CodeUnavailable, "the hub is shutting down")
	case errors.Is(err, context.DeadlineExceeded):
		return protocol.Errorf(protocol.CodeUnavailable, "the runtime did not answer in time")
	case journal.Unavailable(err):
		h.log.Warn("journal unavailable", "err", err)
		return errJournalUnavailable
	}
	h.log.Error("internal error", "err", err)
	return protocol.Errorf(protocol.CodeInternal, "internal error")
}

func safeMessage(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Message
	}
	return "internal error"
}
