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

// The socket's small reader gives the bytes net/http had read ahead of the
// upgrade first, then the connection's.
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
		if err := w.hijack(); err != nil {
			t.Fatal(err)
		}
		if w.br.Size() != socketReadBuffer || w.wire == nil {
			t.Fatalf("reader size %d, wire %v", w.br.Size(), w.wire)
		}
		go func() {
			client.Write([]byte("def"))
			client.Close()
		}()
		got, err := io.ReadAll(w.br)
		if err != nil && err != io.ErrClosedPipe {
			t.Fatal(err)
		}
		if string(got) != ahead+"def" {
			t.Fatalf("read %q, want %q", got, ahead+"def")
		}
		w.wire.conn.Close()
	}
}
