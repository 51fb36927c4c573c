package hub

import (
	"errors"
	"time"

	"github.com/runhub/runhub/hub/tabsock"
)

// errNoSocket: a socket made without a connection (tests) was written to.
var errNoSocket = errors.New("hub: the socket has no connection")

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

// write sends one frame (buf: the frame's headroom, then its payload);
// timeout closes the socket if the tab takes no bytes of it for
// WriteTimeout.
func (c *conn) write(timeout *time.Timer, buf []byte) error {
	if c.ctx.Err() != nil {
		return c.ctx.Err()
	}
	if c.sock == nil {
		return errNoSocket
	}
	err := c.sock.Send(tabsock.TextFrame(buf), timeout, c.cfg.WriteTimeout)
	if err == nil {
		c.metrics.FrameWritten(len(buf) - tabsock.FrameHeadroom)
	}
	return err
}

// finish closes the socket with the requested code.
func (c *conn) finish() {
	code, reason := c.out.closeStatus()
	c.sock.CloseHandshake(code, reason)
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
