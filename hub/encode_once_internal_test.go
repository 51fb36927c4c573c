package hub

import (
	"bytes"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/runhub/runhub/protocol"
)

// writerless is a socket whose writer never starts: what it is offered
// stays in its queues.
func writerless(env *socketEnv) *conn {
	return &conn{socketEnv: env, w: writer{wake: make(chan struct{}, 1), stopped: true}}
}

// routerRig is a router with n sockets focusing session s_1 at run r_1,
// none with a writer (what they are offered stays in their queues).
func routerRig(n int) (*router, []*conn) {
	h := &Hub{}
	h.cfg.defaults()
	r := newRouter(h)
	f := &sessionFeed{sid: "s_1", conns: map[*conn]struct{}{}, runID: "r_1"}
	r.feeds["s_1"] = f
	env := &socketEnv{cfg: &h.cfg}
	conns := make([]*conn, n)
	for i := range conns {
		c := writerless(env)
		c.out.events = make([][]byte, 0, 1)
		c.out.focus = focusState{sid: "s_1", runID: "r_1", next: 1}
		f.conns[c] = struct{}{}
		f.list = append(f.list, c)
		conns[i] = c
	}
	return r, conns
}

func tokenEnvelope(seq uint64) protocol.Envelope {
	return protocol.Envelope{EventID: protocol.EventID("r_1", seq), Seq: seq, RunID: "r_1", SessionID: "s_1",
		Type: protocol.EventTokenDelta, CreatedAt: 1778750000.5, Payload: json.RawMessage(`{"message_id":"m1","text":"w "}`)}
}

// A live event delivered to N sockets is encoded once: every socket queues
// the same bytes (one backing array), and delivering to 500 sockets
// allocates about as much as delivering to one.
func TestDeliverEncodesOnce(t *testing.T) {
	r, conns := routerRig(500)
	e := tokenEnvelope(1)
	r.deliver("s_1", &e)
	first := conns[0].out.events[0]
	for i, c := range conns {
		if len(c.out.events) != 1 || unsafe.SliceData(c.out.events[0]) != unsafe.SliceData(first) {
			t.Fatalf("socket %d: %d events, a frame of its own: encoded per socket", i, len(c.out.events))
		}
	}
	want, _ := protocol.EncodeEvent(nil, &e)
	if !bytes.Equal(first, want) {
		t.Fatalf("frame %s, want %s", first, want)
	}
	allocs := func(r *router, conns []*conn) float64 {
		next := conns[0].out.focus.next
		events := make([]protocol.Envelope, 201) // AllocsPerRun runs it once more to warm up
		for i := range events {
			events[i] = tokenEnvelope(next + uint64(i))
		}
		i := 0
		return testing.AllocsPerRun(200, func() {
			for _, c := range conns {
				c.out.events = c.out.events[:0]
			}
			r.deliver("s_1", &events[i])
			i++
		})
	}
	r1, one := routerRig(1)
	a1, a500 := allocs(r1, one), allocs(r, conns)
	// AllocsPerRun counts the whole process's allocations, so other
	// goroutines can add a few; anything per socket adds 499 or more.
	if a500 > a1+50 {
		t.Fatalf("delivering to 500 sockets: %v allocations, to 1: %v: something is per socket", a500, a1)
	}
	t.Logf("allocations per delivered event: %v for 1 socket, %v for 500", a1, a500)
}

// A changed status is encoded once for all its watchers: every tab is
// offered the same bytes.
func TestStatusEncodedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCadenceRig(t, 0)
		tabs := make([]*conn, 50)
		for i := range tabs {
			tabs[i] = r.tab()
		}
		synctest.Wait()
		r.emit(protocol.EventRunStarted, protocol.RunStartedPayload{Message: "hi"})
		time.Sleep(time.Millisecond)
		synctest.Wait()
		var first []byte
		for i, c := range tabs {
			c.out.mu.Lock()
			var f statusFrame
			if q := c.out.statuses; q != nil {
				f, _ = q.get("s_1")
			}
			c.out.mu.Unlock()
			if f.frameParts == nil {
				t.Fatalf("tab %d: no status queued", i)
			}
			if frame := f.appendTo(nil); !bytes.Contains(frame, []byte(`"status":"running"`)) {
				t.Fatalf("tab %d: status %s, want running", i, frame)
			}
			if first == nil {
				first = f.base
			} else if unsafe.SliceData(f.base) != unsafe.SliceData(first) {
				t.Fatalf("tab %d: a status frame of its own: encoded per tab", i)
			}
		}
	})
}

// Everything waiting for a socket — messages, statuses, events — leaves in
// one NDJSON frame (one WebSocket message, sent with one write: the
// wire, TestWireOneWritePerFrame), in that order.
func TestTakeOneFramePerFlush(t *testing.T) {
	h := &Hub{}
	h.cfg.defaults()
	c := writerless(&socketEnv{cfg: &h.cfg})
	c.out.msgs = [][]byte{[]byte(`{"type":"pong","id":"p1"}`)}
	c.offerStatuses([]statusFrame{plainFrame("s_1", []byte(`{"type":"status","n":1}`)), plainFrame("s_2", []byte(`{"type":"status","n":2}`))})
	c.offerStatus(plainFrame("s_1", []byte(`{"type":"status","n":3}`))) // replaces s_1's unsent one
	for i := range 3 {
		c.out.events = append(c.out.events, []byte(`{"type":"event","i":`+string(rune('0'+i))+`}`))
	}
	frame, done := c.out.take(nil, h.cfg.MaxBatchBytes)
	want := `{"type":"pong","id":"p1"}` + "\n" + `{"type":"status","n":3}` + "\n" + `{"type":"status","n":2}` + "\n" +
		`{"type":"event","i":0}` + "\n" + `{"type":"event","i":1}` + "\n" + `{"type":"event","i":2}`
	if done || string(frame) != want {
		t.Fatalf("frame (done %v):\n%s\nwant:\n%s", done, frame, want)
	}
	if rest, _ := c.out.take(nil, h.cfg.MaxBatchBytes); len(rest) != 0 {
		t.Fatalf("a second frame: %s", rest)
	}
}
