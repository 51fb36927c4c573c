package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/journal"
)

// newLogger is the process's logger: JSON (production) or text
// (development) on stderr, at level, with secrets scrubbed from every
// attribute and the request id of the context added.
func newLogger(format, level string) *slog.Logger {
	return newLoggerTo(os.Stderr, format, level)
}

func newLoggerTo(w io.Writer, format, level string) *slog.Logger {
	lvl, _ := parseLevel(level)
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: scrubAttr}
	var h slog.Handler
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(contextHandler{h})
}

// parseLevel reads a log level: debug, info, warn (or warning) or error,
// in any case; ok is false for anything else (then info).
func parseLevel(level string) (slog.Level, bool) {
	switch strings.ToLower(level) {
	case "debug":
		return slog.LevelDebug, true
	case "info":
		return slog.LevelInfo, true
	case "warn", "warning":
		return slog.LevelWarn, true
	case "error":
		return slog.LevelError, true
	}
	return slog.LevelInfo, false
}

// scrubAttr keeps secrets out of the logs: a string attribute named like a
// credential (token, api_key, password, authorization, …) is replaced
// whole, and secret-looking substrings of any string or error (bearer
// tokens, API keys, JWTs, key=value pairs) are redacted.
func scrubAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		if journal.SecretKey(a.Key) && a.Value.String() != "" {
			return slog.String(a.Key, journal.Redacted)
		}
		if s := a.Value.String(); s != "" {
			if r := journal.RedactString(s); r != s {
				return slog.String(a.Key, r)
			}
		}
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case error:
			return slog.String(a.Key, journal.RedactString(v.Error()))
		case []byte:
			return slog.String(a.Key, journal.RedactString(string(v)))
		}
	}
	return a
}

// requestIDKey keys the request id in a request's context.
type requestIDKey struct{}

// requestID returns the request id of ctx, if any.
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// contextHandler adds request_id to records logged with a context that
// carries one (log.InfoContext(ctx, …)).
type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := requestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(as)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}

// maxRequestID bounds an incoming X-Request-ID.
const maxRequestID = 128

// validRequestID accepts a client's X-Request-ID: 1–128 printable ASCII
// characters without spaces or quotes (anything else is replaced).
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requestMiddleware gives every request an id — the client's (or load
// balancer's) X-Request-ID when it is sane, else a new one — echoes it in
// the response's X-Request-ID, puts it in the request's context (so log
// calls with that context carry request_id), counts the request by route
// pattern and status, and logs it: at debug, at warn when it failed with a
// 5xx. Only the path is logged, never the query or headers.
func requestMiddleware(log *slog.Logger, m *metrics.Metrics) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			id := req.Header.Get(echo.HeaderXRequestID)
			if !validRequestID(id) {
				id = newRequestID()
			}
			c.Response().Header().Set(echo.HeaderXRequestID, id)
			ctx := context.WithValue(req.Context(), requestIDKey{}, id)
			c.SetRequest(req.WithContext(ctx))
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err) // render it now, so the status below is the one sent
			}
			status := c.Response().Status
			m.HTTPRequest(req.Method, c.Path(), status)
			level := slog.LevelDebug
			if status >= 500 {
				level = slog.LevelWarn
			}
			if log.Enabled(ctx, level) {
				attrs := []slog.Attr{slog.String("method", req.Method), slog.String("path", req.URL.Path),
					slog.String("route", c.Path()), slog.Int("status", status),
					slog.Duration("duration", time.Since(start)), slog.String("remote", c.RealIP())}
				if err != nil {
					attrs = append(attrs, slog.String("err", err.Error()))
				}
				log.LogAttrs(ctx, level, "http request", attrs...)
			}
			return nil
		}
	}
}
