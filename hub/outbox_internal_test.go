package hub

import (
	"strconv"
	"strings"
	"testing"
)

// An unwatched session's unsent status leaves no trace: the next frame has
// no empty line where it was, and a later status of that session is sent
// once.
func TestOutbox_DropStatusesLeavesNoEmptyLine(t *testing.T) {
	var o outbox
	o.putStatus(plainFrame("s1", []byte(`{"type":"status","session_id":"s1"}`)))
	o.putStatus(plainFrame("s2", []byte(`{"type":"status","session_id":"s2"}`)))
	o.dropStatuses([]string{"s1"})
	frame, _ := o.take(nil, 1<<20)
	if got, want := string(frame), `{"type":"status","session_id":"s2"}`; got != want {
		t.Fatalf("frame after dropping s1 = %q, want %q", got, want)
	}

	o.putStatus(plainFrame("s2", []byte(`{"type":"status","session_id":"s2","n":2}`)))
	o.dropStatuses([]string{"s2"})
	o.putStatus(plainFrame("s2", []byte(`{"type":"status","session_id":"s2","n":3}`)))
	frame, _ = o.take(nil, 1<<20)
	if got := strings.Count(string(frame), "\n") + 1; got != 1 || strings.Contains(string(frame), "\n\n") || !strings.HasSuffix(string(frame), `"n":3}`) {
		t.Fatalf("frame after re-queuing s2 = %q, want the one status n=3", frame)
	}
	if o.statuses != nil {
		t.Fatalf("outbox keeps %v / %d statuses after a full take", o.statuses.items[o.statuses.head:], len(o.statuses.index))
	}
}

// A full take lets the status queue's map and order go: a socket the
// senders write never retires a writer (which shrinks the queues), and an
// idle one kept the buckets of its initial watch.
func TestOutbox_FullTakeLetsTheStatusQueueGo(t *testing.T) {
	var o outbox
	offers := make([]statusFrame, 50)
	for i := range offers {
		offers[i] = plainFrame("s"+strconv.Itoa(i), []byte(`{"type":"status"}`))
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
		t.Fatalf("after a full take the outbox keeps a queue of cap %d", cap(o.statuses.items))
	}
	o.putStatus(plainFrame("s1", []byte(`{"type":"status","n":2}`)))
	if frame, _ := o.take(nil, 1<<20); string(frame) != `{"type":"status","n":2}` {
		t.Fatalf("a status after the queue was let go: %q", frame)
	}
}

// The status queue keeps one status per session, the newest, in the order
// sessions first got one, whatever its length (a slice, and a map of
// positions once long), and a queue that never empties — its socket's
// writer always behind, statuses taken from the front while new ones come
// — does not grow for it.
func TestStatusQueue_NewestPerSessionInOrder(t *testing.T) {
	for _, n := range []int{3, statusIndexFrom - 1, statusIndexFrom, 5 * statusIndexFrom} {
		var o outbox
		sid := func(i int) string { return "s" + strconv.Itoa(i) }
		msg := func(i, v int) statusFrame {
			return plainFrame(sid(i), []byte(`{"s":`+strconv.Itoa(i)+`,"v":`+strconv.Itoa(v)+`}`))
		}
		for i := range n {
			o.putStatus(msg(i, 1))
		}
		for i := 0; i < n; i += 2 {
			o.putStatus(msg(i, 2)) // replaces, keeps its place
		}
		o.dropStatuses([]string{sid(1)})
		var want []string
		for i := range n {
			switch {
			case i == 1:
			case i%2 == 0:
				want = append(want, `{"s":`+strconv.Itoa(i)+`,"v":2}`)
			default:
				want = append(want, `{"s":`+strconv.Itoa(i)+`,"v":1}`)
			}
		}
		frame, _ := o.take(nil, 1<<20)
		if got := strings.Split(string(frame), "\n"); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("%d sessions: took\n%s\nwant\n%s", n, got, want)
		}
		if o.statuses != nil {
			t.Fatalf("%d sessions: the queue is kept after a full take", n)
		}

		// Never empty: take a few from the front while as many come.
		for i := range n {
			o.putStatus(msg(i, 1))
		}
		next := n
		for round := range 50 * n {
			frame, _ := o.take(nil, 1) // one status per take
			if !strings.Contains(string(frame), `"v":1}`) || strings.Contains(string(frame), "\n") {
				t.Fatalf("%d sessions, round %d: took %q, want one status", n, round, frame)
			}
			o.putStatus(msg(next, 1))
			next++
			q := o.statuses
			if q == nil || len(q.items)-q.head != n {
				t.Fatalf("%d sessions, round %d: %v unsent, want %d", n, round, q, n)
			}
			if cap(q.items) > 4*n+2*statusIndexFrom {
				t.Fatalf("%d sessions, round %d: the queue grew to %d for %d unsent", n, round, cap(q.items), n)
			}
		}
	}
}

// get returns sid's unsent status (for tests: the hub only takes them in
// order).
func (q *statusQueue) get(sid string) (statusFrame, bool) {
	if i := q.find(sid); i >= 0 {
		return q.items[i], true
	}
	return statusFrame{}, false
}
