package tabsock

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// The sending side: every byte sent on the socket goes through it, one
// whole frame at a time under Conn.mu. Text frames are framed by the
// caller in a pooled buffer (TextFrame: header and payload in one buffer,
// one write); control frames (pong, close) by the package.
//
// There are two ways to send, and only the socket's own goroutines ever
// wait on the connection:
//
//   - Send and Flush (the socket's writer goroutine) and control frames
//     (its reader or writer) wait until the frame is written. During Send
//     the write timeout counts from the last chunk the client took, not
//     from the frame's start, so a client that reads slowly but steadily
//     is never cut mid-frame; one that reads nothing for the timeout is.
//   - TrySend (a goroutine that writes for many sockets) makes one
//     non-blocking write system call on the socket's descriptor, not
//     through the runtime's poller (whose lock and readiness check cost
//     ~0.6 µs a delivery), with mu already taken by TryLock. What the
//     kernel does not take stays pending; the next Send, Flush or control
//     frame sends it before anything else.

// writeChunk is the unit of write progress: at 16 KiB a client reading
// 16 KiB per timeout keeps its socket.
const writeChunk = 16 << 10

// FrameHeadroom is the room a frame buffer keeps before its payload for
// the header (at most 10 bytes for a server's frame): TextFrame.
const FrameHeadroom = 10

// ErrNotDirect: TrySend was called on a socket that cannot be written to
// directly (Direct is false).
var ErrNotDirect = errors.New("tabsock: the socket cannot be written to directly")

// ErrCloseSent: a close frame went out, so no data frame may follow it.
var ErrCloseSent = errors.New("tabsock: the socket's close frame was sent")

// Direct reports whether TrySend can write to the socket (a plain socket).
func (c *Conn) Direct() bool { return c.fd >= 0 }

// TextFrame writes the header of a text frame (FIN, unmasked) into the
// headroom of buf (buf[FrameHeadroom:] is the payload) and returns the
// frame.
func TextFrame(buf []byte) []byte {
	n := len(buf) - FrameHeadroom
	var start int
	switch {
	case n <= 125:
		start = FrameHeadroom - 2
		buf[start+1] = byte(n)
	case n <= 0xffff:
		start = FrameHeadroom - 4
		buf[start+1] = 126
		binary.BigEndian.PutUint16(buf[start+2:], uint16(n))
	default:
		start = 0
		buf[1] = 127
		binary.BigEndian.PutUint64(buf[2:], uint64(n))
	}
	buf[start] = 0x81 // FIN, text
	return buf[start:]
}

// TryLock takes the sending side if nobody holds it (for TrySend and
// Pending); Unlock gives it back.
func (c *Conn) TryLock() bool { return c.mu.TryLock() }

// Unlock gives back the sending side taken with TryLock.
func (c *Conn) Unlock() { c.mu.Unlock() }

// Pending reports bytes a TrySend left for Send or Flush. The caller
// holds the sending side (TryLock).
func (c *Conn) Pending() bool { return c.pending != nil }

// TrySend writes the frame in bp's buffer from off on without waiting;
// the caller holds the sending side (TryLock) and nothing is pending.
// left: the kernel did not take all of it, and the rest is pending with
// the buffer, which the socket now owns (PutFrame once sent); otherwise
// the caller keeps bp.
func (c *Conn) TrySend(bp *[]byte, off int) (left bool, err error) {
	if c.closeSent {
		return false, ErrCloseSent
	}
	if !c.Direct() {
		return false, ErrNotDirect
	}
	p := (*bp)[off:]
	n, err := c.writeNow(p)
	rest := p[n:]
	if err != nil || len(rest) == 0 {
		return false, err
	}
	c.pending, c.pendingOff = bp, len(*bp)-len(rest)
	return true, nil
}

// writeNow writes what it can of p without waiting and returns how much
// that was; a full socket buffer is no error.
func (c *Conn) writeNow(p []byte) (int, error) {
	if !c.guard.TryRLock() {
		return 0, net.ErrClosed // Close is under way
	}
	defer c.guard.RUnlock()
	if c.shut {
		return 0, net.ErrClosed
	}
	n := 0
	for n < len(p) {
		m, err := syscall.Write(c.fd, p[n:])
		if m > 0 {
			n += m
		}
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return n, nil
		case err != nil:
			return n, err
		case m <= 0:
			return n, nil
		}
	}
	return n, nil
}

// Send writes frame after any pending bytes and waits for both; timer
// (made by the caller, stopped) closes the socket when the client takes
// no bytes for timeout.
func (c *Conn) Send(frame []byte, timer *time.Timer, timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeSent {
		return ErrCloseSent
	}
	c.arm(timer, timeout)
	defer c.disarm()
	if err := c.flushLocked(); err != nil {
		return err
	}
	_, err := c.write(frame)
	return err
}

// Flush sends the pending bytes, if any, and waits for them; sent reports
// that there were some. timer is as for Send.
func (c *Conn) Flush(timer *time.Timer, timeout time.Duration) (sent bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		return false, nil
	}
	c.arm(timer, timeout)
	defer c.disarm()
	return true, c.flushLocked()
}

// arm starts the write timeout of a Send; each chunk written re-arms it
// until disarm. Called with mu held.
func (c *Conn) arm(timer *time.Timer, timeout time.Duration) {
	c.timer, c.timeout = timer, timeout
	timer.Reset(timeout)
}

func (c *Conn) disarm() {
	c.timer.Stop()
	c.timer = nil
}

// write sends p in chunks, re-arming the timer (when set) after each.
// Called with mu held.
func (c *Conn) write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := c.conn.Write(p[n:min(len(p), n+writeChunk)])
		n += m
		if err != nil {
			return n, err
		}
		if c.timer != nil {
			c.timer.Reset(c.timeout)
		}
	}
	return n, nil
}

// flushLocked sends the pending bytes, waiting for them, and gives their
// buffer back. Called with mu held.
func (c *Conn) flushLocked() error {
	if c.pending == nil {
		return nil
	}
	b := c.pending
	_, err := c.write((*b)[c.pendingOff:])
	c.pending, c.pendingOff = nil, 0
	PutFrame(b)
	return err
}

// control writes a control frame (a server's frames are not masked) after
// any pending bytes, whole, waiting at most ControlTimeout: a client that
// takes nothing loses its socket. A second close frame is not sent.
func (c *Conn) control(op byte, p []byte) error {
	var b [2 + 125]byte
	b[0], b[1] = 0x80|op, byte(len(p))
	n := copy(b[2:], p)
	t := time.AfterFunc(ControlTimeout, func() { c.Close() })
	defer t.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.flushLocked(); err != nil {
		return err
	}
	if op == opClose {
		if c.closeSent {
			return nil // one close frame per socket
		}
		c.closeSent = true
	}
	_, err := c.write(b[:2+n])
	return err
}

// close writes a close frame with code and reason (the reason dropped, and
// 1011 sent, when it does not fit, as coder/websocket does); nothing when
// one went out already.
func (c *Conn) close(code StatusCode, reason string) error {
	var p []byte
	if code != StatusNoStatusRcvd {
		if len(reason) > 123 || !validCloseCode(code) {
			code, reason = StatusInternalError, ""
		}
		p = binary.BigEndian.AppendUint16(nil, uint16(code))
		p = append(p, reason...)
	}
	return c.control(opClose, p)
}

// framePool holds frame buffers: a socket borrows one only while it has
// something to send, so an idle socket holds none. 16 KiB holds a typical
// frame without growing; a larger one is sized with one allocation.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// maxPooledFrame is the largest buffer returned to framePool: 256 KiB (a
// full batch of the hub's, MaxBatchBytes by default) plus a message that
// overshoots it. The pool only keeps buffers between two collections.
const maxPooledFrame = 320 << 10

// GetFrame lends a frame buffer (length 0) from the pool.
func GetFrame() *[]byte { return framePool.Get().(*[]byte) }

// PutFrame gives a frame buffer back to the pool, unless it grew too
// large to keep.
func PutFrame(bp *[]byte) {
	if cap(*bp) <= maxPooledFrame {
		*bp = (*bp)[:0]
		framePool.Put(bp)
	}
}
