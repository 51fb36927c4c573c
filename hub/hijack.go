package hub

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// socketReadBuffer is the read buffer of a tab socket. net/http hands a
// hijacked connection over with a 4 KiB bufio.Reader that the WebSocket
// library keeps for the socket's life; tabs send a few small messages
// (hello, watch, focus, controls), so a small buffer serves them as well
// and saves ~3.5 KiB per open socket. Larger client frames are read
// through it unbuffered.
const socketReadBuffer = 512

// socketWriteBuffer is the WebSocket library's write buffer of a tab
// socket: it only ever holds a frame header on its way to the corkWriter,
// which collects a whole frame and sends it with one write. (net/http's
// 4 KiB writer cost ~4 KiB per socket and split every frame larger than
// it into two writes.)
const socketWriteBuffer = 16

// socketHijacker wraps the upgrade's ResponseWriter so that Hijack returns
// the connection with a socketReadBuffer-sized reader (keeping any bytes
// net/http had already read ahead) and a writer that goes through a
// corkWriter, kept in cork for the socket.
type socketHijacker struct {
	http.ResponseWriter
	cork *corkWriter
}

func (w *socketHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("hub: the response writer cannot hijack")
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return conn, brw, err
	}
	// net/http has written the upgrade's answer (Hijack flushes it); what
	// is left in its writer would be nothing, but send it all the same.
	if err := brw.Writer.Flush(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	if n := brw.Reader.Buffered(); n > 0 {
		// Bytes read ahead of the upgrade (net/http's background read can
		// take the start of the first frame) come first. They go in the
		// connection, not the reader: the WebSocket library resets the
		// reader onto the connection it is given.
		b, _ := brw.Reader.Peek(n)
		conn = &prefixConn{Conn: conn, r: io.MultiReader(bytes.NewReader(bytes.Clone(b)), conn)}
	}
	w.cork = &corkWriter{conn: conn}
	return conn, bufio.NewReadWriter(bufio.NewReaderSize(conn, socketReadBuffer), bufio.NewWriterSize(w.cork, socketWriteBuffer)), nil
}

// prefixConn reads r (buffered bytes, then the connection) and is the
// connection for everything else.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// corkWriter is what the WebSocket library writes to. Normally it writes
// through to the connection; between cork and uncork (around one frame the
// socket's writer sends) it collects the bytes in a pooled buffer and
// uncork sends them with one write, so a frame's header and payload never
// cost two system calls. A control frame the library writes meanwhile
// (pong, close) is collected and sent with it, in order.
//
// Writes to the connection go in chunks of writeChunk bytes, each reported
// to progress (when set): the socket's write timeout counts from the last
// chunk the tab took, not from the frame's start, so a tab that reads
// slowly but steadily is never cut mid-frame; one that reads nothing for
// the timeout is.
type corkWriter struct {
	conn   net.Conn
	mu     sync.Mutex
	corked bool
	buf    *[]byte
	// While the socket's writer sends a frame (between frameStart and
	// frameEnd), each chunk written re-arms timer for timeout.
	timer   *time.Timer
	timeout time.Duration
}

// writeChunk is the unit of write progress: at 16 KiB a tab reading
// 16 KiB per WriteTimeout keeps its socket.
const writeChunk = 16 << 10

func (w *corkWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.corked {
		*w.buf = append(*w.buf, p...)
		return len(p), nil
	}
	return w.write(p)
}

// write sends p in chunks, reporting each. Called with mu held.
func (w *corkWriter) write(p []byte) (int, error) {
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

// frameStart arms timer for timeout and re-arms it on every chunk written
// until frameEnd.
func (w *corkWriter) frameStart(timer *time.Timer, timeout time.Duration) {
	w.mu.Lock()
	w.timer, w.timeout = timer, timeout
	timer.Reset(timeout)
	w.mu.Unlock()
}

// frameEnd stops the timer and the re-arming.
func (w *corkWriter) frameEnd() {
	w.mu.Lock()
	w.timer.Stop()
	w.timer = nil
	w.mu.Unlock()
}

// cork starts collecting; size is the frame about to be written.
func (w *corkWriter) cork(size int) {
	w.mu.Lock()
	w.corked = true
	w.buf = framePool.Get().(*[]byte)
	*w.buf = slices.Grow((*w.buf)[:0], size+16)
	w.mu.Unlock()
}

// uncork sends what was collected with one write and stops collecting.
func (w *corkWriter) uncork() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.corked = false
	b := w.buf
	w.buf = nil
	var err error
	if len(*b) > 0 {
		_, err = w.write(*b)
	}
	if cap(*b) <= maxPooledFrame {
		*b = (*b)[:0]
		framePool.Put(b)
	}
	return err
}
