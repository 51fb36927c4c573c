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
// library resets it onto the connection (as coder/websocket's Accept does)
// and the hub points it at the connection again (unwrapReader) — which
// never drops what the reader already holds.
func TestSmallReadBufferKeepsReadAhead(t *testing.T) {
	for _, tc := range []struct {
		ahead    string
		buffered bool // the reader has read from the connection before unwrapReader
	}{{"", false}, {"abc", false}, {"", true}, {"abc", true}} {
		ahead := tc.ahead
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
		if tc.buffered {
			if _, err := brw.Reader.Peek(len(ahead) + 1); err != nil {
				t.Fatal(err)
			}
		}
		w.unwrapReader()
		got, err := io.ReadAll(brw.Reader)
		if err != nil && err != io.ErrClosedPipe {
			t.Fatal(err)
		}
		if string(got) != ahead+"def" {
			t.Fatalf("%+v: read %q, want %q", tc, got, ahead+"def")
		}
		conn.Close()
	}
}
