package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/protocol"
)

// Event page bounds of GET /v1/runs/{rid}/events.
const (
	defaultPage = 100
	maxPage     = 1000
)

// events answers GET /v1/runs/{rid}/events: a JSON page, or with
// Accept: text/event-stream an SSE stream (id = event_id, event = type)
// that honours Last-Event-ID and ends after the terminal event.
func (h *api) events(c echo.Context) error {
	ctx := c.Request().Context()
	rid := c.Param("rid")
	p := h.core.Caller(c)
	meta, err := h.core.ReadRun(ctx, p, rid)
	if err != nil {
		return h.core.PublicError(err)
	}
	after, err := httpx.ParseUint(c, "after_seq", 0)
	if err != nil {
		return err
	}
	if strings.Contains(c.Request().Header.Get("Accept"), "text/event-stream") {
		if last := httpx.LastEventID(c); last != "" {
			if after, err = protocol.ParseLastEventID(last, rid); err != nil {
				return err
			}
		}
		return h.streamSSE(c, rid, after, p.Expires)
	}
	limit, err := httpx.ParseUint(c, "limit", defaultPage)
	if err != nil {
		return err
	}
	if limit == 0 || limit > maxPage {
		return &protocol.Error{Code: protocol.CodeBadRequest, Field: "limit", Message: "limit: must be 1..1000"}
	}
	events, err := h.core.Journal().Read(ctx, rid, after, int(limit))
	if err != nil {
		return h.core.PublicError(err)
	}
	page := protocol.EventPage{Events: events, NextCursor: protocol.EventID(rid, after), Terminal: meta.Terminal}
	if n := len(events); n > 0 {
		page.NextCursor = events[n-1].EventID
	}
	if page.Events == nil {
		page.Events = []protocol.Envelope{}
	}
	return c.JSON(http.StatusOK, page)
}

// streamSSE writes the run's events after `after`, then live ones, until the
// terminal event, the client leaving, the hub stopping or the caller's
// credentials expiring (expires; zero: never), whichever comes first.
func (h *api) streamSSE(c echo.Context, rid string, after uint64, expires time.Time) error {
	ctx, cancel := httpx.StreamContext(c.Request().Context(), h.core.Context(), expires)
	defer cancel()
	w := httpx.StartSSE(ctx, c, h.core.Config().SSEKeepAlive, nil)
	defer w.Close()
	buf := make([]byte, 0, 1024)
	for e, err := range h.core.Observe(ctx, rid, after) {
		if err != nil {
			return nil // the client left or the hub stops; the stream just ends
		}
		data, err := json.Marshal(&e)
		if err != nil {
			return nil
		}
		buf = httpx.AppendSSE(buf[:0], e.EventID, string(e.Type), data)
		if err := w.Write(buf); err != nil {
			return nil
		}
	}
	return nil
}
