package durable

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/journal"
)

// control is an SSE control event's data.
type control struct {
	StreamNextOffset string `json:"streamNextOffset"`
	StreamCursor     string `json:"streamCursor,omitempty"`
	UpToDate         bool   `json:"upToDate,omitempty"`
	StreamClosed     bool   `json:"streamClosed,omitempty"`
}

// sseWriter is one SSE answer (httpx.Stream: the handler's events and the
// keep-alive comments are written, and flushed, under its lock).
type sseWriter struct{ *httpx.Stream }

// startSSE commits the SSE headers and starts the keep-alive comments,
// every Options.SSEKeepAlive until ctx ends or close.
func (d *Edge) startSSE(ctx context.Context, c echo.Context, encoding string) *sseWriter {
	var extra map[string]string
	if encoding != "" {
		extra = map[string]string{"Stream-SSE-Data-Encoding": encoding}
	}
	return &sseWriter{httpx.StartSSE(ctx, c, d.opts.SSEKeepAlive, extra)}
}

// close stops the keep-alive comments and waits for them.
func (s *sseWriter) close() { s.Close() }

func (s *sseWriter) write(b []byte) error { return s.Write(b) }

// send writes a data event (when data is not nil) and the control event
// that follows it, together. Each line of the data (split at CR, LF and
// CRLF, so that no payload can end an event or start another) is a data:
// line.
func (s *sseWriter) send(data *string, ctl control) error {
	var b strings.Builder
	if data != nil {
		payload := strings.ReplaceAll(*data, "\r\n", "\n")
		payload = strings.ReplaceAll(payload, "\r", "\n")
		b.WriteString("event: data\n")
		for _, line := range strings.Split(payload, "\n") {
			b.WriteString("data:")
			b.WriteString(line)
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
	}
	j, _ := json.Marshal(ctl)
	b.WriteString("event: control\ndata:")
	b.Write(j)
	b.WriteString("\n\n")
	return s.write([]byte(b.String()))
}

// ssePayload is the data event of records: base64 of their bytes, the
// JSON array of their messages, or their text.
func ssePayload(m journal.StreamMeta, recs []journal.StreamRecord) string {
	b := body(m, recs)
	if sseEncoding(m.ContentType) == "base64" {
		return base64.StdEncoding.EncodeToString(b)
	}
	return string(b)
}

func (d *Edge) sse(c echo.Context, name string, m journal.StreamMeta, off offsetSpec) error {
	r := c.Request()
	w := d.watch(name)
	defer w.cancel()
	ctx, cancel := d.liveContext(r.Context(), d.opts.SSEMaxDuration)
	defer cancel()
	out := d.startSSE(ctx, c, sseEncoding(m.ContentType))
	defer out.close()
	after, afterBytes := off.index, uint64(0)
	if after == m.Records {
		afterBytes = m.Bytes
	}
	tick := time.NewTicker(recheck)
	defer tick.Stop()
	first := true
	for {
		res, err := d.opts.Streams.ReadStream(ctx, name, after, d.opts.MaxReadBytes, true)
		if err != nil {
			// The stream went (deleted, expired) or the journal failed:
			// the client reconnects and reads the status.
			return nil
		}
		n := len(res.Records)
		var data *string
		if n > 0 {
			after, afterBytes = res.Records[n-1].Index, res.Records[n-1].End
			p := ssePayload(res.Meta, res.Records)
			data = &p
		}
		if n > 0 || first || res.Meta.Closed {
			first = false
			ctl := control{StreamNextOffset: formatOffset(after, afterBytes)}
			atTail := after >= res.Meta.Records
			if atTail && res.Meta.Closed {
				ctl.StreamClosed = true
				_ = out.send(data, ctl)
				return nil
			}
			ctl.StreamCursor, ctl.UpToDate = d.cursor(r), atTail
			if err := out.send(data, ctl); err != nil {
				return nil
			}
			if !atTail {
				continue
			}
		}
		select {
		case <-w.ch:
		case <-tick.C:
		case <-ctx.Done():
			return nil
		}
	}
}
