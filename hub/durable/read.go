package durable

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/runhub/runhub/journal"
)

func (d *Edge) head(c echo.Context, name string) error {
	m, err := d.check(c, name, false)
	if err != nil {
		return d.fail(c, err)
	}
	h := c.Response().Header()
	h.Set("Content-Type", m.ContentType)
	h.Set("Cache-Control", "no-store")
	setStreamHeaders(h, m)
	if m.HasTTL {
		h.Set("Stream-TTL", strconv.FormatInt(m.TTL, 10))
	}
	if m.ExpiresAt != 0 {
		h.Set("Stream-Expires-At", time.UnixMilli(m.ExpiresAt).UTC().Format(time.RFC3339Nano))
	}
	return c.NoContent(http.StatusOK)
}

// body is the response body of records: their bytes, or for a JSON
// stream the array of their messages.
func body(m journal.StreamMeta, recs []journal.StreamRecord) []byte {
	var b bytes.Buffer
	j := isJSON(m.ContentType)
	if j {
		b.WriteByte('[')
	}
	first := true
	for _, r := range recs {
		if len(r.Data) == 0 {
			continue
		}
		if j && !first {
			b.WriteByte(',')
		}
		b.Write(r.Data)
		first = false
	}
	if j {
		b.WriteByte(']')
	}
	return b.Bytes()
}

// tailOf is where the records end: the last one's position, or after.
func tailOf(after uint64, recs []journal.StreamRecord, m journal.StreamMeta, bytesAfter uint64) (uint64, uint64) {
	if n := len(recs); n > 0 {
		return recs[n-1].Index, recs[n-1].End
	}
	return after, bytesAfter
}

func (d *Edge) read(c echo.Context, name string) error {
	r := c.Request()
	off, live, err := parseRead(r)
	if err != nil {
		return d.fail(c, err)
	}
	m, err := d.check(c, name, false)
	if err != nil {
		return d.fail(c, err)
	}
	if off.now {
		off.index = m.Records
	}
	if off.index > m.Records {
		return d.fail(c, &httpError{status: http.StatusBadRequest, code: codeBadOffset, msg: "the offset is past the stream's tail"})
	}
	switch live {
	case "sse":
		return d.sse(c, name, m, off)
	case "long-poll":
		return d.longPoll(c, name, off)
	}
	res, err := d.opts.Streams.ReadStream(r.Context(), name, off.index, d.opts.MaxReadBytes, true)
	if err != nil {
		return d.fail(c, err)
	}
	if off.now {
		res.Records = nil
	}
	return d.answerRead(c, res, off, "")
}

// answerRead answers records read after off (cursor set: a live answer).
func (d *Edge) answerRead(c echo.Context, res journal.StreamRead, off offsetSpec, cursor string) error {
	m := res.Meta
	bytesAfter := uint64(0)
	if off.index > 0 {
		if off.index == m.Records {
			bytesAfter = m.Bytes
		} else if len(res.Records) > 0 {
			bytesAfter = res.Records[0].End - uint64(len(res.Records[0].Data))
		}
	}
	endIdx, endBytes := tailOf(off.index, res.Records, m, bytesAfter)
	h := c.Response().Header()
	h.Set("Content-Type", m.ContentType)
	next := formatOffset(endIdx, endBytes)
	h.Set("Stream-Next-Offset", next)
	upToDate := endIdx >= m.Records
	if upToDate {
		h.Set("Stream-Up-To-Date", "true")
		if m.Closed {
			h.Set("Stream-Closed", "true")
		}
	}
	if cursor != "" {
		h.Set("Stream-Cursor", cursor)
	}
	if off.now {
		h.Set("Cache-Control", "no-store")
	} else {
		etag := `"` + m.Gen + ":" + formatOffset(off.index, bytesAfter) + ":" + next + closedMark(upToDate && m.Closed) + `"`
		h.Set("ETag", etag)
		if upToDate {
			h.Set("Cache-Control", "no-cache")
		} else {
			h.Set("Cache-Control", "private, max-age=60, stale-while-revalidate=300")
		}
		if inm := c.Request().Header.Get("If-None-Match"); inm != "" && inm == etag {
			return c.NoContent(http.StatusNotModified)
		}
	}
	return c.Blob(http.StatusOK, m.ContentType, body(m, res.Records))
}

func closedMark(closed bool) string {
	if closed {
		return ":c"
	}
	return ""
}

// waiter wakes a live read when its stream changes.
type waiter struct {
	ch     chan struct{}
	cancel func()
}

func (d *Edge) watch(name string) *waiter {
	w := &waiter{ch: make(chan struct{}, 1)}
	w.cancel = d.opts.Streams.SubscribeStream(name, func() {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	})
	return w
}

// recheck is how often a waiting read looks again without a notification
// (one lost between nodes).
const recheck = 3 * time.Second

// liveContext bounds a live read: its request, its duration, and the
// hub's life (a shutdown ends the waits, so that it need not wait for
// them).
func (d *Edge) liveContext(parent context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, limit)
	stop := context.AfterFunc(d.core.Context(), cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

func (d *Edge) longPoll(c echo.Context, name string, off offsetSpec) error {
	r := c.Request()
	w := d.watch(name)
	defer w.cancel()
	ctx, cancel := d.liveContext(r.Context(), d.opts.LongPollTimeout)
	defer cancel()
	tick := time.NewTicker(recheck)
	defer tick.Stop()
	for {
		res, err := d.opts.Streams.ReadStream(r.Context(), name, off.index, d.opts.MaxReadBytes, true)
		if err != nil {
			return d.fail(c, err)
		}
		if len(res.Records) > 0 {
			return d.answerRead(c, res, off, d.cursor(r))
		}
		if res.Meta.Closed {
			return d.noData(c, res.Meta)
		}
		select {
		case <-w.ch:
		case <-tick.C:
		case <-ctx.Done():
			if r.Context().Err() != nil {
				return nil
			}
			info, err := d.opts.Streams.StreamHead(r.Context(), name)
			if err != nil {
				return d.fail(c, err)
			}
			return d.noData(c, info.Meta)
		}
	}
}

// noData is a long-poll's 204: nothing new, up to date at the tail.
func (d *Edge) noData(c echo.Context, m journal.StreamMeta) error {
	h := c.Response().Header()
	setStreamHeaders(h, m)
	h.Set("Stream-Up-To-Date", "true")
	if !m.Closed {
		h.Set("Stream-Cursor", d.cursor(c.Request()))
	}
	return c.NoContent(http.StatusNoContent)
}
