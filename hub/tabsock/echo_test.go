package tabsock_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/runhub/runhub/hub/tabsock"
)

// An echo server over the package's reader and writer, and a raw client:
// what the conformance table (autobahn_test.go) and the UTF-8 tests
// drive. The hub is no echo server; this loop is the test's.

// echo serves c: every message read goes back as it came (text or
// binary), until a read fails; then c is closed.
func echo(c *tabsock.Conn) {
	defer c.Close()
	timer := time.AfterFunc(time.Hour, func() { c.Close() })
	timer.Stop()
	for {
		typ, p, err := c.ReadMessage()
		if err != nil {
			return
		}
		bp := tabsock.GetFrame()
		buf := append((*bp)[:tabsock.FrameHeadroom], p...)
		frame := tabsock.TextFrame(buf)
		if typ == tabsock.MessageBinary {
			frame[0] = 0x82
		}
		err = c.Send(frame, timer, 10*time.Second)
		*bp = buf
		tabsock.PutFrame(bp)
		if err != nil {
			return
		}
	}
}

// peer is the client's end of a socket served by echo.
type peer struct {
	t   *testing.T
	c   net.Conn
	br  *bufio.Reader
	out chan []byte // what the writer goroutine writes, in order
}

// echoPeer serves a socket with echo over net.Pipe and returns its client.
func echoPeer(t *testing.T, opts tabsock.Options) *peer {
	t.Helper()
	client, server := net.Pipe()
	go echo(tabsock.NewConn(server, opts))
	t.Cleanup(func() { client.Close() })
	client.SetDeadline(time.Now().Add(20 * time.Second)) // a hang fails, never a timing
	p := &peer{t: t, c: client, br: bufio.NewReader(client), out: make(chan []byte, 1024)}
	go func() {
		// net.Pipe's writes wait for the reader, and the server may be
		// writing back meanwhile (an echo): the client writes on a
		// goroutine of its own, in order, and stops once the server has
		// stopped reading (what it answered is what the tests check).
		for b := range p.out {
			if _, err := client.Write(b); err != nil {
				for range p.out {
				}
				return
			}
		}
	}()
	t.Cleanup(func() { close(p.out) })
	return p
}

// clientFrame is a client's frame: its first byte (FIN, RSV, opcode),
// masked with a fixed key, the payload's length in the shortest form.
func clientFrame(b0 byte, p []byte) []byte {
	out := []byte{b0}
	switch n := len(p); {
	case n < 126:
		out = append(out, 0x80|byte(n))
	case n <= 0xffff:
		out = append(out, 0x80|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, 0x80|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	out = append(out, key[:]...)
	for i, b := range p {
		out = append(out, b^key[i&3])
	}
	return out
}

// send queues raw bytes for the client's writer.
func (p *peer) send(b []byte) { p.out <- b }

// frame sends one client frame.
func (p *peer) frame(b0 byte, payload []byte) { p.send(clientFrame(b0, payload)) }

// next reads the server's next frame; ok is false when the connection
// ended.
func (p *peer) next() (op byte, payload []byte, ok bool) {
	var h [2]byte
	if _, err := io.ReadFull(p.br, h[:]); err != nil {
		return 0, nil, false
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		io.ReadFull(p.br, b[:])
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		io.ReadFull(p.br, b[:])
		n = binary.BigEndian.Uint64(b[:])
	}
	if h[1]&0x80 != 0 {
		p.t.Fatal("the server masked a frame")
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(p.br, payload); err != nil {
		return 0, nil, false
	}
	return h[0], payload, true
}

// closed reads to the server's close frame and the connection's end, and
// returns the close code (0: the connection ended without a close frame;
// 1005: a close frame without a code) and its reason.
func (p *peer) closed() (int, string) {
	for {
		op, payload, ok := p.next()
		if !ok {
			return 0, ""
		}
		if op&0x0f == 0x8 {
			if len(payload) < 2 {
				p.drain()
				return 1005, ""
			}
			p.drain()
			return int(binary.BigEndian.Uint16(payload)), string(payload[2:])
		}
	}
}

// drain reads until the connection ends (the server closes it after its
// close frame).
func (p *peer) drain() {
	for {
		if _, _, ok := p.next(); !ok {
			return
		}
	}
}
