package agui

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// The AG-UI export (docs/md): GET /v1/runs/{rid}/agui streams one run,
// GET /v1/sessions/{sid}/agui the session's latest run and then every later
// one, as AG-UI events over SSE. Each SSE id is "<run>:<seq>.<k>", the k-th
// AG-UI event made from journal event seq, and a Last-Event-ID resumes
// right after it.

// aguiRun answers GET /v1/runs/{rid}/
func (h *edge) aguiRun(c echo.Context) error {
	ctx := c.Request().Context()
	rid := c.Param("rid")
	p := h.core.Caller(c)
	meta, err := h.core.ReadRun(ctx, p, rid)
	if err != nil {
		return h.core.PublicError(err)
	}
	pos := Position{RunID: rid}
	if last := httpx.LastEventID(c); last != "" {
		if pos, err = ParseEventID(last); err != nil {
			return err
		}
		if pos.RunID != rid {
			return protocol.Errorf(protocol.CodeBadCursor, "Last-Event-ID %s is not of run %s", protocol.Truncate(last, 80), rid)
		}
		if pos.Seq > meta.LastSeq {
			return protocol.Errorf(protocol.CodeBadCursor, "Last-Event-ID %s is past the run's last event", protocol.Truncate(last, 80))
		}
	}
	ctx, cancel := httpx.StreamContext(ctx, h.core.Context(), p.Expires)
	defer cancel()
	w := httpx.StartSSE(ctx, c, h.core.Config().SSEKeepAlive, nil)
	defer w.Close()
	h.aguiPump(ctx, w, rid, pos)
	return nil
}

// aguiSession answers GET /v1/sessions/{sid}/agui: from the Last-Event-ID's
// position in one of the session's runs, or else from the start of the
// session's latest run (the first run to come when it has none), then every
// later run of the session as it starts, until the client leaves, the hub
// stops or the caller's credentials expire.
func (h *edge) aguiSession(c echo.Context) error {
	ctx := c.Request().Context()
	sid := c.Param("sid")
	p := h.core.Caller(c)
	meta, err := h.core.ReadSession(ctx, p, sid)
	if err != nil {
		return h.core.PublicError(err)
	}
	pos := Position{RunID: meta.LatestRun()}
	if last := httpx.LastEventID(c); last != "" {
		if pos, err = ParseEventID(last); err != nil {
			return err
		}
		if !slices.Contains(meta.Runs, pos.RunID) {
			return protocol.Errorf(protocol.CodeBadCursor, "Last-Event-ID %s is not of session %s", protocol.Truncate(last, 80), sid)
		}
		run, err := h.core.Journal().Run(ctx, pos.RunID)
		if err != nil {
			return h.core.PublicError(err)
		}
		if pos.Seq > run.LastSeq {
			return protocol.Errorf(protocol.CodeBadCursor, "Last-Event-ID %s is past the run's last event", protocol.Truncate(last, 80))
		}
	}
	ctx, cancel := httpx.StreamContext(ctx, h.core.Context(), p.Expires)
	defer cancel()
	w := httpx.StartSSE(ctx, c, h.core.Config().SSEKeepAlive, nil)
	defer w.Close()
	prev := ""
	for {
		if pos.RunID == "" {
			if pos.RunID, err = h.nextRun(ctx, sid, prev); err != nil {
				return nil // the client left, the hub stops or the session is gone
			}
		}
		if !h.aguiPump(ctx, w, pos.RunID, pos) {
			return nil
		}
		prev, pos = pos.RunID, Position{}
	}
}

// aguiPump writes the AG-UI events of run rid after pos. It folds the run
// from its first event, so the events after a resume are exactly those a
// stream from the start had after pos. It reports whether the run's last
// event was reached (false: the client left, the hub stops, a write or a
// journal read failed).
func (h *edge) aguiPump(ctx context.Context, w *httpx.Stream, rid string, pos Position) bool {
	var m Mapper
	buf := make([]byte, 0, 1024)
	for e, err := range h.core.Observe(ctx, rid, 0) {
		if err != nil {
			return false
		}
		out := m.Map(&e)
		buf = buf[:0]
		for k, ev := range out {
			if pos.Skip(e.Seq, k) {
				continue
			}
			data, err := json.Marshal(ev)
			if err != nil {
				return false
			}
			buf = httpx.AppendSSE(buf, EventID(rid, e.Seq, k), "", data)
		}
		if len(buf) > 0 {
			if err := w.Write(buf); err != nil {
				return false
			}
		}
		if e.Terminal {
			return true
		}
	}
	return false
}

// aguiRunWait is how long a session stream waits between two looks at the
// session when no change notice wakes it (a safety net; the journal's feed
// announces new runs).
const aguiRunWait = 5 * time.Second

// nextRun returns the session's run after prev ("": its first run), waiting
// for it to be registered.
func (h *edge) nextRun(ctx context.Context, sid, prev string) (string, error) {
	wake := make(chan struct{}, 1)
	in := h.core.Journal().SubscribeInterest(func(e protocol.Envelope) {
		if e.SessionID == sid && (e.Type == journal.SessionChanged || e.Type == protocol.EventRunStarted) {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	})
	defer in.Cancel()
	in.Watch(sid) // the feed of this session only
	if err := in.Ready(ctx, sid); err != nil {
		return "", err
	}
	t := time.NewTimer(aguiRunWait)
	defer t.Stop()
	for {
		meta, err := h.core.Journal().Session(ctx, sid)
		if err != nil {
			if errors.Is(err, journal.ErrNotFound) {
				return "", err
			}
		} else if i := slices.Index(meta.Runs, prev); prev == "" || i >= 0 {
			if i+1 < len(meta.Runs) {
				return meta.Runs[i+1], nil
			}
		} else if len(meta.Runs) > 0 {
			return meta.Runs[0], nil // prev was trimmed: the runs left are later ones
		}
		t.Reset(aguiRunWait)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-wake:
		case <-t.C:
		}
	}
}
