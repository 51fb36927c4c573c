package durable

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/runhub/runhub/journal"
)

// control is an SSE control event's data.
type control struct {
	StreamNextOffset string `json:"streamNextOffset"`
	StreamCursor     string `json:"streamCursor,omitempty"`
	UpToDate         bool   `json:"upToDate,omitempty"`
	StreamClosed     bool   `json:"streamClosed,omitempty"`
}

// sseWriter writes SSE events and flushes each.
type sseWriter struct {
	w   *bufio.Writer
	res *echo.Response
}

func startSSE(c echo.Context, encoding string) *sseWriter {
	h := c.Response().Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	if encoding != "" {
		h.Set("Stream-SSE-Data-Encoding", encoding)
	}
	c.Response().WriteHeader(http.StatusOK)
	c.Response().Flush()
	return &sseWriter{w: bufio.NewWriter(c.Response()), res: c.Response()}
}

// data writes a data event: each line of payload (split at CR, LF and
// CRLF, so no payload can end an event or start another) as a data: line.
func (s *sseWriter) data(payload string) {
	s.w.WriteString("event: data\n")
	payload = strings.ReplaceAll(payload, "\r\n", "\n")
	payload = strings.ReplaceAll(payload, "\r", "\n")
	for _, line := range strings.Split(payload, "\n") {
		s.w.WriteString("data:")
		s.w.WriteString(line)
		s.w.WriteByte('\n')
	}
	s.w.WriteByte('\n')
}

func (s *sseWriter) control(ctl control) error {
	b, _ := json.Marshal(ctl)
	s.w.WriteString("event: control\ndata:")
	s.w.Write(b)
	s.w.WriteString("\n\n")
	if err := s.w.Flush(); err != nil {
		return err
	}
	s.res.Flush()
	return nil
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
	out := startSSE(c, sseEncoding(m.ContentType))
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
		if n > 0 {
			after, afterBytes = res.Records[n-1].Index, res.Records[n-1].End
			out.data(ssePayload(res.Meta, res.Records))
		}
		if n > 0 || first || res.Meta.Closed {
			first = false
			ctl := control{StreamNextOffset: formatOffset(after, afterBytes)}
			atTail := after >= res.Meta.Records
			if atTail && res.Meta.Closed {
				ctl.StreamClosed = true
				_ = out.control(ctl)
				return nil
			}
			ctl.StreamCursor, ctl.UpToDate = d.cursor(r), atTail
			if err := out.control(ctl); err != nil {
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
