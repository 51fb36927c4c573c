package hub

import (
	"slices"
	"sync"

	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/hub/tabsock"
)

// pushResult is what push did with a message.
type pushResult int

const (
	pushed     pushResult = iota
	pushClosed            // the socket is closing: dropped
	pushFull              // the queue is at its bound: dropped
)

// push queues a message unless the socket is closing or limit messages
// wait already.
func (o *outbox) push(b []byte, limit int) pushResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.closing:
		return pushClosed
	case len(o.msgs) >= limit:
		return pushFull
	}
	o.msgs = append(o.msgs, b)
	return pushed
}

// statusQueues holds the status queues of sockets with no status waiting:
// a socket takes one when a status is offered and gives it back once every
// status is taken, so an idle socket holds none, and a flush that offers
// every watching socket its statuses (every StatusInterval while a
// session's presence or progress changes) makes no queue per socket.
var statusQueues = sync.Pool{New: func() any { return new(statusQueue) }}

// maxPooledStatuses is the largest status queue given back to
// statusQueues; a larger one (a watch-all socket's) is let go.
const maxPooledStatuses = 256

// statusIndexFrom is the number of unsent statuses from which a queue
// finds a session's through a map rather than by looking at each: most
// sockets watch a few sessions, and a slice of their statuses is a
// fraction of a map's size (a burst of connecting tabs holds a queue per
// tab until the senders have written it).
const statusIndexFrom = 32

// queue returns the socket's status queue, taking one from statusQueues
// when it has none. Called with mu held.
func (o *outbox) queue() *statusQueue {
	if o.statuses == nil {
		o.statuses = statusQueues.Get().(*statusQueue)
	}
	return o.statuses
}

// letStatusesGo gives an empty status queue back. Called with mu held.
func (o *outbox) letStatusesGo() {
	q := o.statuses
	if q == nil {
		return
	}
	if _, ok := q.next(); ok {
		return
	}
	o.statuses = nil
	if cap(q.items) <= maxPooledStatuses {
		clear(q.items[:cap(q.items)])
		q.items, q.head, q.index = q.items[:0], 0, nil
		statusQueues.Put(q)
	}
}

// find returns the position of sid's unsent status, or -1.
func (q *statusQueue) find(sid string) int {
	if q.index != nil {
		if i, ok := q.index[sid]; ok {
			return i
		}
		return -1
	}
	for i := q.head; i < len(q.items); i++ {
		if !q.items[i].none() && q.items[i].sid == sid {
			return i
		}
	}
	return -1
}

// put queues a session's status, replacing its unsent older one.
func (q *statusQueue) put(frame statusFrame) {
	if i := q.find(frame.sid); i >= 0 {
		q.items[i] = frame
		return
	}
	if q.head >= statusIndexFrom && q.head >= len(q.items)/2 {
		q.compact() // a queue that never empties (its writer behind) does not grow for it
	}
	q.items = append(q.items, frame)
	switch {
	case q.index != nil:
		q.index[frame.sid] = len(q.items) - 1
	case len(q.items)-q.head >= statusIndexFrom:
		q.index = make(map[string]int, len(q.items)-q.head)
		for i := q.head; i < len(q.items); i++ {
			if !q.items[i].none() {
				q.index[q.items[i].sid] = i
			}
		}
	}
}

// compact moves the unsent statuses to the front of items.
func (q *statusQueue) compact() {
	n := 0
	for _, st := range q.items[q.head:] {
		if !st.none() {
			q.items[n] = st
			if q.index != nil {
				q.index[st.sid] = n
			}
			n++
		}
	}
	clear(q.items[n:])
	q.items, q.head = q.items[:n], 0
}

// drop voids sid's unsent status.
func (q *statusQueue) drop(sid string) {
	if i := q.find(sid); i >= 0 {
		q.items[i] = statusFrame{}
		if q.index != nil {
			delete(q.index, sid)
		}
	}
}

// next returns the first unsent status without taking it (skipping the
// dropped ones); false: none.
func (q *statusQueue) next() (statusFrame, bool) {
	for q.head < len(q.items) && q.items[q.head].none() {
		q.head++
	}
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
		if len(q.index) == 0 {
			q.index = nil
		}
		return statusFrame{}, false
	}
	return q.items[q.head], true
}

// pop takes the status next returned.
func (q *statusQueue) pop() {
	if q.index != nil {
		delete(q.index, q.items[q.head].sid)
	}
	q.items[q.head] = statusFrame{}
	q.head++
}

// putStatus queues a session's status, replacing an unsent older one;
// false: the socket is closing.
func (o *outbox) putStatus(frame statusFrame) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return false
	}
	o.queue().put(frame)
	return true
}

// putStatuses is putStatus for several sessions under one lock.
func (o *outbox) putStatuses(offers []statusFrame) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return false
	}
	q := o.queue()
	for _, of := range offers {
		q.put(of)
	}
	return true
}

// dropStatuses voids the unsent statuses of sids (unwatched).
func (o *outbox) dropStatuses(sids []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := o.statuses
	if q == nil {
		return
	}
	for _, sid := range sids {
		q.drop(sid)
	}
	o.letStatusesGo()
}

// requestClose makes the writer send the queued messages and msg (if not
// nil), then close with code. False: a close was requested before, and
// nothing changed.
func (o *outbox) requestClose(msg []byte, code int, reason string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return false
	}
	if msg != nil {
		o.msgs = append(o.msgs, msg)
	}
	o.closing, o.closeCode, o.closeReason = true, tabsock.StatusCode(code), reason
	return true
}

// closed reports whether a close was requested.
func (o *outbox) closed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closing
}

// closeStatus is the requested close's code and reason.
func (o *outbox) closeStatus() (tabsock.StatusCode, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closeCode, o.closeReason
}

// setFocus replaces the focus with st under a new generation: the
// previous focus's undelivered events are void.
func (o *outbox) setFocus(st focusState) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st.gen = o.focus.gen + 1
	o.focus = st
	clear(o.events)
	o.events = o.events[:0]
}

// take moves what is waiting into buf as NDJSON, appended to what buf
// holds (a frame's headroom), up to about limit bytes: messages, then
// statuses, then events. done reports a requested close with nothing left
// to send.
func (o *outbox) take(buf []byte, limit int) ([]byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.takeLocked(buf, limit)
}

// takeLocked is take with mu held.
func (o *outbox) takeLocked(buf []byte, limit int) ([]byte, bool) {
	base := len(buf)
	limit += base
	buf = o.growFrame(buf, limit-base)
	n := 0
	for ; n < len(o.msgs) && (len(buf) == base || len(buf)+len(o.msgs[n]) < limit); n++ {
		buf = appendLine(buf, o.msgs[n])
		o.msgs[n] = nil
	}
	o.msgs = compact(o.msgs, n)
	if o.closing {
		// Closing: only the remaining messages (goaway, errors) matter.
		return trimNL(buf, base), len(o.msgs) == 0 && len(buf) == base
	}
	if q := o.statuses; q != nil {
		for {
			st, ok := q.next()
			if !ok || (len(buf) > base && len(buf)+st.size() >= limit) {
				break
			}
			buf = append(st.appendTo(buf), '\n')
			q.pop()
		}
		// Every status taken: the queue goes back to statusQueues (a socket
		// that never retires a writer goroutine, being written by the
		// senders, would keep it after the initial watch).
		o.letStatusesGo()
	}
	n = 0
	for ; n < len(o.events) && (len(buf) == base || len(buf)+len(o.events[n]) < limit); n++ {
		buf = appendLine(buf, o.events[n])
		o.events[n] = nil
	}
	o.events = compact(o.events, n)
	if o.settled != nil {
		o.checkSettled()
	}
	return trimNL(buf, base), false
}

// takeBusy is take for the socket's writer goroutine: a frame taken makes
// the outbox busy until release.
func (o *outbox) takeBusy(buf []byte, limit int) ([]byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	base := len(buf)
	buf, done := o.takeLocked(buf, limit)
	o.busy = len(buf) > base
	return buf, done
}

// release ends busy once the writer's frame is written, and keeps the
// writer's frame size for the senders.
func (o *outbox) release(limit int) {
	o.mu.Lock()
	o.busy, o.limit = false, limit
	o.mu.Unlock()
}

// writerNeeded reports work that only the socket's writer goroutine does,
// because it waits: a close (the closing handshake) or reading the
// journal for the focus. Called with mu held.
func (o *outbox) writerNeeded() bool {
	f := &o.focus
	return o.closing || (f.sid != "" && (f.lagging || f.verify || f.resolve))
}

// checkSettled closes the settle channel once the focus needs no journal
// read and no event waits. Called with out.mu held.
func (o *outbox) checkSettled() {
	f := &o.focus
	if o.settled == nil || len(o.events) > 0 || (f.sid != "" && (f.lagging || f.verify || f.resolve)) {
		return
	}
	close(o.settled)
	o.settled = nil
}

// growFrame makes room in buf for what take will move into it (at most
// about limit bytes), so a frame costs at most one allocation however many
// messages it carries. Called with mu held.
func (o *outbox) growFrame(buf []byte, limit int) []byte {
	need := 0
	for _, b := range o.msgs {
		need += len(b) + 1
	}
	if q := o.statuses; q != nil && !o.closing {
		for _, st := range q.items[q.head:] {
			if !st.none() {
				need += st.size() + 1
			}
		}
		for _, b := range o.events {
			if need >= limit {
				break
			}
			need += len(b) + 1
		}
	}
	return slices.Grow(buf, min(need, limit+64<<10))
}

// shrink lets an idle socket's empty queues go: they keep the capacity of
// their busiest moment (a replay fills events up to QueueEvents), and the
// status map its buckets. They are made again when needed.
func (o *outbox) shrink() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.events) == 0 {
		o.events = nil
	}
	if len(o.msgs) == 0 {
		o.msgs = nil
	}
	o.letStatusesGo()
}

// addStats adds the socket's queues and focus to s.
func (o *outbox) addStats(s *metrics.HubStats) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s.QueuedEvents += len(o.events)
	s.MaxQueueEvents = max(s.MaxQueueEvents, len(o.events))
	for _, b := range o.events {
		s.QueuedBytes += len(b)
	}
	for _, b := range o.msgs {
		s.QueuedBytes += len(b)
	}
	if q := o.statuses; q != nil {
		for _, st := range q.items[q.head:] {
			if !st.none() {
				s.QueuedBytes += st.size()
			}
		}
	}
	if o.focus.sid != "" {
		s.FocusedSockets++
	}
	if o.focus.lagging {
		s.Lagging++
	}
}

func appendLine(buf, line []byte) []byte {
	buf = append(buf, line...)
	return append(buf, '\n')
}

// trimNL drops the newline that ends buf past its first base bytes.
func trimNL(buf []byte, base int) []byte {
	if len(buf) > base && buf[len(buf)-1] == '\n' {
		return buf[:len(buf)-1]
	}
	return buf
}

// compact drops the first n entries, reusing the backing array.
func compact(q [][]byte, n int) [][]byte {
	if n == 0 {
		return q
	}
	m := copy(q, q[n:])
	clear(q[m:])
	return q[:m]
}
