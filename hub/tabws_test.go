package hub_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// The hub reads tab sockets itself (hub/tabws.go): the handshake, control
// frames, fragments and every protocol violation, checked here with the
// WebSocket library's client and with raw frames.

// dialLib opens a tab socket with the library's client and says hello.
func dialLib(t *testing.T, th *testHub) *websocket.Conn {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(th.URL, "http")+"/v1/ws", &websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"hello","client":"t"}`)); err != nil {
		t.Fatal(err)
	}
	readType(t, c, protocol.MsgWelcome)
	return c
}

// readType reads messages until one of type typ.
func readType(t *testing.T, c *websocket.Conn, typ string) string {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for %s: %v", typ, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"type":"`+typ+`"`) {
				return line
			}
		}
	}
}

// A ping gets its pong; a message sent in fragments is read whole; the
// tab's close gets the hub's close back (the library's Close returns nil
// only when the closing handshake completes).
func TestTabWS_PingFragmentsClose(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	c := dialLib(t, th)
	ctx := ctxT(t, 10*time.Second)
	go func() { // the client reads the hub's messages while it pings
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return
			}
		}
	}()
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	writeFragments(t, c, `{"type":"pi`, `ng","id":`, `"frag1"}`)
	if err := c.Ping(ctx); err != nil { // still alive after the fragments
		t.Fatalf("ping after fragments: %v", err)
	}
	if err := c.Close(websocket.StatusNormalClosure, "bye"); err != nil {
		t.Fatalf("closing handshake: %v", err)
	}
}

// A message sent in fragments is one message: its answer comes.
func TestTabWS_FragmentedMessageIsOneMessage(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	c := dialLib(t, th)
	writeFragments(t, c, `{"type":"pi`, `ng","id":`, `"frag1"}`)
	if line := readType(t, c, protocol.MsgPong); !strings.Contains(line, `"id":"frag1"`) {
		t.Fatalf("pong %s, want id frag1", line)
	}
}

// writeFragments sends one text message in a frame per part (the
// library's message writer writes a frame per Write).
func writeFragments(t *testing.T, c *websocket.Conn, parts ...string) {
	t.Helper()
	w, err := c.Writer(ctxT(t, 10*time.Second), websocket.MessageText)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range parts {
		if _, err := w.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// rawWS is a tab socket spoken to in raw frames.
type rawWS struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

// dialRawWS upgrades a raw connection with the given extra request lines
// and returns it with the answer's status line.
func dialRawWS(t *testing.T, th *testHub, header string) (*rawWS, string) {
	t.Helper()
	u, _ := url.Parse(th.URL)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(15 * time.Second))
	req := "GET /v1/ws HTTP/1.1\r\nHost: " + u.Host + "\r\n" + header + "\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	r := &rawWS{t: t, c: c, br: bufio.NewReader(c)}
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	status := resp.Status
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(resp.Body)
		status += " " + strings.TrimSpace(string(b))
		if v := resp.Header.Get("Sec-WebSocket-Version"); v != "" {
			status += " [version " + v + "]"
		}
	} else if got, want := resp.Header.Get("Sec-WebSocket-Accept"), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="; got != want {
		t.Fatalf("Sec-WebSocket-Accept %q, want %q (RFC 6455's example)", got, want)
	}
	return r, status
}

// upgradedRaw is dialRawWS of a good upgrade (header), which must be
// answered 101.
func upgradedRaw(t *testing.T, th *testHub, header string) *rawWS {
	t.Helper()
	r, status := dialRawWS(t, th, header)
	if !strings.HasPrefix(status, "101") {
		t.Fatalf("upgrade: %s", status)
	}
	return r
}

const goodUpgrade = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: runhub.v1\r\n"

// frame writes one client frame (masked unless told not to).
func (r *rawWS) frame(b0 byte, payload []byte, masked bool) {
	r.t.Helper()
	var out []byte
	out = append(out, b0)
	mask := byte(0)
	if masked {
		mask = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		out = append(out, mask|byte(n))
	case n <= 0xffff:
		out = append(out, mask|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, mask|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	p := append([]byte(nil), payload...)
	if masked {
		key := [4]byte{1, 2, 3, 4}
		out = append(out, key[:]...)
		for i := range p {
			p[i] ^= key[i&3]
		}
	}
	if _, err := r.c.Write(append(out, p...)); err != nil {
		r.t.Fatal(err)
	}
}

// next reads the hub's next frame: its opcode and payload.
func (r *rawWS) next() (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r.br, h[:]); err != nil {
		return 0, nil, err
	}
	n := int(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		io.ReadFull(r.br, b[:])
		n = int(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		io.ReadFull(r.br, b[:])
		n = int(binary.BigEndian.Uint64(b[:]))
	}
	p := make([]byte, n)
	_, err := io.ReadFull(r.br, p)
	return h[0] & 0x0f, p, err
}

// closeFrame reads until the hub's close frame and returns its code, or
// -1 when the connection ends without one.
func (r *rawWS) closeFrame() int {
	for {
		op, p, err := r.next()
		if err != nil {
			return -1
		}
		if op == 0x8 {
			if len(p) < 2 {
				return 1005
			}
			return int(binary.BigEndian.Uint16(p))
		}
	}
}

// Each violation of RFC 6455 gets the close code coder/websocket gave it,
// and ends the socket.
func TestTabWS_ProtocolViolations(t *testing.T) {
	th := newTestHub(t, hub.Config{MaxFrameBytes: 4096})
	hello := []byte(`{"type":"hello","client":"t"}`)
	cases := []struct {
		name string
		send func(r *rawWS)
		want int // the close code; -1: the connection closed without one
	}{
		{"unmasked frame", func(r *rawWS) { r.frame(0x81, hello, false) }, -1},
		{"reserved bit", func(r *rawWS) { r.frame(0xc1, hello, true) }, 1002},
		{"unknown opcode", func(r *rawWS) { r.frame(0x83, hello, true) }, 1002},
		{"continuation first", func(r *rawWS) { r.frame(0x80, hello, true) }, 1002},
		{"new message mid-message", func(r *rawWS) { r.frame(0x01, hello[:5], true); r.frame(0x81, hello, true) }, 1002},
		{"fragmented ping", func(r *rawWS) { r.frame(0x09, []byte("p"), true) }, 1002},
		{"long ping", func(r *rawWS) { r.frame(0x89, make([]byte, 126), true) }, 1002},
		{"close code 1005 on the wire", func(r *rawWS) { r.frame(0x88, []byte{0x03, 0xed}, true) }, 1002},
		{"close payload of one byte", func(r *rawWS) { r.frame(0x88, []byte{0x03}, true) }, 1002},
		{"over the limit in one frame", func(r *rawWS) { r.frame(0x81, make([]byte, 5000), true) }, 1009},
		{"over the limit in fragments", func(r *rawWS) {
			r.frame(0x01, make([]byte, 3000), true)
			r.frame(0x80, make([]byte, 3000), true)
		}, 1009},
		{"the tab's close, echoed", func(r *rawWS) { r.frame(0x88, []byte{0x0f, 0xa0, 'x'}, true) }, 4000},
		{"an empty close, echoed", func(r *rawWS) { r.frame(0x88, nil, true) }, 1005},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := upgradedRaw(t, th, goodUpgrade)
			tc.send(r)
			if got := r.closeFrame(); got != tc.want {
				t.Fatalf("close code %d, want %d", got, tc.want)
			}
			r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, _, err := r.next(); err == nil || errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
				t.Fatalf("the socket stays open after the close (%v)", err)
			}
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A ping between the fragments of a message is answered, and the message
// read whole; a pong is taken silently.
func TestTabWS_ControlBetweenFragments(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	r := upgradedRaw(t, th, goodUpgrade)
	msg := []byte(`{"type":"hello","client":"t"}`)
	r.frame(0x01, msg[:10], true)
	r.frame(0x89, []byte("are you there"), true)
	r.frame(0x8a, []byte("unasked"), true)
	r.frame(0x80, msg[10:], true)
	gotPong, gotWelcome := false, false
	for !gotPong || !gotWelcome {
		op, p, err := r.next()
		if err != nil {
			t.Fatalf("pong %v, welcome %v: %v", gotPong, gotWelcome, err)
		}
		switch {
		case op == 0xa && string(p) == "are you there":
			gotPong = true
		case op == 0x1 && strings.Contains(string(p), `"type":"welcome"`):
			gotWelcome = true
		default:
			t.Fatalf("unexpected frame %x %q", op, p)
		}
	}
}

// A bad upgrade gets coder/websocket's answers; an upgrade without the
// runhub.v1 subprotocol is accepted, then closed with 1008.
func TestTabWS_Handshake(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	cases := []struct {
		name, header, want string
	}{
		{"no Connection: Upgrade", "Upgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n",
			`426 Upgrade Required WebSocket protocol violation: Connection header "" does not contain Upgrade`},
		{"no Upgrade: websocket", "Connection: keep-alive, Upgrade\r\nUpgrade: h2c\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n",
			`426 Upgrade Required WebSocket protocol violation: Upgrade header "h2c" does not contain websocket`},
		{"version 8", "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n",
			`400 Bad Request unsupported WebSocket protocol version (only 13 is supported): "8" [version 13]`},
		{"no key", "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n",
			`400 Bad Request WebSocket protocol violation: missing Sec-WebSocket-Key`},
		{"a short key", "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: c2hvcnQ=\r\nSec-WebSocket-Version: 13\r\n",
			`400 Bad Request WebSocket protocol violation: invalid Sec-WebSocket-Key "c2hvcnQ=", must be a 16 byte base64 encoded string`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, status := dialRawWS(t, th, tc.header); status != tc.want {
				t.Fatalf("answer %q, want %q", status, tc.want)
			}
		})
	}
	r := upgradedRaw(t, th, strings.Replace(goodUpgrade, "runhub.v1", "other.v2", 1))
	if got := r.closeFrame(); got != 1008 {
		t.Fatalf("close code %d, want 1008", got)
	}
}

// A long message in fragments of odd sizes, each read in growing chunks,
// is unmasked right across every boundary.
func TestTabWS_LongFragmentedMessage(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	r := upgradedRaw(t, th, goodUpgrade)
	hello := []byte(`{"type":"hello","client":"t"}`)
	r.frame(0x81, hello, true)
	// The second fragment is read in two chunks (4,097 bytes, as much as
	// the message holds, then the rest), the second from an odd offset:
	// the id at its end is right only if the mask continues there.
	msg := []byte(`{"type":"ping","pad":"` + strings.Repeat("0123456789abcdef", 512) + `","id":"big-one"}`)
	r.frame(0x01, msg[:4097], true)
	r.frame(0x80, msg[4097:], true)
	for {
		op, p, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		if op == 0x1 && strings.Contains(string(p), `"type":"pong"`) {
			if !strings.Contains(string(p), `"id":"big-one"`) {
				t.Fatalf("pong %s", p)
			}
			return
		}
		if op == 0x1 && strings.Contains(string(p), `"type":"error"`) {
			t.Fatalf("the long message read wrong: %s", p)
		}
	}
}

// A continuation frame whose 64-bit length is 2^63-1, after a first
// fragment of one byte, is over the limit: the check must not add the
// two lengths (that sum overflows and passed before). It is answered
// 1009 at once, before hello (no token needed) and after it, and the
// hub keeps none of what follows.
func TestTabWS_LimitOverflowAnswered1009(t *testing.T) {
	for _, afterHello := range []bool{false, true} {
		name := "before hello"
		if afterHello {
			name = "after hello"
		}
		t.Run(name, func(t *testing.T) {
			th := newTestHub(t, hub.Config{})
			heapBefore := liveHeap()
			r := upgradedRaw(t, th, goodUpgrade)
			if afterHello {
				r.frame(0x81, []byte(`{"type":"hello","client":"t"}`), true)
				if op, p, err := r.next(); err != nil || op != 0x1 || !strings.Contains(string(p), `"welcome"`) {
					t.Fatalf("after hello: op %d %s %v", op, p, err)
				}
			}
			r.frame(0x01, []byte("x"), true) // FIN clear: a message begins
			hdr := []byte{0x80, 0x80 | 127}  // a continuation, masked, 64-bit length
			hdr = binary.BigEndian.AppendUint64(hdr, 1<<63-1)
			hdr = append(hdr, 1, 2, 3, 4)
			if _, err := r.c.Write(hdr); err != nil {
				t.Fatal(err)
			}
			// What follows the header: the hub must not read it in.
			go func() {
				junk := make([]byte, 64<<10)
				for range 32 {
					if _, err := r.c.Write(junk); err != nil {
						return
					}
				}
			}()
			if got := r.closeFrame(); got != 1009 {
				t.Fatalf("close code %d, want 1009 (message too big)", got)
			}
			if grown := liveHeap() - heapBefore; grown > 1<<20 {
				t.Fatalf("the hub's live heap grew %d bytes", grown)
			}
		})
	}
}

// liveHeap is the process's live heap after a collection.
func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// A socket past hello that sends part of a frame (of its header, of a
// control frame's payload, of a data frame's payload) or part of a
// message, then nothing (or dribbles empty fragments and pings), is closed with 1008 once FrameTimeout runs out,
// and its goroutine ends; one that stays idle between messages for
// longer is never closed. The bound here is generous (rawWS's 15 s read
// deadline): the test fails only if the socket is never closed.
func TestTabWS_PartialFrameTimesOut(t *testing.T) {
	th := newTestHub(t, hub.Config{FrameTimeout: 200 * time.Millisecond})
	hello := func(r *rawWS) {
		r.frame(0x81, []byte(`{"type":"hello","client":"t"}`), true)
		if op, p, err := r.next(); err != nil || op != 0x1 || !strings.Contains(string(p), `"welcome"`) {
			t.Fatalf("hello: op %d %s %v", op, p, err)
		}
	}
	raw := func(r *rawWS, b ...byte) {
		if _, err := r.c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		send func(r *rawWS)
	}{
		{"half a header", func(r *rawWS) { raw(r, 0x81) }},
		{"a header without its mask key", func(r *rawWS) { raw(r, 0x81, 0x85, 1, 2) }},
		{"a ping claiming 125 bytes, none sent", func(r *rawWS) { raw(r, 0x89, 0x80|125, 1, 2, 3, 4) }},
		{"a data frame claiming 1000 bytes, 10 sent", func(r *rawWS) {
			raw(r, append([]byte{0x81, 0x80 | 126, 0x03, 0xe8, 1, 2, 3, 4}, make([]byte, 10)...)...)
		}},
		{"the first fragment of a message", func(r *rawWS) { r.frame(0x01, []byte(`{"type":`), true) }},
		{"empty fragments and pings, never the last", func(r *rawWS) {
			r.frame(0x01, []byte(`{"type":`), true)
			go func() { // up to 2 s of dribble, ten times FrameTimeout; ends when the hub closes
				for range 20 {
					// An empty continuation and a ping with payload "p", masked with 0.
					if _, err := r.c.Write([]byte{0x00, 0x80, 0, 0, 0, 0, 0x89, 0x81, 0, 0, 0, 0, 'p'}); err != nil {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := upgradedRaw(t, th, goodUpgrade)
			hello(r)
			tc.send(r)
			if got := r.closeFrame(); got != 1008 {
				t.Fatalf("close code %d, want 1008", got)
			}
			if _, _, err := r.next(); err == nil || isTimeout(err) {
				t.Fatalf("the socket stays open after the close (%v)", err)
			}
			// Its goroutine and buffer are let go: the hub forgets it.
			waitFor(t, 15*time.Second, "the socket to end", func() bool { return th.Hub.Conns() == 0 })
		})
	}
	t.Run("idle between messages", func(t *testing.T) {
		r := upgradedRaw(t, th, goodUpgrade)
		hello(r)
		time.Sleep(time.Second) // five times FrameTimeout, with no frame begun
		r.frame(0x81, []byte(`{"type":"ping","id":"still"}`), true)
		for {
			op, p, err := r.next()
			if err != nil || op == 0x8 {
				t.Fatalf("the idle socket was closed: op %d %s %v", op, p, err)
			}
			if strings.Contains(string(p), `"id":"still"`) {
				return
			}
		}
	})
}
