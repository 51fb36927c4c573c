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
		if brw.Reader.Size() != socketReadBuffer || brw.Writer.Size() != socketWriteBuffer || w.wire == nil {
			t.Fatalf("reader size %d, writer size %d, wire %v", brw.Reader.Size(), brw.Writer.Size(), w.wire)
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
