package hub

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// wire is the sending side of a tab socket's connection: every byte sent on
// the socket goes through it, one whole WebSocket frame at a time under mu.
// The hub frames what it sends itself (text frames, unmasked and
// uncompressed, as a server's are: frameOf); its control frames (pong,
// close: tabws.go) go through Write, each in one call.
//
// There are two ways to send, and only the socket's own goroutines ever
// wait on the connection:
//
//   - send (the socket's writer goroutine) and Write (a control frame, on
//     the socket's reader or writer goroutine) wait until the frame is written.
//     During send the write timeout counts from the last chunk the tab
//     took, not from the frame's start, so a tab that reads slowly but
//     steadily is never cut mid-frame; one that reads nothing for the
//     timeout is.
//   - trySend (a sender, which writes for many sockets) makes one
//     non-blocking write, with mu already taken by TryLock. What the
//     kernel does not take stays in pending; the socket's writer sends it
//     (flush) before anything else, and so do send and Write.
//
// Locking: mu guards every field; it is held for a whole frame. A sender
// takes it with TryLock only, and before the socket's out.mu.
type wire struct {
	conn *fdConn // the connection; the socket reads it through its bufio reader

	mu         sync.Mutex
	pending    *[]byte // a pooled frame buffer whose bytes from pendingOff on are not sent yet
	pendingOff int
	closeSent  bool // a close frame was sent: nothing may follow it
	// While the socket's writer sends (send), each chunk written re-arms
	// timer for timeout.
	timer   *time.Timer
	timeout time.Duration
}

// fdConn is a tab socket's connection as the wire and the socket's reader
// hold it. trySend writes to its file descriptor directly, with
// one non-blocking write system call, not through the runtime's poller
// (whose lock and readiness check cost ~0.6 µs a delivery, most of it a
// cache miss on the socket's poll descriptor). A descriptor may be reused
// by another connection once closed, so Close first waits for a direct
// write in progress (one non-blocking system call at most) and stops any
// after it; everything else (reads, waiting writes, deadlines) goes
// through net.Conn as usual.
type fdConn struct {
	net.Conn
	fd     int             // -1: not a plain socket; trySend never sends
	raw    syscall.RawConn // the socket's, for waitReadable (nil: not a plain socket)
	guard  sync.RWMutex    // read-held by a direct write, write-held by Close
	closed bool            // under guard
	hook   closeHook       // told first when the connection closes (nil: nobody)
}

// closeHook is told that a connection closes, before it does: the socket,
// so that the hub's poller lets go of its descriptor (conn.connClosing).
type closeHook interface{ connClosing() }

func newFDConn(conn net.Conn) *fdConn {
	c := &fdConn{Conn: conn, fd: -1}
	under := conn
	if pc, ok := conn.(*prefixConn); ok {
		under = pc.Conn // its writes go straight to the socket
	}
	if sc, ok := under.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) { c.fd = int(fd) })
			c.raw = raw
		}
	}
	return c
}

// waitReadable parks the calling goroutine until the connection has bytes
// to read, has reached its end or failed, or is closed, and reads nothing.
// The socket's reader waits here, not in a read of a frame (tabws.go),
// so that an idle socket's goroutine is parked a few frames deep
// and keeps the smallest stack (serve.go: readLoop). It must not be called
// on a connection with bytes buffered above it (a prefix, a bufio.Reader).
func (c *fdConn) waitReadable() error {
	return c.raw.Read(peekReadable)
}

// peekReadable reports whether fd has something for a read: bytes, its
// end, or an error. A full check, not a readiness flag: the runtime's
// poller is edge-triggered, so waiting without first finding the socket
// empty could miss bytes that arrived before.
func peekReadable(fd uintptr) bool {
	var b [1]byte
	_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return err != syscall.EAGAIN
}

// prefixed reports whether bytes read ahead of the upgrade are still
// unread (prefixConn). Called by the socket's reader only.
func (c *fdConn) prefixed() bool {
	pc, ok := c.Conn.(*prefixConn)
	return ok && len(pc.prefix) > 0
}

// Close implements net.Conn: no direct write follows it.
func (c *fdConn) Close() error {
	if c.hook != nil {
		c.hook.connClosing()
	}
	c.guard.Lock()
	c.closed = true
	c.guard.Unlock()
	return c.Conn.Close()
}

// writeNow writes what it can of p without waiting and returns how much
// that was; a full socket buffer is no error.
func (c *fdConn) writeNow(p []byte) (int, error) {
	if !c.guard.TryRLock() {
		return 0, net.ErrClosed // Close is under way
	}
	defer c.guard.RUnlock()
	if c.closed {
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

// writeChunk is the unit of write progress: at 16 KiB a tab reading
// 16 KiB per WriteTimeout keeps its socket.
const writeChunk = 16 << 10

// frameHeadroom is the room a frame buffer keeps before its payload for
// the WebSocket header (at most 10 bytes for a server's frame).
const frameHeadroom = 10

// errNotDirect: trySend was called on a wire that cannot write directly.
var errNotDirect = errors.New("hub: the socket cannot be written to directly")

// errCloseSent: a close frame went out, so no data frame may follow it.
var errCloseSent = errors.New("hub: the socket's close frame was sent")

// newWire makes the wire of conn; the socket is to read and close w.conn,
// not conn, so that its Close is fdConn's.
func newWire(conn net.Conn) *wire {
	return &wire{conn: newFDConn(conn)}
}

// direct reports whether trySend can write to the socket.
func (w *wire) direct() bool { return w.conn.fd >= 0 }

// frameOf writes the WebSocket header of a text frame into the headroom
// of buf (buf[frameHeadroom:] is the payload) and returns the frame.
func frameOf(buf []byte) []byte {
	n := len(buf) - frameHeadroom
	var start int
	switch {
	case n <= 125:
		start = frameHeadroom - 2
		buf[start+1] = byte(n)
	case n <= 0xffff:
		start = frameHeadroom - 4
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

// Write writes a control frame (tabws.go: pong, close), whole; a second
// close frame is not sent. It waits for pending bytes and the frame to be written.
func (w *wire) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.flushLocked(); err != nil {
		return 0, err
	}
	if len(p) > 0 && p[0]&0x0f == 0x8 { // a close frame
		if w.closeSent {
			return len(p), nil // one close frame per socket
		}
		w.closeSent = true
	}
	return w.write(p)
}

// write sends p in chunks, re-arming the timer (when set) after each.
// Called with mu held.
func (w *wire) write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := w.conn.Write(p[n:min(len(p), n+writeChunk)])
		n += m
		if err != nil {
			return n, err
		}
		if w.timer != nil {
			w.timer.Reset(w.timeout)
		}
	}
	return n, nil
}

// flushLocked sends the pending bytes, waiting for them, and gives their
// buffer back. Called with mu held.
func (w *wire) flushLocked() error {
	if w.pending == nil {
		return nil
	}
	b := w.pending
	_, err := w.write((*b)[w.pendingOff:])
	w.pending, w.pendingOff = nil, 0
	putFrame(b)
	return err
}

// send writes frame after any pending bytes and waits for both; timer
// closes the socket when the tab takes no bytes for timeout.
func (w *wire) send(frame []byte, timer *time.Timer, timeout time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closeSent {
		return errCloseSent
	}
	w.arm(timer, timeout)
	defer w.disarm()
	if err := w.flushLocked(); err != nil {
		return err
	}
	_, err := w.write(frame)
	return err
}

// flush sends the pending bytes, if any, and waits for them; sent reports
// that there were some. timer is as for send.
func (w *wire) flush(timer *time.Timer, timeout time.Duration) (sent bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending == nil {
		return false, nil
	}
	w.arm(timer, timeout)
	defer w.disarm()
	return true, w.flushLocked()
}

// arm starts the write timeout of a send; each chunk written re-arms it
// until disarm. Called with mu held.
func (w *wire) arm(timer *time.Timer, timeout time.Duration) {
	w.timer, w.timeout = timer, timeout
	timer.Reset(timeout)
}

func (w *wire) disarm() {
	w.timer.Stop()
	w.timer = nil
}

// trySend writes the frame in bp's buffer at off without waiting; mu is
// held (TryLock) and nothing is pending. left: the kernel did not take
// all of it, and the rest is pending with the buffer, which the wire now
// owns; otherwise the caller keeps bp.
func (w *wire) trySend(bp *[]byte, off int) (left bool, err error) {
	if w.closeSent {
		return false, errCloseSent
	}
	if !w.direct() {
		return false, errNotDirect
	}
	p := (*bp)[off:]
	n, err := w.conn.writeNow(p)
	rest := p[n:]
	if err != nil || len(rest) == 0 {
		return false, err
	}
	w.pending, w.pendingOff = bp, len(*bp)-len(rest)
	return true, nil
}

// hasPending reports bytes waiting for the socket's writer. Called with
// mu held.
func (w *wire) hasPending() bool { return w.pending != nil }

// putFrame gives a frame buffer back to framePool, unless it grew too
// large to keep.
func putFrame(bp *[]byte) {
	if cap(*bp) <= maxPooledFrame {
		*bp = (*bp)[:0]
		framePool.Put(bp)
	}
}

// prefixConn reads r (buffered bytes, then the connection) and is the
// connection for everything else.
type prefixConn struct {
	net.Conn
	prefix []byte // read before the connection; let go once read
}

// Read serves the prefix first, then the connection. One goroutine reads
// (the socket's reader), as with any net.Conn read.
func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) == 0 {
		return c.Conn.Read(p)
	}
	n := copy(p, c.prefix)
	if c.prefix = c.prefix[n:]; len(c.prefix) == 0 {
		c.prefix = nil
	}
	return n, nil
}

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
