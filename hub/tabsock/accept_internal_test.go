package tabsock

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
		c, err := hijack(fakeHijacker{ResponseWriter: httptest.NewRecorder(), conn: server, br: br}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if c.br.Size() != ReadBuffer {
			t.Fatalf("reader size %d", c.br.Size())
		}
		go func() {
			client.Write([]byte("def"))
			client.Close()
		}()
		got, err := io.ReadAll(&c.br)
		if err != nil && err != io.ErrClosedPipe {
			t.Fatal(err)
		}
		if string(got) != ahead+"def" {
			t.Fatalf("read %q, want %q", got, ahead+"def")
		}
		c.Close()
	}
}

// The bytes net/http read ahead of the upgrade come first, then the
// connection's, and are let go once read.
func TestPrefixConn_ReadsThePrefixFirst(t *testing.T) {
	server, client := net.Pipe()
	defer server.Close()
	c := &prefixConn{Conn: server, prefix: []byte("abcde")}
	go func() {
		client.Write([]byte("fgh"))
		client.Close()
	}()
	p := make([]byte, 3)
	var got []byte
	for {
		n, err := c.Read(p)
		got = append(got, p[:n]...)
		if err != nil {
			break
		}
	}
	if string(got) != "abcdefgh" || c.prefix != nil {
		t.Fatalf("read %q, prefix left %q", got, c.prefix)
	}
}
