package hub

import (
	"slices"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/hub/metrics"
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

// putStatus queues a session's status, replacing an unsent older one;
// false: the socket is closing.
func (o *outbox) putStatus(sid string, frame []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return false
	}
	if o.statuses == nil {
		o.statuses = map[string][]byte{}
	}
	if _, ok := o.statuses[sid]; !ok {
		o.statusOrder = append(o.statusOrder, sid)
	}
	o.statuses[sid] = frame
	return true
}

// putStatuses is putStatus for several sessions under one lock.
func (o *outbox) putStatuses(offers []statusOffer) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return false
	}
	if o.statuses == nil {
		o.statuses = make(map[string][]byte, len(offers))
	}
	for _, of := range offers {
		if _, ok := o.statuses[of.sid]; !ok {
			o.statusOrder = append(o.statusOrder, of.sid)
		}
		o.statuses[of.sid] = of.frame
	}
	return true
}

// dropStatuses voids the unsent statuses of sids (unwatched).
func (o *outbox) dropStatuses(sids []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(o.statuses)
	for _, sid := range sids {
		delete(o.statuses, sid)
	}
	if len(o.statuses) != n {
		// The order must not keep a dropped session: take would write an
		// empty line for it, and putStatus would queue it twice.
		o.statusOrder = slices.DeleteFunc(o.statusOrder, func(sid string) bool {
			_, ok := o.statuses[sid]
			return !ok
		})
	}
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
	o.closing, o.closeCode, o.closeReason = true, websocket.StatusCode(code), reason
	return true
}

// closed reports whether a close was requested.
func (o *outbox) closed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closing
}

// closeStatus is the requested close's code and reason.
func (o *outbox) closeStatus() (websocket.StatusCode, string) {
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
	n = 0
	for ; n < len(o.statusOrder) && (len(buf) == base || len(buf)+len(o.statuses[o.statusOrder[n]]) < limit); n++ {
		sid := o.statusOrder[n]
		buf = appendLine(buf, o.statuses[sid])
		delete(o.statuses, sid)
	}
	o.statusOrder = compactStrings(o.statusOrder, n)
	if len(o.statusOrder) == 0 {
		// Every status taken: the map and the order let go of their
		// buckets (a socket that never retires a writer goroutine, being
		// written by the senders, would keep them: ~1.1 KiB per idle
		// socket after the initial watch).
		o.statuses, o.statusOrder = nil, nil
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
	if !o.closing {
		for _, sid := range o.statusOrder {
			need += len(o.statuses[sid]) + 1
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
	if len(o.statusOrder) == 0 {
		o.statuses, o.statusOrder = nil, nil
	}
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
	for _, b := range o.statuses {
		s.QueuedBytes += len(b)
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

func compactStrings(q []string, n int) []string {
	if n == 0 {
		return q
	}
	m := copy(q, q[n:])
	return q[:m]
}
