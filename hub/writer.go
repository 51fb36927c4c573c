package hub

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"

	"github.com/runhub/runhub/protocol"
)

// maxKeptEncoder is the largest buffer an eventEncoder keeps between
// events: a huge payload's buffer is let go.
const maxKeptEncoder = 64 << 10

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
// allocation instead of three: deltas are written field by field
// (protocol.AppendEventFrame), anything else through a pooled encoder.
func encodeEventFrame(e *protocol.Envelope) ([]byte, error) {
	// The frame's fixed text, the seq and created_at take under 160 bytes.
	n := 160 + len(e.EventID) + len(e.RunID) + len(e.SessionID) + len(e.Type) + len(e.Payload)
	if frame, ok := protocol.AppendEventFrame(make([]byte, 0, n), e); ok {
		return frame, nil
	}
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
	if c.wire == nil {
		return errNoWire
	}
	err := c.wire.send(frameOf(buf), timeout, c.cfg.WriteTimeout)
	if err == nil {
		c.metrics.FrameWritten(len(buf) - frameHeadroom)
	}
	return err
}

// finish closes the socket with the requested code.
func (c *conn) finish() {
	code, reason := c.out.closeStatus()
	c.rbuf.Lock() // the handshake reads the socket's read buffer (buffered)
	c.closeHandshake(code, reason)
	c.rbuf.Unlock()
	c.cancel()
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

// startWriter starts the writer goroutine, unless serve has ended.
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
		w.loop()
	}()
}
