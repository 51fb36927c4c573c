package hub

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// The SSE plumbing GET /v1/runs/{rid}/events and the AG-UI export share.

// sseContext bounds a stream by ctx (the request's), the hub's life and
// the caller's credentials (expires; zero: never), whichever ends first.
func (h *Hub) sseContext(ctx context.Context, expires time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(h.ctx, cancel)
	if !expires.IsZero() {
		var cancelExp context.CancelFunc
		ctx, cancelExp = context.WithDeadline(ctx, expires)
		return ctx, func() { cancelExp(); stop(); cancel() }
	}
	return ctx, func() { stop(); cancel() }
}

// startSSE commits the SSE response headers.
func startSSE(c echo.Context) *echo.Response {
	w := c.Response()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.Flush()
	return w
}

// lastEventID is the request's Last-Event-ID ("": none, start over).
func lastEventID(c echo.Context) string { return c.Request().Header.Get("Last-Event-ID") }

// appendSSE appends one SSE frame to buf: id, event, data. An empty event
// is left out: an SSE client takes "message" for it either way.
func appendSSE(buf []byte, id, event string, data []byte) []byte {
	buf = append(buf, "id: "...)
	buf = append(buf, id...)
	if event != "" {
		buf = append(buf, "\nevent: "...)
		buf = append(buf, event...)
	}
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	return append(buf, "\n\n"...)
}
