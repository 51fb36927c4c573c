package hub

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// wire is the sending side of a tab socket's connection: every byte sent on
// the socket goes through it, one whole WebSocket frame at a time under mu.
// The hub frames what it sends itself (text frames, unmasked and
// uncompressed, as a server's are: frameOf); the WebSocket library writes
// only its control frames (pong, close) through Write, each in one call
// (socketWriteBuffer holds the largest).
//
// There are two ways to send, and only the socket's own goroutines ever
// wait on the connection:
//
//   - send (the socket's writer goroutine) and Write (the library, on the
//     socket's reader or writer goroutine) wait until the frame is written.
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
	conn net.Conn
	raw  syscall.RawConn // for trySend; nil: not a plain socket, trySend never sends

	mu         sync.Mutex
	pending    *[]byte // a pooled frame buffer whose bytes from pendingOff on are not sent yet
	pendingOff int
	closeSent  bool // the library sent a close frame: nothing may follow it
	// While the socket's writer sends (send), each chunk written re-arms
	// timer for timeout.
	timer   *time.Timer
	timeout time.Duration
	// The non-blocking write in progress (trySend): what is left to write,
	// and its error. nbWrite, made once, is the function that writes it.
	nbLeft  []byte
	nbErr   error
	nbWrite func(fd uintptr) bool
}

// writeChunk is the unit of write progress: at 16 KiB a tab reading
// 16 KiB per WriteTimeout keeps its socket.
const writeChunk = 16 << 10

// frameHeadroom is the room a frame buffer keeps before its payload for
// the WebSocket header (at most 10 bytes for a server's frame).
const frameHeadroom = 10

// errCloseSent: a close frame went out, so no data frame may follow it.
var errCloseSent = errors.New("hub: the socket's close frame was sent")

func newWire(conn net.Conn) *wire {
	w := &wire{conn: conn}
	under := conn
	if pc, ok := conn.(*prefixConn); ok {
		under = pc.Conn // its writes go straight to the socket
	}
	if sc, ok := under.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			w.raw = raw
		}
	}
	w.nbWrite = func(fd uintptr) bool {
		for len(w.nbLeft) > 0 {
			n, err := syscall.Write(int(fd), w.nbLeft)
			if n > 0 {
				w.nbLeft = w.nbLeft[n:]
			}
			if err == syscall.EINTR {
				continue
			}
			if err != nil && err != syscall.EAGAIN {
				w.nbErr = err
			}
			if err != nil || n <= 0 {
				break
			}
		}
		return true // never wait: what is left goes to pending
	}
	return w
}

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

// Write is what the WebSocket library writes to: its control frames,
// each whole. It waits for pending bytes and the frame to be written.
func (w *wire) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.flushLocked(); err != nil {
		return 0, err
	}
	if len(p) > 0 && p[0]&0x0f == 0x8 {
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
	w.nbLeft, w.nbErr = (*bp)[off:], nil
	if err := w.raw.Write(w.nbWrite); err != nil {
		w.nbLeft = nil
		return false, err
	}
	rest, err := w.nbLeft, w.nbErr
	w.nbLeft, w.nbErr = nil, nil
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
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

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
