package hub

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// fakeHijacker hands over a connection whose reader already holds bytes,
// as net/http's does when its background read took the start of a frame.
type fakeHijacker struct {
	http.ResponseWriter
	conn net.Conn
	br   *bufio.Reader
}

func (f fakeHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return f.conn, bufio.NewReadWriter(f.br, bufio.NewWriter(f.conn)), nil
}

// The small reader keeps read-ahead bytes first, also after the WebSocket
// library resets it onto the connection (as coder/websocket's Accept does).
func TestSmallReadBufferKeepsReadAhead(t *testing.T) {
	for _, ahead := range []string{"", "abc"} {
		server, client := net.Pipe()
		br := bufio.NewReader(io.MultiReader(bytes.NewReader([]byte(ahead)), server))
		if ahead != "" {
			if _, err := br.Peek(len(ahead)); err != nil {
				t.Fatal(err)
			}
		}
		w := &socketHijacker{ResponseWriter: fakeHijacker{ResponseWriter: httptest.NewRecorder(), conn: server, br: br}}
		conn, brw, err := w.Hijack()
		if err != nil {
			t.Fatal(err)
		}
		if brw.Reader.Size() != socketReadBuffer || brw.Writer.Size() != socketWriteBuffer || w.cork == nil {
			t.Fatalf("reader size %d, writer size %d, cork %v", brw.Reader.Size(), brw.Writer.Size(), w.cork)
		}
		b, _ := brw.Reader.Peek(brw.Reader.Buffered())
		brw.Reader.Reset(io.MultiReader(bytes.NewReader(b), conn))
		go func() {
			client.Write([]byte("def"))
			client.Close()
		}()
		got, err := io.ReadAll(brw.Reader)
		if err != nil && err != io.ErrClosedPipe {
			t.Fatal(err)
		}
		if string(got) != ahead+"def" {
			t.Fatalf("read %q, want %q", got, ahead+"def")
		}
		conn.Close()
	}
}

// countConn counts the writes that reach the connection.
type countConn struct {
	net.Conn
	writes [][]byte
}

func (c *countConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

// Corked, a frame written in pieces (header, then a payload larger than
// the write buffer) reaches the connection in one write; uncorked, writes
// pass straight through.
func TestCorkWriterOneWritePerFrame(t *testing.T) {
	cc := &countConn{}
	cw := &corkWriter{conn: cc}
	bw := bufio.NewWriterSize(cw, socketWriteBuffer)
	payload := bytes.Repeat([]byte("x"), 10000)
	cw.cork(len(payload) + 2)
	bw.Write([]byte{0x81, 0x7e})
	bw.Write(payload)
	bw.Flush()
	if len(cc.writes) != 0 {
		t.Fatalf("%d writes while corked", len(cc.writes))
	}
	if err := cw.uncork(); err != nil {
		t.Fatal(err)
	}
	if len(cc.writes) != 1 || len(cc.writes[0]) != len(payload)+2 || cc.writes[0][0] != 0x81 {
		t.Fatalf("writes %d, first %d bytes", len(cc.writes), len(cc.writes[0]))
	}
	bw.Write([]byte{0x8a, 0x00}) // a pong outside any frame of ours
	bw.Flush()
	if len(cc.writes) != 2 || !bytes.Equal(cc.writes[1], []byte{0x8a, 0x00}) {
		t.Fatalf("pass-through: %q", cc.writes)
	}
}
