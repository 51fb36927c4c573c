package hub

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
)

// socketReadBuffer is the read buffer of a tab socket. net/http hands a
// hijacked connection over with a 4 KiB bufio.Reader that the WebSocket
// library keeps for the socket's life; tabs send a few small messages
// (hello, watch, focus, controls), so a small buffer serves them as well
// and saves ~4 KiB per open socket. It holds a frame's header (at most 14
// bytes) and the start of its payload; the rest of a payload longer than
// the buffer is read into the message unbuffered, so a client frame costs
// one or two reads of the connection.
const socketReadBuffer = 64

// socketWriteBuffer is the WebSocket library's write buffer of a tab
// socket. The hub frames its messages itself (wire), so the library writes
// only control frames (pong, close: at most 2 bytes of header and 125 of
// payload), and this holds each whole: the wire gets every one in a single
// Write. (net/http's 4 KiB writer cost ~4 KiB per socket.)
const socketWriteBuffer = 128

// socketHijacker wraps the upgrade's ResponseWriter so that Hijack returns
// the connection with a socketReadBuffer-sized reader (keeping any bytes
// net/http had already read ahead) and a writer that goes through the
// socket's wire, kept in wire for the socket.
type socketHijacker struct {
	http.ResponseWriter
	wire *wire
	br   *bufio.Reader // the reader handed to the WebSocket library
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
		conn = &prefixConn{Conn: conn, prefix: bytes.Clone(b)}
	}
	w.wire = newWire(conn)
	conn = w.wire.conn // its Close stops the wire's direct writes first
	w.br = bufio.NewReaderSize(conn, socketReadBuffer)
	return conn, bufio.NewReadWriter(w.br, bufio.NewWriterSize(w.wire, socketWriteBuffer)), nil
}

// unwrapReader points the socket's reader at its connection again, once
// the WebSocket library has accepted it. The library resets the reader it
// is given onto an io.MultiReader of what the reader held and the
// connection (in case net/http's reader had read ahead); this reader is
// new and held nothing (bytes read ahead are in the connection:
// prefixConn), and nothing has read from it yet, so the MultiReader
// (56 bytes an open socket kept, and a level of indirection per read)
// goes.
func (w *socketHijacker) unwrapReader() {
	if w.br != nil && w.br.Buffered() == 0 {
		w.br.Reset(w.wire.conn)
	}
}
