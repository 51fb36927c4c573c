package hub

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// framePool holds frame buffers: a socket borrows one only while it has
// something to send, so an idle socket holds none.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledFrame is the largest buffer returned to framePool.
const maxPooledFrame = 64 << 10

// writeLoop drains the socket's queues: everything waiting goes out as one
// NDJSON frame (up to MaxBatchBytes); when nothing waits and the focus needs
// catching up, it reads the journal; then it sleeps until signalled.
func (c *conn) writeLoop() {
	// One timer bounds every write (armed per frame, never reallocated), and
	// one AfterFunc ends a write in flight when the socket's context ends:
	// the writes themselves carry no context, so they set up no per-write
	// timer or cancellation.
	timeout := time.AfterFunc(time.Hour, func() { c.ws.CloseNow() })
	timeout.Stop()
	defer timeout.Stop()
	stop := context.AfterFunc(c.ctx, func() { c.ws.CloseNow() })
	defer stop()
	for {
		bp := framePool.Get().(*[]byte)
		buf, done := c.take((*bp)[:0])
		if len(buf) > 0 {
			err := c.write(timeout, buf)
			if cap(buf) <= maxPooledFrame {
				*bp = buf[:0]
				framePool.Put(bp)
			}
			if err != nil {
				c.cancel()
				return
			}
			continue
		}
		*bp = buf[:0]
		framePool.Put(bp)
		if done {
			c.finish()
			return
		}
		if c.needsCatchUp() {
			if err := c.catchUp(); err != nil {
				if !errors.Is(err, context.Canceled) {
					c.h.log.Warn("focus catch-up failed", "conn_id", c.id, "err", err)
					c.sendError("internal", "could not read the journal; refocus to retry", "focus")
					c.mu.Lock()
					c.focus.lagging, c.focus.verify = false, false
					c.mu.Unlock()
				}
			}
			continue
		}
		select {
		case <-c.wake:
		case <-c.ctx.Done():
			return
		}
	}
}

// take moves what is waiting into buf as NDJSON: messages, then statuses,
// then events. done reports a requested close with nothing left to send.
func (c *conn) take(buf []byte) ([]byte, bool) {
	limit := c.h.cfg.MaxBatchBytes
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for ; n < len(c.msgs) && (len(buf) == 0 || len(buf)+len(c.msgs[n]) < limit); n++ {
		buf = appendLine(buf, c.msgs[n])
		c.msgs[n] = nil
	}
	c.msgs = compact(c.msgs, n)
	if c.closing {
		// Closing: only the remaining messages (goaway, errors) matter.
		return trimNL(buf), len(c.msgs) == 0 && len(buf) == 0
	}
	n = 0
	for ; n < len(c.statusOrder) && (len(buf) == 0 || len(buf)+len(c.statuses[c.statusOrder[n]]) < limit); n++ {
		sid := c.statusOrder[n]
		buf = appendLine(buf, c.statuses[sid])
		delete(c.statuses, sid)
	}
	c.statusOrder = compactStrings(c.statusOrder, n)
	n = 0
	for ; n < len(c.events) && (len(buf) == 0 || len(buf)+len(c.events[n]) < limit); n++ {
		buf = appendLine(buf, c.events[n])
		c.events[n] = nil
	}
	c.events = compact(c.events, n)
	return trimNL(buf), false
}

func appendLine(buf, line []byte) []byte {
	buf = append(buf, line...)
	return append(buf, '\n')
}

func trimNL(buf []byte) []byte {
	if len(buf) > 0 && buf[len(buf)-1] == '\n' {
		return buf[:len(buf)-1]
	}
	return buf
}

// compact drops the first n entries, reusing the backing array.
func compact(q [][]byte, n int) [][]byte {
	if n == 0 {
		return q
	}
	m := copy(q, q[n:])
	clear(q[m:])
	return q[:m]
}

func compactStrings(q []string, n int) []string {
	if n == 0 {
		return q
	}
	m := copy(q, q[n:])
	return q[:m]
}

// write sends one frame; timeout closes the socket if the write takes
// longer than WriteTimeout.
func (c *conn) write(timeout *time.Timer, frame []byte) error {
	if c.ctx.Err() != nil {
		return c.ctx.Err()
	}
	timeout.Reset(c.h.cfg.WriteTimeout)
	err := c.ws.Write(context.Background(), websocket.MessageText, frame)
	timeout.Stop()
	if err == nil {
		c.h.cfg.Metrics.FrameWritten(len(frame))
	}
	return err
}

// finish closes the socket with the requested code.
func (c *conn) finish() {
	c.mu.Lock()
	code, reason := c.closeCode, c.closeReason
	c.mu.Unlock()
	c.ws.Close(code, reason)
	c.cancel()
}
