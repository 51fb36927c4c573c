// Package tabsock is the server side of a browser tab's WebSocket
// (RFC 6455), made for a server with many mostly idle sockets: the opening
// handshake (Accept), reading a tab's messages with their control frames
// and the closing handshake (read.go), writing whole frames without a
// goroutine per socket (send.go) and an epoll set that waits for idle
// sockets' bytes so that they need no goroutine of their own (Poller,
// poller_linux.go).
//
// It answers as github.com/coder/websocket's Accept and Conn do (the same
// HTTP errors for a bad upgrade, the same close codes), without the
// library's per-socket Conn: a socket here is one Conn of ~0.3 KiB, a
// 64-byte read buffer, and whatever message is being read. What it does
// differently from the library is written in docs/protocol.md ("The tab
// socket's transport"): a deadline on every partial frame, and UTF-8
// checked as RFC 6455 §8.1 asks.
//
// It imports nothing of runhub.
package tabsock

import (
	"bufio"
	"net"
	"sync"
	"syscall"
	"time"
)

// ReadBuffer is a socket's read buffer. net/http hands a hijacked
// connection over with a 4 KiB bufio.Reader; tabs send a few small
// messages, so a small buffer serves them as well and saves ~4 KiB per
// open socket. It holds a frame's header (at most 14 bytes) and the start
// of its payload; the rest of a longer payload is read into the message
// unbuffered, so a frame costs one or two reads of the connection.
const ReadBuffer = 64

// ControlTimeout bounds writing a control frame, and waiting for the
// tab's close frame after ours.
const ControlTimeout = 5 * time.Second

// Options are a socket's settings.
type Options struct {
	// Subprotocols are the server's, in its order of preference (Accept
	// picks the first the client offers).
	Subprotocols []string
	// ReadLimit bounds a message's bytes (negative: no bound); a message
	// over it is answered 1009 before its payload is read.
	ReadLimit int64
	// FrameTimeout bounds the time from a frame's first byte until the
	// frame is whole, and for a message in fragments until its last
	// fragment is, control frames between them included (0: no bound).
	// A socket that sends part of a frame or of a message, then nothing
	// (or dribbles), is closed with 1008 when it runs out: its reader
	// goroutine and its buffer are held until then. A socket idle between
	// messages is never closed.
	FrameTimeout time.Duration
}

// Conn is one socket: its connection, the reading side (ReadMessage,
// under rmu) and the sending side (Send, TrySend: under mu).
//
// Locking: rmu is held by whoever reads the tab's frames (ReadMessage,
// CloseHandshake, Buffered). mu guards the sending side's fields and is
// held for a whole frame; a caller that writes for many sockets takes it
// with TryLock only. guard orders the direct writes (TrySend) before
// Close. The poller's fields are under the poller's lock.
type Conn struct {
	conn  net.Conn        // the connection (a prefixConn when net/http read ahead)
	fd    int             // -1: not a plain socket; TrySend never sends, the poller never waits
	raw   syscall.RawConn // the socket's, for WaitReadable (nil: not a plain socket)
	guard sync.RWMutex    // read-held by a direct write, write-held by Close
	shut  bool            // Close was called; under guard

	opts Options

	rmu     sync.Mutex
	br      bufio.Reader
	closeBy time.Time // the closing handshake's deadline (zero: none); under rmu
	armed   bool      // a frame's deadline is set; under rmu

	mu         sync.Mutex
	pending    *[]byte // a pooled frame buffer whose bytes from pendingOff on are not sent yet
	pendingOff int
	closeSent  bool // a close frame was sent: nothing may follow it
	// While Send runs, each chunk written re-arms timer for timeout.
	timer   *time.Timer
	timeout time.Duration

	poller *Poller // waits for its bytes (nil: none; Serve)
	reader Reader  // Serve's
	added  bool    // in the poller's set; under poller.mu
	gone   bool    // closed while registered with the poller; under poller.mu
}

// NewConn makes the socket of a connection already upgraded (Accept
// calls it; tests, fuzzers and any other server may too).
func NewConn(conn net.Conn, opts Options) *Conn {
	c := &Conn{conn: conn, fd: -1, opts: opts}
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
	c.br = *bufio.NewReaderSize(conn, ReadBuffer)
	return c
}

// Close closes the connection: the poller lets go of it first, and no
// direct write follows it (a closed descriptor may be another
// connection's by then), so Close waits for one in progress.
func (c *Conn) Close() error {
	if c.poller != nil {
		c.poller.closing(c)
	}
	c.guard.Lock()
	c.shut = true
	c.guard.Unlock()
	return c.conn.Close()
}

// Buffered reports bytes read from the connection (or ahead of the
// upgrade) that no frame has taken yet: a read would not wait.
func (c *Conn) Buffered() bool {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.buffered()
}

func (c *Conn) buffered() bool {
	pc, ok := c.conn.(*prefixConn)
	return c.br.Buffered() > 0 || ok && len(pc.prefix) > 0
}

// WaitReadable parks the calling goroutine until a read would not wait
// for the tab: bytes are buffered, or the connection has bytes, has ended
// or failed, or is closed. It reads nothing. A goroutine that waits here
// rather than in a read keeps the smallest stack, a few frames deep. On a
// connection that is not a plain socket it returns at once (the read then
// waits). A failure is left to the read that follows.
func (c *Conn) WaitReadable() {
	if c.raw == nil || c.Buffered() {
		return
	}
	_ = c.raw.Read(peekReadable)
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

// prefixConn reads prefix (bytes net/http read ahead of the upgrade),
// then the connection, and is the connection for everything else.
type prefixConn struct {
	net.Conn
	prefix []byte // let go once read
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
