package hub

import (
	"bufio"
	"bytes"
	"errors"
	"net/http"
)

// socketReadBuffer is the read buffer of a tab socket. net/http hands a
// hijacked connection over with a 4 KiB bufio.Reader; tabs send a few
// small messages (hello, watch, focus, controls), so a small buffer serves
// them as well and saves ~4 KiB per open socket. It holds a frame's header
// (at most 14 bytes) and the start of its payload; the rest of a payload
// longer than the buffer is read into the message unbuffered, so a client
// frame costs one or two reads of the connection.
const socketReadBuffer = 64

// socketHijacker wraps the upgrade's ResponseWriter: acceptTab answers
// the upgrade through it, and hijack takes the connection over with a
// socketReadBuffer-sized reader (keeping any bytes net/http had already
// read ahead) and the socket's wire, kept in wire and br for the socket.
type socketHijacker struct {
	http.ResponseWriter
	wire *wire
	br   *bufio.Reader
}

// hijack takes the connection over once the upgrade's answer is set
// (net/http writes it as it hands the connection over).
func (w *socketHijacker) hijack() error {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return errors.New("hub: the response writer cannot hijack")
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return err
	}
	// net/http has written the upgrade's answer (Hijack flushes it); what
	// is left in its writer would be nothing, but send it all the same.
	if err := brw.Writer.Flush(); err != nil {
		conn.Close()
		return err
	}
	if n := brw.Reader.Buffered(); n > 0 {
		// Bytes read ahead of the upgrade (net/http's background read can
		// take the start of the first frame) come first: the connection
		// gives them before its own.
		b, _ := brw.Reader.Peek(n)
		conn = &prefixConn{Conn: conn, prefix: bytes.Clone(b)}
	}
	w.wire = newWire(conn)
	w.br = bufio.NewReaderSize(w.wire.conn, socketReadBuffer)
	return nil
}
