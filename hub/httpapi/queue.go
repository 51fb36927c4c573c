package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Queue edits (protocol.md §9.4): HTTP routes on the session's FIFO of
// queued messages, kept in the journal's session record. Every change goes
// through the journal's session updater (atomic with the runtime taking the
// head of the queue for the next run) and is journaled as queue.updated on
// the session's active run, as an enqueue is. Only the owner may change
// the queue; a repeated Idempotency-Key changes nothing.

// previewBytes bounds a queued message's preview (the runtime's rule:
// the first line, trimmed, cut to 80 bytes plus "…").
const previewBytes = 80

// errQueueChanged: a reorder that does not name exactly the queued ids.
var errQueueChanged = protocol.Errorf(protocol.CodeConflict, "the queue has changed: read it again (GET …/queue) and send every queued id")

// errNoQueued: an edit or removal of an id that is not queued (any more).
var errNoQueued = protocol.Errorf(protocol.CodeNotFound, "no such queued message (it may have started or been removed)")

// routeQueueEdits registers the queue routes on the /v1 group.
func (h *api) routeQueueEdits(g *echo.Group) {
	g.GET("/sessions/:sid/queue", h.getQueue)
	g.PATCH("/sessions/:sid/queue/:qid", h.editQueued)
	g.DELETE("/sessions/:sid/queue/:qid", h.removeQueued)
	g.PUT("/sessions/:sid/queue", h.reorderQueue)
	g.DELETE("/sessions/:sid/queue", h.clearQueue)
}

func queuePreview(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return protocol.Truncate(strings.TrimSpace(s), previewBytes)
}

func queueState(meta journal.SessionMeta) protocol.QueueState {
	st := protocol.QueueState{SessionID: meta.ID, Depth: len(meta.Queue), Items: make([]protocol.QueuedItem, 0, len(meta.Queue))}
	for _, q := range meta.Queue {
		st.Items = append(st.Items, protocol.QueuedItem{ID: q.ID, Message: q.Message, Preview: queuePreview(q.Message), QueuedAt: q.QueuedAt})
	}
	return st
}

func (h *api) getQueue(c echo.Context) error {
	meta, err := h.core.ReadSession(c.Request().Context(), h.core.Caller(c), c.Param("sid"))
	if err != nil {
		return h.core.PublicError(err)
	}
	return c.JSON(http.StatusOK, queueState(meta))
}

func (h *api) editQueued(c echo.Context) error {
	var req protocol.QueueEditRequest
	if err := httpx.Bind(c, &req); err != nil {
		return err
	}
	switch {
	case req.Message == nil:
		return &protocol.Error{Code: protocol.CodeBadRequest, Field: "message", Message: "message: is required"}
	case strings.TrimSpace(*req.Message) == "":
		return &protocol.Error{Code: protocol.CodeBadRequest, Field: "message", Message: "message: must not be blank"}
	case len(*req.Message) > protocol.MaxTextBytes:
		return &protocol.Error{Code: protocol.CodeTooLarge, Field: "message", Message: "message: is over 64 KiB"}
	}
	qid := c.Param("qid")
	return h.updateQueue(c, func(q []journal.QueuedMessage) ([]journal.QueuedMessage, error) {
		i := slices.IndexFunc(q, func(m journal.QueuedMessage) bool { return m.ID == qid })
		if i < 0 {
			return nil, errNoQueued
		}
		q = slices.Clone(q)
		q[i].Message = *req.Message
		return q, nil
	})
}

func (h *api) removeQueued(c echo.Context) error {
	qid := c.Param("qid")
	return h.updateQueue(c, func(q []journal.QueuedMessage) ([]journal.QueuedMessage, error) {
		i := slices.IndexFunc(q, func(m journal.QueuedMessage) bool { return m.ID == qid })
		if i < 0 {
			return nil, errNoQueued
		}
		return slices.Delete(slices.Clone(q), i, i+1), nil
	})
}

func (h *api) reorderQueue(c echo.Context) error {
	var req protocol.QueueOrderRequest
	if err := httpx.Bind(c, &req); err != nil {
		return err
	}
	if req.IDs == nil {
		return &protocol.Error{Code: protocol.CodeBadRequest, Field: "ids", Message: "ids: is required"}
	}
	return h.updateQueue(c, func(q []journal.QueuedMessage) ([]journal.QueuedMessage, error) {
		if len(req.IDs) != len(q) {
			return nil, errQueueChanged
		}
		out := make([]journal.QueuedMessage, 0, len(q))
		for _, id := range req.IDs {
			i := slices.IndexFunc(q, func(m journal.QueuedMessage) bool { return m.ID == id })
			if i < 0 || slices.ContainsFunc(out, func(m journal.QueuedMessage) bool { return m.ID == id }) {
				return nil, errQueueChanged
			}
			out = append(out, q[i])
		}
		return out, nil
	})
}

// clearQueue empties the queue; with ?stop=true it then cancels the
// session's active run ("Stop & clear queue"): cleared first, so the end
// of the run starts nothing.
func (h *api) clearQueue(c echo.Context) error {
	stop := false
	switch c.QueryParam("stop") {
	case "", "false", "0":
	case "true", "1":
		stop = true
	default:
		return &protocol.Error{Code: protocol.CodeBadRequest, Field: "stop", Message: "stop: must be true or false"}
	}
	var stopRes *protocol.ControlResult
	after := func(ctx context.Context, meta journal.SessionMeta, key string) error {
		if !stop || meta.ActiveRun == "" {
			return nil
		}
		m := protocol.Control{Type: protocol.MsgControl, ID: "http", Op: protocol.OpCancel, RunID: meta.ActiveRun}
		if key != "" {
			key = "stop:" + key
		}
		res, err := h.core.Control(ctx, h.subject(c), &m, key)
		if err != nil {
			return err
		}
		stopRes = &res
		return nil
	}
	return h.updateQueueThen(c, func([]journal.QueuedMessage) ([]journal.QueuedMessage, error) { return nil, nil }, after, &stopRes)
}

func (h *api) updateQueue(c echo.Context, change func([]journal.QueuedMessage) ([]journal.QueuedMessage, error)) error {
	return h.updateQueueThen(c, change, nil, nil)
}

// updateQueueThen applies change to the owner's session queue under the
// Idempotency-Key, journals queue.updated on the active run, runs after
// (if any) and answers the queue as it is.
func (h *api) updateQueueThen(c echo.Context, change func([]journal.QueuedMessage) ([]journal.QueuedMessage, error),
	after func(context.Context, journal.SessionMeta, string) error, stop **protocol.ControlResult) error {
	ctx := c.Request().Context()
	sid := c.Param("sid")
	key := c.Request().Header.Get("Idempotency-Key")
	if len(key) > protocol.MaxShortBytes {
		return &protocol.Error{Code: protocol.CodeTooLarge, Field: "Idempotency-Key", Message: "Idempotency-Key: is too long"}
	}
	if _, err := h.core.ReadSession(ctx, h.own(c), sid); err != nil {
		return h.core.PublicError(err)
	}
	u := h.core.Journal()
	duplicate := false
	meta, err := u.UpdateSession(ctx, sid, func(m *journal.SessionMeta) error {
		duplicate = false
		if key != "" {
			// Its own namespace: a queue edit's key never collides with an
			// enqueue's.
			if err := adapter.RememberKey(m, "queue-edit:"+key); err != nil {
				duplicate = errors.Is(err, adapter.ErrDuplicate)
				return err
			}
		}
		q, err := change(m.Queue)
		if err != nil {
			return err
		}
		m.Queue = q
		return nil
	})
	if duplicate {
		if meta, err = h.core.Journal().Session(ctx, sid); err != nil {
			return h.core.PublicError(err)
		}
		st := queueState(meta)
		st.Duplicate = true
		return c.JSON(http.StatusOK, st)
	}
	if err != nil {
		return h.core.PublicError(err)
	}
	st := queueState(meta)
	if meta.ActiveRun != "" {
		st.EventID = h.journalQueue(ctx, meta)
	}
	if after != nil {
		if err := after(ctx, meta, key); err != nil {
			return h.core.PublicError(err)
		}
		st.Stop = *stop
	}
	return c.JSON(http.StatusOK, st)
}

// journalQueue appends queue.updated (the queue's previews) to the
// session's active run, unless the run has not started (its first event
// must be run.started) or ended meanwhile; it returns the event id or "".
func (h *api) journalQueue(ctx context.Context, meta journal.SessionMeta) string {
	rm, err := h.core.Journal().Run(ctx, meta.ActiveRun)
	if err != nil || rm.LastSeq == 0 || rm.Terminal {
		return ""
	}
	p := protocol.QueueUpdatedPayload{Depth: len(meta.Queue), Items: make([]protocol.QueueItem, 0, len(meta.Queue))}
	for _, q := range meta.Queue {
		p.Items = append(p.Items, protocol.QueueItem{ID: q.ID, Preview: queuePreview(q.Message)})
	}
	e, err := protocol.NewEvent(meta.ActiveRun, meta.ID, protocol.EventQueueUpdated, p)
	if err != nil {
		return ""
	}
	out, err := h.core.Journal().Append(ctx, e, "")
	if err != nil {
		if !errors.Is(err, journal.ErrTerminal) {
			h.core.Config().Logger.Warn("journal queue.updated", "run_id", meta.ActiveRun, "err", err)
		}
		return ""
	}
	return out.EventID
}
