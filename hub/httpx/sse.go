package httpx

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// The SSE plumbing every SSE stream shares: GET /v1/runs/{rid}/events, the
// AG-UI export and run endpoint, the AI SDK chat stream.

// StreamContext bounds a stream by ctx (the request's), life (the hub's)
// and the caller's credentials (expires; zero: never), whichever ends
// first.
func StreamContext(ctx, life context.Context, expires time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(life, cancel)
	if !expires.IsZero() {
		var cancelExp context.CancelFunc
		ctx, cancelExp = context.WithDeadline(ctx, expires)
		return ctx, func() { cancelExp(); stop(); cancel() }
	}
	return ctx, func() { stop(); cancel() }
}

// Stream is one SSE response: the handler's writes and the keep-alive
// comments go through its lock.
type Stream struct {
	mu   sync.Mutex
	w    *echo.Response
	err  error // the first write error; every later write fails with it
	stop func()
}

// keepAliveComment is the SSE comment a stream sends when it has been
// quiet for its keep-alive interval: every SSE parser skips it, and it keeps
// proxies and load balancers from closing an idle stream.
const keepAliveComment = ": keep-alive\n\n"

// StartSSE commits the SSE response headers (with extra ones, if any) and
// starts the stream's keep-alive comments every keepAlive (0: none), which
// run until ctx ends or Close is called. The caller must call Close before
// it returns.
func StartSSE(ctx context.Context, c echo.Context, keepAlive time.Duration, extra map[string]string) *Stream {
	w := c.Response()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	for k, v := range extra {
		w.Header().Set(k, v)
	}
	w.WriteHeader(http.StatusOK)
	w.Flush()
	s := &Stream{w: w, stop: func() {}}
	if every := keepAlive; every > 0 {
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if s.Write([]byte(keepAliveComment)) != nil {
						return
					}
				}
			}
		}()
		s.stop = func() { cancel(); <-done }
	}
	return s
}

// Write writes and flushes b (whole SSE frames).
func (s *Stream) Write(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return err
	}
	s.w.Flush()
	return nil
}

// Close stops the keep-alive comments and waits for them.
func (s *Stream) Close() { s.stop() }

// LastEventID is the request's Last-Event-ID ("": none, start over).
func LastEventID(c echo.Context) string { return c.Request().Header.Get("Last-Event-ID") }

// AppendSSE appends one SSE frame to buf: id, event, data. An empty event
// is left out: an SSE client takes "message" for it either way. An empty
// id is left out too.
func AppendSSE(buf []byte, id, event string, data []byte) []byte {
	if id != "" {
		buf = append(buf, "id: "...)
		buf = append(buf, id...)
		buf = append(buf, '\n')
	}
	if event != "" {
		buf = append(buf, "event: "...)
		buf = append(buf, event...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	return append(buf, "\n\n"...)
}
