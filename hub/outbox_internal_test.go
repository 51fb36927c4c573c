package hub

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// An unwatched session's unsent status leaves no trace: the next frame has
// no empty line where it was, and a later status of that session is sent
// once.
func TestOutbox_DropStatusesLeavesNoEmptyLine(t *testing.T) {
	var o outbox
	o.putStatus("s1", []byte(`{"type":"status","session_id":"s1"}`))
	o.putStatus("s2", []byte(`{"type":"status","session_id":"s2"}`))
	o.dropStatuses([]string{"s1"})
	frame, _ := o.take(nil, 1<<20)
	if got, want := string(frame), `{"type":"status","session_id":"s2"}`; got != want {
		t.Fatalf("frame after dropping s1 = %q, want %q", got, want)
	}

	o.putStatus("s2", []byte(`{"type":"status","session_id":"s2","n":2}`))
	o.dropStatuses([]string{"s2"})
	o.putStatus("s2", []byte(`{"type":"status","session_id":"s2","n":3}`))
	frame, _ = o.take(nil, 1<<20)
	if got := strings.Count(string(frame), "\n") + 1; got != 1 || strings.Contains(string(frame), "\n\n") || !strings.HasSuffix(string(frame), `"n":3}`) {
		t.Fatalf("frame after re-queuing s2 = %q, want the one status n=3", frame)
	}
	if o.statuses != nil {
		t.Fatalf("outbox keeps %v / %d statuses after a full take", o.statuses.order, len(o.statuses.frames))
	}
}

// A full take lets the status queue's map and order go: a socket the
// senders write never retires a writer (which shrinks the queues), and an
// idle one kept the buckets of its initial watch.
func TestOutbox_FullTakeLetsTheStatusQueueGo(t *testing.T) {
	var o outbox
	offers := make([]statusOffer, 50)
	for i := range offers {
		offers[i] = statusOffer{sid: "s" + strconv.Itoa(i), frame: []byte(`{"type":"status"}`)}
	}
	o.putStatuses(offers)
	if frame, _ := o.take(nil, 64); len(frame) == 0 || o.statuses == nil {
		t.Fatalf("a partial take (%d bytes) dropped the queue", len(frame))
	}
	for {
		if frame, _ := o.take(nil, 1<<20); len(frame) == 0 {
			break
		}
	}
	if o.statuses != nil {
		t.Fatalf("after a full take the outbox keeps a map of %d and an order of cap %d", len(o.statuses.frames), cap(o.statuses.order))
	}
	o.putStatus("s1", []byte(`{"type":"status","n":2}`))
	if frame, _ := o.take(nil, 1<<20); string(frame) != `{"type":"status","n":2}` {
		t.Fatalf("a status after the queue was let go: %q", frame)
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
