package hub

import (
	"context"
	"errors"
	"time"

	"github.com/runhub/runhub/hub/tabsock"
	"github.com/runhub/runhub/protocol"
)

// The socket's writer goroutine: wakeWriter (writer.go) starts it on
// demand and writeLoop does what may wait (the rest of a frame, catching the focus up
// from the journal, the close), using the write primitives of writer.go
// and the catch-up of focus.go.

// writeLoop drains the socket's queues: everything waiting goes out as one
// NDJSON frame (up to MaxBatchBytes); bytes a sender left pending go out
// first; when nothing waits and the focus needs catching up, it reads the
// journal; then it sleeps until woken, and after writerLinger/2 to
// writerLinger of nothing it ends (wakeWriter starts it again). The idle
// timer is not re-armed per frame: it fires every writerLinger/2, and the
// writer ends when nothing was written since the previous firing.
func (c *conn) writeLoop() {
	// One timer bounds every write (armed per frame, never reallocated); a
	// write in flight ends when the socket is cancelled, which closes it
	// (newConn). The writes themselves carry no context, so they set up no
	// per-write timer or cancellation. (An AfterFunc on the socket's
	// context would leave the context a map of children for the socket's
	// life once the writer retires: ~0.2 KiB per idle socket.)
	timeout := time.AfterFunc(time.Hour, func() { c.sock.Close() })
	timeout.Stop()
	defer timeout.Stop()
	limit := c.cfg.MaxBatchBytes // the frame size, smaller while writes are slow
	idle := time.NewTimer(writerLinger / 2)
	defer idle.Stop()
	busy := false // wrote since the idle timer last fired
	fails := 0    // catch-up reads failed in a row
	for {
		bp := tabsock.GetFrame()
		buf, done := c.out.takeBusy((*bp)[:tabsock.FrameHeadroom], limit)
		if len(buf) > tabsock.FrameHeadroom {
			*bp = buf
			began := time.Now()
			err := c.write(timeout, buf)
			limit = nextFrameLimit(limit, c.cfg.MaxBatchBytes, time.Since(began))
			c.out.release(limit)
			tabsock.PutFrame(bp)
			if err != nil {
				c.cancel()
				return
			}
			busy = true
			continue
		}
		*bp = buf
		tabsock.PutFrame(bp)
		if c.sock != nil {
			// What a sender could not write whole goes out before anything
			// else (and before the close frame).
			began := time.Now()
			sent, err := c.sock.Flush(timeout, c.cfg.WriteTimeout)
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
				if !c.pause(pause) {
					return
				}
				continue
			}
			fails = 0
			continue
		}
		// Not c.ctx.Done(): that makes the context a channel the socket
		// keeps for its life (~0.1 KiB per idle socket); c.cancel puts a
		// token in wake after cancelling instead (newConn).
		select {
		case <-c.w.wake:
			if c.ctx.Err() != nil {
				return
			}
		case <-idle.C:
			if !busy && c.retire() {
				return // an idle socket keeps no writer goroutine (nor its stack)
			}
			busy = false
			idle.Reset(writerLinger / 2)
		}
	}
}

// pause waits out the timer; false: the socket was cancelled meanwhile
// (c.cancel puts a token in wake). Work signalled meanwhile waits for the
// timer too: its token is put back.
func (c *conn) pause(t *time.Timer) bool {
	woken := false
	for {
		select {
		case <-c.w.wake:
			if c.ctx.Err() != nil {
				t.Stop()
				return false
			}
			woken = true
		case <-t.C:
			if woken {
				select {
				case c.w.wake <- struct{}{}:
				default:
				}
			}
			return true
		}
	}
}
