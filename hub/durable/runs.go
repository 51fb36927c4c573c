package durable

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/runhub/runhub/journal"
)

// A run's stream: its journal events as a JSON stream, one event a
// message, the offset after an event its seq (as "<seq>_<seq>"), closed
// once the terminal event is in. It is read-only.

const jsonType = "application/json"

func runOffset(seq uint64) string { return formatOffset(seq, seq) }

func (d *Edge) serveRun(c echo.Context, runID string) error {
	r := c.Request()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		c.Response().Header().Set("Allow", "GET, HEAD")
		return d.fail(c, &httpError{status: http.StatusMethodNotAllowed, code: codeNotModifiable,
			msg: "a run's stream is read-only: its events come from the run"})
	}
	if runID == "" {
		return d.fail(c, notFound("run"))
	}
	p := d.core.Caller(c)
	meta, err := d.core.ReadRun(r.Context(), p, runID)
	if err != nil {
		return d.fail(c, err)
	}
	if r.Method == http.MethodHead {
		h := c.Response().Header()
		h.Set("Content-Type", jsonType)
		h.Set("Cache-Control", "no-store")
		h.Set("Stream-Next-Offset", runOffset(meta.LastSeq))
		if meta.Terminal {
			h.Set("Stream-Closed", "true")
		}
		return c.NoContent(http.StatusOK)
	}
	off, live, err := parseRead(r)
	if err != nil {
		return d.fail(c, err)
	}
	if off.now {
		off.index = meta.LastSeq
	}
	if off.index > meta.LastSeq {
		return d.fail(c, &httpError{status: http.StatusBadRequest, code: codeBadOffset, msg: "the offset is past the run's last event"})
	}
	switch live {
	case "sse":
		return d.runSSE(c, runID, meta, off.index)
	case "long-poll":
		return d.runLongPoll(c, runID, meta, off)
	}
	if off.now {
		return d.answerRun(c, meta, off.index, nil, "")
	}
	evs, err := d.collect(r.Context(), runID, off.index, meta.LastSeq)
	if err != nil {
		return d.fail(c, err)
	}
	return d.answerRun(c, meta, off.index, evs, "")
}

// collect reads the run's events after after up to seq upto (at most
// MaxReadBytes of them, at least one).
func (d *Edge) collect(ctx context.Context, runID string, after, upto uint64) ([]json.RawMessage, error) {
	if after >= upto {
		return nil, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []json.RawMessage
	size := 0
	for env, err := range d.core.Observe(ctx, runID, after) {
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(env)
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && size+len(b) > d.opts.MaxReadBytes {
			break
		}
		out = append(out, b)
		size += len(b)
		if env.Seq >= upto {
			break
		}
	}
	return out, nil
}

// seqOf is the seq of a marshaled event.
func seqOf(b json.RawMessage) uint64 {
	var e struct {
		Seq uint64 `json:"seq"`
	}
	_ = json.Unmarshal(b, &e)
	return e.Seq
}

// answerRun answers a read of a run's events after after.
func (d *Edge) answerRun(c echo.Context, meta journal.RunMeta, after uint64, evs []json.RawMessage, cursor string) error {
	end := after
	if n := len(evs); n > 0 {
		end = seqOf(evs[n-1])
	}
	h := c.Response().Header()
	h.Set("Content-Type", jsonType)
	h.Set("Stream-Next-Offset", runOffset(end))
	upToDate := end >= meta.LastSeq
	if upToDate {
		h.Set("Stream-Up-To-Date", "true")
		if meta.Terminal {
			h.Set("Stream-Closed", "true")
		}
	}
	if cursor != "" {
		h.Set("Stream-Cursor", cursor)
	}
	etag := `"run:` + meta.ID + ":" + runOffset(after) + ":" + runOffset(end) + closedMark(upToDate && meta.Terminal) + `"`
	h.Set("ETag", etag)
	h.Set("Cache-Control", "no-cache")
	if inm := c.Request().Header.Get("If-None-Match"); inm != "" && inm == etag {
		return c.NoContent(http.StatusNotModified)
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for i, e := range evs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(e)
	}
	b.WriteByte(']')
	return c.Blob(http.StatusOK, jsonType, b.Bytes())
}

func (d *Edge) runLongPoll(c echo.Context, runID string, meta journal.RunMeta, off offsetSpec) error {
	r := c.Request()
	if off.index < meta.LastSeq {
		evs, err := d.collect(r.Context(), runID, off.index, meta.LastSeq)
		if err != nil {
			return d.fail(c, err)
		}
		return d.answerRun(c, meta, off.index, evs, d.cursor(r))
	}
	if !meta.Terminal {
		ctx, cancel := d.liveContext(r.Context(), d.opts.LongPollTimeout)
		var first json.RawMessage
		for env, err := range d.core.Observe(ctx, runID, off.index) {
			if err == nil {
				first, _ = json.Marshal(env)
			}
			break
		}
		cancel()
		if r.Context().Err() != nil {
			return nil
		}
		p := d.core.Caller(c)
		fresh, err := d.core.ReadRun(r.Context(), p, runID)
		if err != nil {
			return d.fail(c, err)
		}
		if first != nil {
			return d.answerRun(c, fresh, off.index, []json.RawMessage{first}, d.cursor(r))
		}
		meta = fresh
	}
	h := c.Response().Header()
	h.Set("Stream-Next-Offset", runOffset(meta.LastSeq))
	h.Set("Stream-Up-To-Date", "true")
	if meta.Terminal {
		h.Set("Stream-Closed", "true")
	} else {
		h.Set("Stream-Cursor", d.cursor(r))
	}
	return c.NoContent(http.StatusNoContent)
}

func (d *Edge) runSSE(c echo.Context, runID string, meta journal.RunMeta, after uint64) error {
	r := c.Request()
	ctx, cancel := d.liveContext(r.Context(), d.opts.SSEMaxDuration)
	defer cancel()
	out := d.startSSE(ctx, c, "")
	defer out.close()
	if after >= meta.LastSeq {
		if meta.Terminal {
			_ = out.send(nil, control{StreamNextOffset: runOffset(after), StreamClosed: true})
			return nil
		}
		if err := out.send(nil, control{StreamNextOffset: runOffset(after), StreamCursor: d.cursor(r), UpToDate: true}); err != nil {
			return nil
		}
	}
	known := meta.LastSeq
	for env, err := range d.core.Observe(ctx, runID, after) {
		if err != nil {
			return nil
		}
		b, err := json.Marshal(env)
		if err != nil {
			return nil
		}
		data := "[" + string(b) + "]"
		known = max(known, env.Seq)
		if env.Terminal {
			_ = out.send(&data, control{StreamNextOffset: runOffset(env.Seq), StreamClosed: true})
			return nil
		}
		if err := out.send(&data, control{StreamNextOffset: runOffset(env.Seq), StreamCursor: d.cursor(r), UpToDate: env.Seq >= known}); err != nil {
			return nil
		}
	}
	return nil
}
