package hub

import (
	"runtime"
	"sync"
)

// sender writes for a group of sockets. A socket offered something (an
// event, a status, a message: signal) is put in its sender's ready list,
// and the sender writes it a frame of what waits; the socket's own writer
// goroutine is not woken. A hub has one sender per core (GOMAXPROCS) and
// gives each socket one in turn; a sender wakes once for all its sockets
// that were offered something meanwhile: a journal commit offers its
// events to many sockets in one go, and a busy sender never sleeps.
//
// A sender never waits on a socket: it takes the socket's wire with
// TryLock and writes one frame with a non-blocking write (wire.trySend).
// What it cannot do without waiting goes to the socket's writer goroutine
// (writer.go): the rest of a frame the kernel did not take whole, a wire
// busy with a write that may be waiting on a slow tab, reading the journal
// for the focus, the close. So a tab that stopped reading holds up only
// its own writer: the sender passes it by, its queue fills and it falls
// behind (offerEvent), as with a writer of its own.
//
// Locking: mu guards ready; nothing is taken while holding it. A socket is
// in ready at most once (conn.queued), so ready holds at most every socket.
type sender struct {
	mu    sync.Mutex
	ready []*conn
	wake  chan struct{}
	quit  chan struct{}
	done  chan struct{}
}

// newSenders makes a hub's senders: one per core.
func newSenders() []*sender {
	s := make([]*sender, max(1, runtime.GOMAXPROCS(0)))
	for i := range s {
		s[i] = newSender()
	}
	return s
}

func newSender() *sender {
	return &sender{wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

func (s *sender) start() { go s.loop() }

// stop ends the sender's goroutine and waits for it.
func (s *sender) stop() {
	close(s.quit)
	<-s.done
}

// push puts c in the ready list; the caller has set c.queued.
func (s *sender) push(c *conn) {
	s.mu.Lock()
	s.ready = append(s.ready, c)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sender) loop() {
	defer close(s.done)
	var batch []*conn
	for {
		select {
		case <-s.quit:
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			batch, s.ready = s.ready, batch[:0]
			s.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for i, c := range batch {
				c.sendNow()
				batch[i] = nil
			}
		}
	}
}

// sendNow is a sender's turn at the socket: one frame of what waits,
// written without waiting. A socket offered more meanwhile is in the
// ready list again (queued is cleared first).
func (c *conn) sendNow() {
	c.queued.Store(false)
	w := c.wire
	if !w.mu.TryLock() {
		// The writer goroutine or the WebSocket library is writing, and may
		// be waiting on a slow tab: the writer takes what waits after.
		c.wakeWriter()
		return
	}
	if w.hasPending() {
		w.mu.Unlock()
		c.wakeWriter() // bytes before ours wait for the writer
		return
	}
	o := &c.out
	o.mu.Lock()
	if o.busy {
		// The writer holds a frame it took and has not written yet: ours
		// would overtake it. It takes what waits after.
		o.mu.Unlock()
		w.mu.Unlock()
		return
	}
	if o.writerNeeded() {
		o.mu.Unlock()
		w.mu.Unlock()
		c.wakeWriter()
		return
	}
	limit := o.limit
	if limit == 0 {
		limit = c.cfg.MaxBatchBytes
	}
	bp := framePool.Get().(*[]byte)
	buf, _ := o.takeLocked((*bp)[:frameHeadroom], limit)
	o.mu.Unlock()
	*bp = buf
	if len(buf) == frameHeadroom {
		w.mu.Unlock()
		putFrame(bp)
		return
	}
	frame := frameOf(buf)
	left, err := w.trySend(bp, len(buf)-len(frame))
	w.mu.Unlock()
	if !left {
		putFrame(bp)
	}
	if err != nil {
		c.cancel()
		return
	}
	c.metrics.FrameWritten(len(buf) - frameHeadroom)
	if left {
		c.wakeWriter() // the rest of the frame: the writer may wait for the tab
	}
}
