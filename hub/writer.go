package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
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

// maxKeptEncoder is the largest buffer an eventEncoder keeps between
// events: a huge payload's buffer is let go.
const maxKeptEncoder = 64 << 10

// writer is the lifecycle of a socket's writer goroutine. Senders write
// what a socket is offered as long as that never waits (sender.go); the
// writer runs only for what does: a frame the kernel did not take whole
// (the wire's pending bytes), reading the journal for the focus, the
// close, or a frame the socket's wire was too busy for. It lingers
// writerLinger after its last work, then ends.
//
// Locking: wake is a channel of capacity 1 (a token: the writer has work).
// running is atomic: 1 from the wakeWriter that starts a writer until that
// writer retires, so at most one runs. mu guards stopped and orders
// startWriter's wg.Add before halt's wg.Wait.
type writer struct {
	wake    chan struct{}
	running atomic.Int32
	mu      sync.Mutex
	stopped bool // serve has ended: no writer starts again
	wg      sync.WaitGroup
}

// signal tells the socket there is something to send: its sender writes
// it (or hands it to the writer goroutine). It may be called with out.mu
// held.
func (c *conn) signal() {
	if c.snd == nil || c.wire == nil || c.wire.raw == nil {
		c.wakeWriter() // no sender for this socket: its writer sends everything
		return
	}
	if c.queued.CompareAndSwap(false, true) {
		c.snd.push(c)
	}
}

// wakeWriter tells the writer goroutine there is work, starting one if
// none runs. It may be called with out.mu held.
func (c *conn) wakeWriter() {
	select {
	case c.w.wake <- struct{}{}:
	default:
	}
	if c.w.running.Load() == 0 && c.w.running.CompareAndSwap(0, 1) {
		c.startWriter()
	}
}

func (c *conn) startWriter() {
	w := &c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return // the socket is done; running stays 1, so nothing starts again
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		c.writeLoop()
	}()
}

// halt keeps any writer from starting and waits for the one running.
func (w *writer) halt() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.wg.Wait()
}

// retire ends an idle writer: true when the goroutine may return. Work
// signalled meanwhile either left a token in wake (seen here: the writer
// carries on, unless a new one has already started) or found running 0
// and started a new writer.
func (c *conn) retire() bool {
	c.out.shrink()
	c.w.running.Store(0)
	if len(c.w.wake) == 0 {
		return true
	}
	return !c.w.running.CompareAndSwap(0, 1)
}

// writeLoop drains the socket's queues: everything waiting goes out as one
// NDJSON frame (up to MaxBatchBytes); bytes a sender left pending go out
// first; when nothing waits and the focus needs catching up, it reads the
// journal; then it sleeps until woken, and after writerLinger/2 to
// writerLinger of nothing it ends (wakeWriter starts it again). The idle
// timer is not re-armed per frame: it fires every writerLinger/2, and the
// writer ends when nothing was written since the previous firing.
func (c *conn) writeLoop() {
	// One timer bounds every write (armed per frame, never reallocated), and
	// one AfterFunc ends a write in flight when the socket's context ends:
	// the writes themselves carry no context, so they set up no per-write
	// timer or cancellation.
	timeout := time.AfterFunc(time.Hour, func() { c.ws.CloseNow() })
	timeout.Stop()
	defer timeout.Stop()
	limit := c.cfg.MaxBatchBytes // the frame size, smaller while writes are slow
	stop := context.AfterFunc(c.ctx, func() { c.ws.CloseNow() })
	defer stop()
	idle := time.NewTimer(writerLinger / 2)
	defer idle.Stop()
	busy := false // wrote since the idle timer last fired
	fails := 0    // catch-up reads failed in a row
	for {
		bp := framePool.Get().(*[]byte)
		buf, done := c.out.takeBusy((*bp)[:frameHeadroom], limit)
		if len(buf) > frameHeadroom {
			*bp = buf
			began := time.Now()
			err := c.write(timeout, buf)
			limit = nextFrameLimit(limit, c.cfg.MaxBatchBytes, time.Since(began))
			c.out.release(limit)
			putFrame(bp)
			if err != nil {
				c.cancel()
				return
			}
			busy = true
			continue
		}
		*bp = buf
		putFrame(bp)
		if c.wire != nil {
			// What a sender could not write whole goes out before anything
			// else (and before the close frame).
			began := time.Now()
			sent, err := c.wire.flush(timeout, c.cfg.WriteTimeout)
			if err != nil {
				c.cancel()
				return
			}
			if sent {
				limit = nextFrameLimit(limit, c.cfg.MaxBatchBytes, time.Since(began))
				c.out.release(limit)
				busy = true
				continue
			}
		}
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
					c.log.Warn("focus catch-up failed", "conn_id", c.id, "err", err)
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
		case <-c.w.wake:
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

// Frame sizing for slow tabs: a frame that took longer than slowFrame to
// write halves the next frame's size (down to minFrameLimit); a quick one
// doubles it back (up to MaxBatchBytes). A tab on a slow link thus gets
// small frames, and the messages that go first in each frame (pongs,
// control results) are not stuck behind a large batch of events.
const (
	slowFrame     = 100 * time.Millisecond
	minFrameLimit = 8 << 10
)

func nextFrameLimit(limit, maxLimit int, took time.Duration) int {
	if took > slowFrame {
		return max(limit/2, min(minFrameLimit, maxLimit))
	}
	return min(limit*2, maxLimit)
}

// writerLinger is the longest a writer with nothing to send waits before
// its goroutine ends (at least half of it); the next signal starts a new
// one. A tab that receives anything more often than this keeps its writer.
const writerLinger = time.Second

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
	if ee.buf.Cap() > maxKeptEncoder {
		ee.buf = bytes.Buffer{} // do not keep a huge payload's buffer
	}
	return frame, nil
}

// write sends one frame (buf: the frame's headroom, then its payload);
// timeout closes the socket if the tab takes no bytes of it for
// WriteTimeout.
func (c *conn) write(timeout *time.Timer, buf []byte) error {
	if c.ctx.Err() != nil {
		return c.ctx.Err()
	}
	var err error
	if c.wire != nil {
		err = c.wire.send(frameOf(buf), timeout, c.cfg.WriteTimeout)
	} else {
		timeout.Reset(c.cfg.WriteTimeout)
		err = c.ws.Write(context.Background(), websocket.MessageText, buf[frameHeadroom:])
		timeout.Stop()
	}
	if err == nil {
		c.metrics.FrameWritten(len(buf) - frameHeadroom)
	}
	return err
}

// finish closes the socket with the requested code.
func (c *conn) finish() {
	code, reason := c.out.closeStatus()
	c.ws.Close(code, reason)
	c.cancel()
}
