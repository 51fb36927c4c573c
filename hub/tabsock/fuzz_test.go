package tabsock_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/hub/tabsock"
)

// memConn is a server's connection in memory: it reads the client's
// bytes, then EOF, and keeps every write, each a whole frame (both
// readers write one control frame per call).
type memConn struct {
	in     *bytes.Reader
	mu     sync.Mutex
	writes [][]byte
	// onWrite, when set, is told of each write as it happens (the order
	// of a server's writes among the messages it read).
	onWrite func(p []byte)
}

func (m *memConn) Read(p []byte) (int, error) { return m.in.Read(p) }
func (m *memConn) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes = append(m.writes, bytes.Clone(p))
	if m.onWrite != nil {
		m.onWrite(bytes.Clone(p))
	}
	return len(p), nil
}
func (m *memConn) Close() error                     { return nil }
func (m *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (m *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (m *memConn) SetDeadline(time.Time) error      { return nil }
func (m *memConn) SetReadDeadline(time.Time) error  { return nil }
func (m *memConn) SetWriteDeadline(time.Time) error { return nil }

// event is what a server did, in order: a message it read ("text" or
// "binary" and the payload), or a control frame it wrote ("pong" and its
// payload; "close" and its code, as a decimal, 1005 for none).
type event struct{ kind, data string }

// controlEvent is the event of a control frame a server wrote.
func controlEvent(frame []byte) event {
	if len(frame) < 2 {
		return event{"junk", string(frame)}
	}
	p := frame[2:]
	switch frame[0] & 0x0f {
	case 0xa:
		return event{"pong", string(p)}
	case 0x8:
		if len(p) < 2 {
			return event{"close", "1005"}
		}
		return event{"close", itoa(int(binary.BigEndian.Uint16(p)))}
	}
	return event{"frame", string(frame)}
}

func itoa(n int) string { return string(binary.BigEndian.AppendUint16(nil, uint16(n))) }

func msgEvent(text bool, p []byte) event {
	if text {
		return event{"text", string(p)}
	}
	return event{"binary", string(p)}
}

// ours runs the package's reader over in: its events, and whether the
// input ended inside a message (cut).
func ours(in []byte, limit int64) (evs []event, cut bool) {
	mc := &memConn{in: bytes.NewReader(in)}
	mc.onWrite = func(p []byte) { evs = append(evs, controlEvent(p)) }
	c := tabsock.NewConn(mc, tabsock.Options{ReadLimit: limit})
	for {
		typ, p, err := c.ReadMessage()
		if err != nil {
			cut = err != io.EOF && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF))
			break
		}
		evs = append(evs, msgEvent(typ == tabsock.MessageText, p))
	}
	c.Close()
	return evs, cut
}

// hijackable is an http.ResponseWriter that hands over a memConn.
type hijackable struct {
	http.ResponseWriter
	conn net.Conn
}

func (h hijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return h.conn, bufio.NewReadWriter(bufio.NewReader(h.conn), bufio.NewWriter(h.conn)), nil
}

// theirs runs coder/websocket's server Conn (Accept on a hijackable
// writer) over in: its events.
func theirs(t *testing.T, in []byte, limit int64) []event {
	var mu sync.Mutex
	var evs []event
	mc := &memConn{in: bytes.NewReader(in)}
	mc.onWrite = func(p []byte) {
		mu.Lock()
		evs = append(evs, controlEvent(p))
		mu.Unlock()
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Version", "13")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	c, err := websocket.Accept(hijackable{httptest.NewRecorder(), mc}, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if limit < 0 {
		c.SetReadLimit(-1)
	} else {
		c.SetReadLimit(limit)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		typ, p, err := c.Read(ctx)
		if err != nil {
			break
		}
		mu.Lock()
		evs = append(evs, msgEvent(typ == websocket.MessageText, p))
		mu.Unlock()
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(evs)
}

// expected is coder/websocket's events as the package must give them,
// where the two legitimately differ:
//   - UTF-8 (RFC 6455 §8.1, docs/protocol.md §7.3): a text message that
//     is not UTF-8, or a close frame echoed with a reason that is not,
//     is a close 1007 instead, and nothing after it;
//   - the read limit: the package answers 1009 at the header of the
//     frame that goes over it; coder/websocket reads the payload up to
//     the limit first, so when the input ends before that it ends with
//     no close frame (FuzzDifferential allows it);
//   - a message cut short by the end of the connection: coder/websocket
//     returns it as a whole message, the package does not (nor 1009 at
//     a header over the limit: FuzzDifferential allows both).
func expected(evs []event, reasons map[int]string) []event {
	for i, e := range evs {
		if e.kind == "text" && !utf8.ValidString(e.data) {
			return append(slices.Clone(evs[:i]), event{"close", itoa(1007)})
		}
		if e.kind == "close" && !utf8.ValidString(reasons[i]) {
			return append(slices.Clone(evs[:i]), event{"close", itoa(1007)})
		}
	}
	return evs
}

// closeReasons maps the close events of evs to their reasons (the last
// writes of coder/websocket are its close frames).
func closeReasons(writes [][]byte, evs []event) map[int]string {
	out := map[int]string{}
	w := 0
	for i, e := range evs {
		if e.kind != "pong" && e.kind != "close" {
			continue
		}
		for w < len(writes) && controlEvent(writes[w]) != e {
			w++
		}
		if w < len(writes) && e.kind == "close" && len(writes[w]) > 4 {
			out[i] = string(writes[w][4:])
		}
		w++
	}
	return out
}

// FuzzDifferential sends the same client bytes to the package's reader
// and to coder/websocket's server Conn: both must read the same messages
// and write the same control frames (pongs, and the close code), up to
// the differences expected documents.
func FuzzDifferential(f *testing.F) {
	for _, seed := range seedStreams() {
		f.Add(seed, uint16(1024))
	}
	f.Fuzz(func(t *testing.T, in []byte, lim uint16) {
		limit := int64(lim)
		if lim == 0xffff {
			limit = -1
		}
		got, cut := ours(in, limit)
		theirEvs, reasons := theirsWithReasons(t, in, limit)
		want := expected(theirEvs, reasons)
		if slices.Equal(got, want) {
			return
		}
		tooBig := event{"close", itoa(1009)}
		// The read limit: 1009 at the header, where coder/websocket ran out
		// of input before reaching the limit.
		if n := len(got); n > 0 && got[n-1] == tooBig && slices.Equal(got[:n-1], want) {
			return
		}
		// A message cut short by the end of the input: coder/websocket's
		// message reader takes the connection's io.EOF for the message's
		// end and returns what it has; the package returns nothing (or
		// 1009 for a header over the limit).
		if n := len(theirEvs); n > 0 && (theirEvs[n-1].kind == "text" || theirEvs[n-1].kind == "binary") {
			short := expected(theirEvs[:n-1], reasons)
			if cut && slices.Equal(got, short) || slices.Equal(got, append(slices.Clone(short), tooBig)) {
				return
			}
		}
		t.Fatalf("input % x (limit %d)\n ours:   %q\n theirs: %q", in, limit, got, want)
	})
}

func theirsWithReasons(t *testing.T, in []byte, limit int64) ([]event, map[int]string) {
	evs := theirs(t, in, limit)
	// Run again keeping the raw writes, for the close reasons.
	mc := &memConn{in: bytes.NewReader(in)}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Version", "13")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	c, err := websocket.Accept(hijackable{httptest.NewRecorder(), mc}, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(max(limit, -1))
	for {
		if _, _, err := c.Read(context.Background()); err != nil {
			break
		}
	}
	c.CloseNow()
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return evs, closeReasons(mc.writes, evs)
}

// seedStreams are client byte streams for the fuzzers' corpora: a message
// of each kind, fragments with a ping between, the close frames, and the
// violations of RFC 6455 the package answers.
func seedStreams() [][]byte {
	cat := func(frames ...[]byte) []byte { return bytes.Join(frames, nil) }
	long := bytes.Repeat([]byte("x"), 300)
	return [][]byte{
		clientFrame(0x81, []byte(`{"type":"hello"}`)),
		clientFrame(0x82, []byte{0, 1, 2}),
		cat(clientFrame(0x01, []byte("ab")), clientFrame(0x89, []byte("p")), clientFrame(0x80, []byte("cd"))),
		clientFrame(0x89, []byte("ping")),
		clientFrame(0x8a, []byte("pong")),
		clientFrame(0x88, []byte{0x03, 0xe8, 'b', 'y', 'e'}),
		clientFrame(0x88, nil),
		clientFrame(0x88, []byte{0x03}),
		clientFrame(0x88, []byte{0x03, 0xed}),
		clientFrame(0xc1, []byte("rsv")),
		clientFrame(0x83, []byte("op")),
		clientFrame(0x80, []byte("cont")),
		cat(clientFrame(0x01, []byte("a")), clientFrame(0x81, []byte("b"))),
		clientFrame(0x09, []byte("frag ping")),
		clientFrame(0x89, bytes.Repeat([]byte("p"), 126)),
		clientFrame(0x81, long),
		clientFrame(0x81, []byte("caf\xc3")),
		clientFrame(0x88, []byte{0x03, 0xe8, 0xff}),
		append([]byte{0x81, 0x05}, "hello"...),                                   // unmasked
		{0x81, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4}, // 2^63-1 claimed
		{0x81, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4},                      // negative length
		{0x82, 0xff, 0, 0, 0, 0, 0, 0x0f, 0, 0, 1, 2, 3, 4, 'a', 'b'},            // 983,040 bytes claimed, 2 sent
		cat(clientFrame(0x01, []byte("x")), []byte{0x80, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4}),
	}
}

// FuzzBounds reads any client bytes, whatever lengths their headers
// claim, through Serve (the reader goroutine and a goroutine per
// message): no message is over the read limit, the bytes allocated stay
// within a constant plus a few times the bytes the client sent (a header
// claiming a megabyte with nothing behind it allocates no megabyte), and
// every goroutine ends once the input does.
func FuzzBounds(f *testing.F) {
	for _, seed := range seedStreams() {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, in []byte, unlimited bool) {
		limit := int64(1 << 20)
		if unlimited {
			limit = -1
		}
		base := runtime.NumGoroutine()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c := tabsock.NewConn(&memConn{in: bytes.NewReader(in)}, tabsock.Options{ReadLimit: limit})
		r := &boundReader{c: c, limit: limit, done: make(chan struct{})}
		c.Serve(nil, r)
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			t.Fatal("the socket never ended with its input")
		}
		runtime.ReadMemStats(&after)
		if r.over != nil {
			t.Fatal(r.over)
		}
		if grown := after.TotalAlloc - before.TotalAlloc; grown > 64<<10+8*uint64(len(in)) {
			t.Fatalf("%d bytes allocated reading %d bytes", grown, len(in))
		}
		for deadline := time.Now().Add(20 * time.Second); runtime.NumGoroutine() > base; {
			if time.Now().After(deadline) {
				t.Fatalf("%d goroutines left, %d before", runtime.NumGoroutine(), base)
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// boundReader reads a socket's messages for FuzzBounds (tabsock.Reader).
type boundReader struct {
	c     *tabsock.Conn
	limit int64
	over  error
	done  chan struct{}
}

func (r *boundReader) Next() bool {
	_, p, err := r.c.ReadMessage()
	if err == nil && r.limit >= 0 && int64(len(p)) > r.limit {
		r.over = errors.New("a message over the read limit")
	}
	return err == nil
}

func (r *boundReader) End() {
	r.c.Close()
	close(r.done)
}
