package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/protocol"
)

// framePool holds frame buffers: a socket borrows one only while it has
// something to send, so an idle socket holds none. 16 KiB holds a typical
// frame (a status flush of a few sessions, a handful of events) without
// growing; take sizes a larger one with one allocation.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// maxPooledFrame is the largest buffer returned to framePool: a full batch
// (MaxBatchBytes, 256 KiB by default) plus a message that overshoots it, so
// replays, which send full batches, reuse their buffers too. The pool only
// keeps buffers between two garbage collections.
const maxPooledFrame = 320 << 10

// maxCorkedFrame is the largest frame sent through the cork: above it the
// header's separate write is noise next to the payload's, and copying the
// frame would cost more than it saves.
const maxCorkedFrame = 64 << 10

// writeLoop drains the socket's queues: everything waiting goes out as one
// NDJSON frame (up to MaxBatchBytes); when nothing waits and the focus needs
// catching up, it reads the journal; then it sleeps until signalled, and
// after writerLinger/2 to writerLinger of nothing it ends (signal starts it
// again). The idle timer is not re-armed per frame: it fires every
// writerLinger/2, and the writer ends when nothing was written since the
// previous firing.
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
	idle := time.NewTimer(writerLinger / 2)
	defer idle.Stop()
	busy := false // wrote since the idle timer last fired
	fails := 0    // catch-up reads failed in a row
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
			busy = true
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
				if errors.Is(err, context.Canceled) || c.ctx.Err() != nil {
					return
				}
				// The journal is unreachable: tell the tab once, then retry
				// with backoff; the focus resumes where it stopped.
				fails++
				if fails == 1 {
					c.h.log.Warn("focus catch-up failed", "conn_id", c.id, "err", err)
					c.sendError(protocol.CodeUnavailable, "could not read the journal; retrying", "focus")
				}
				pause := time.NewTimer(min(time.Duration(100<<min(fails, 6))*time.Millisecond, 5*time.Second))
				select {
				case <-c.ctx.Done():
					pause.Stop()
					return
				case <-pause.C:
				}
				continue
			}
			fails = 0
			continue
		}
		select {
		case <-c.wake:
		case <-c.ctx.Done():
			return
		case <-idle.C:
			if !busy && c.retire() {
				return // an idle socket keeps no writer goroutine (nor its stack)
			}
			busy = false
			idle.Reset(writerLinger / 2)
		}
	}
}

// writerLinger is the longest a writer with nothing to send waits before
// its goroutine ends (at least half of it); the next signal starts a new
// one. A tab that receives anything more often than this keeps its writer.
const writerLinger = time.Second

// take moves what is waiting into buf as NDJSON: messages, then statuses,
// then events. done reports a requested close with nothing left to send.
func (c *conn) take(buf []byte) ([]byte, bool) {
	limit := c.h.cfg.MaxBatchBytes
	c.mu.Lock()
	defer c.mu.Unlock()
	buf = c.growFrame(buf, limit)
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

// growFrame makes room in buf for what take will move into it (at most
// about limit bytes), so a frame costs at most one allocation however many
// messages it carries. Called with c.mu held.
func (c *conn) growFrame(buf []byte, limit int) []byte {
	need := 0
	for _, b := range c.msgs {
		need += len(b) + 1
	}
	if !c.closing {
		for _, sid := range c.statusOrder {
			need += len(c.statuses[sid]) + 1
		}
		for _, b := range c.events {
			if need >= limit {
				break
			}
			need += len(b) + 1
		}
	}
	return slices.Grow(buf, min(need, limit+64<<10))
}

// eventEncoder encodes event frames; pooled so a frame costs one
// allocation (the frame itself).
type eventEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var encoderPool = sync.Pool{New: func() any {
	e := &eventEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	return e
}}

// encodeEventFrame is protocol.EncodeEvent(nil, e) — the same bytes:
// {"type":"event","event":<envelope as json.Marshal encodes it>} — with one
// allocation instead of two.
func encodeEventFrame(e *protocol.Envelope) ([]byte, error) {
	ee := encoderPool.Get().(*eventEncoder)
	defer encoderPool.Put(ee)
	ee.buf.Reset()
	ee.buf.WriteString(`{"type":"event","event":`)
	if err := ee.enc.Encode(e); err != nil { // escapes HTML as json.Marshal does
		return nil, err
	}
	b := ee.buf.Bytes()
	b = b[:len(b)-1] // Encode's newline
	frame := make([]byte, len(b)+1)
	copy(frame, b)
	frame[len(b)] = '}'
	if ee.buf.Cap() > maxCorkedFrame {
		ee.buf = bytes.Buffer{} // do not keep a huge payload's buffer
	}
	return frame, nil
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
	cork := c.cork != nil && len(frame) <= maxCorkedFrame
	if cork {
		c.cork.cork(len(frame))
	}
	err := c.ws.Write(context.Background(), websocket.MessageText, frame)
	if cork {
		if uerr := c.cork.uncork(); err == nil {
			err = uerr
		}
	}
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
