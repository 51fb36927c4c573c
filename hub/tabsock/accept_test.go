package tabsock_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/hub/tabsock"
)

// hidden hides its ResponseWriter's Hijack behind Unwrap, as middleware
// that wraps the writer does (http.ResponseController follows Unwrap).
type hidden struct{ w http.ResponseWriter }

func (h hidden) Header() http.Header         { return h.w.Header() }
func (h hidden) Write(p []byte) (int, error) { return h.w.Write(p) }
func (h hidden) WriteHeader(code int)        { h.w.WriteHeader(code) }
func (h hidden) Unwrap() http.ResponseWriter { return h.w }
func (h opaque) Header() http.Header         { return h.w.Header() }
func (h opaque) Write(p []byte) (int, error) { return h.w.Write(p) }
func (h opaque) WriteHeader(code int)        { h.w.WriteHeader(code) }

// opaque hides Hijack with no way back to it.
type opaque struct{ w http.ResponseWriter }

// echoServer serves sockets that echo each message, through wrap.
func echoServer(t *testing.T, wrap func(http.ResponseWriter) http.ResponseWriter) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := tabsock.Accept(wrap(w), r, tabsock.Options{ReadLimit: 1 << 20})
		if err != nil {
			return
		}
		defer c.Close()
		for {
			typ, p, err := c.ReadMessage()
			if err != nil {
				return
			}
			if typ != tabsock.MessageText {
				continue
			}
			bp := tabsock.GetFrame()
			buf := append((*bp)[:tabsock.FrameHeadroom], p...)
			t := time.AfterFunc(time.Hour, func() { c.Close() })
			t.Stop()
			err = c.Send(tabsock.TextFrame(buf), t, 10*time.Second)
			*bp = buf
			tabsock.PutFrame(bp)
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The hijack follows Unwrap (as http.ResponseController and
// coder/websocket do): a socket behind a wrapping middleware is served.
func TestAccept_HijackFollowsUnwrap(t *testing.T) {
	srv := echoServer(t, func(w http.ResponseWriter) http.ResponseWriter { return hidden{w} })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatalf("upgrade through an Unwrap: %v", err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, p, err := c.Read(ctx); err != nil || string(p) != "hi" {
		t.Fatalf("echo %q, %v", p, err)
	}
}

// A ResponseWriter that cannot hijack is answered 501 before the 101 is
// set: the client gets the error, not a switch of protocols that never
// happens.
func TestAccept_CannotHijack501(t *testing.T) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Version", "13")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	if _, _, err := tabsock.Accept(opaque{rec}, r, tabsock.Options{}); err == nil {
		t.Fatal("accepted without a hijacker")
	}
	if rec.Code != http.StatusNotImplemented {
		t.Fatalf("status %d, want 501", rec.Code)
	}
	if got := rec.Header().Get("Sec-WebSocket-Accept"); got != "" {
		t.Fatalf("the refused upgrade carries Sec-WebSocket-Accept %q", got)
	}
}
