package hub

import (
	"runtime"

	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/hub/tabsock"
)

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
			// Frames are counted once per turn of the list, not per
			// socket: the counters are shared by every core.
			var m *metrics.Metrics
			frames, bytes := 0, 0
			for i, c := range batch {
				if n := c.sendNow(); n > 0 {
					m, frames, bytes = c.metrics, frames+1, bytes+n
				}
				batch[i] = nil
			}
			m.FramesWritten(frames, bytes)
		}
	}
}

// sendNow is a sender's turn at the socket: one frame of what waits,
// written without waiting. A socket offered more meanwhile is in the
// ready list again (queued is cleared first). It returns the bytes of the
// frame it wrote, 0 when it wrote none (the caller counts frames).
func (c *conn) sendNow() int {
	c.queued.Store(false)
	w := c.sock
	if !w.TryLock() {
		// The writer goroutine or a control frame is being written, and may
		// be waiting on a slow tab: the writer takes what waits after.
		c.wakeWriter()
		return 0
	}
	if w.Pending() {
		w.Unlock()
		c.wakeWriter() // bytes before ours wait for the writer
		return 0
	}
	o := &c.out
	o.mu.Lock()
	if o.busy {
		// The writer holds a frame it took and has not written yet: ours
		// would overtake it. It takes what waits after.
		o.mu.Unlock()
		w.Unlock()
		return 0
	}
	if o.writerNeeded() {
		o.mu.Unlock()
		w.Unlock()
		c.wakeWriter()
		return 0
	}
	limit := o.limit
	if limit == 0 {
		limit = c.cfg.MaxBatchBytes
	}
	bp := tabsock.GetFrame()
	buf, _ := o.takeLocked((*bp)[:tabsock.FrameHeadroom], limit)
	o.mu.Unlock()
	*bp = buf
	if len(buf) == tabsock.FrameHeadroom {
		w.Unlock()
		tabsock.PutFrame(bp)
		return 0
	}
	frame := tabsock.TextFrame(buf)
	left, err := w.TrySend(bp, len(buf)-len(frame))
	w.Unlock()
	if !left {
		tabsock.PutFrame(bp)
	}
	if err != nil {
		c.cancel()
		return 0
	}
	if left {
		c.wakeWriter() // the rest of the frame: the writer may wait for the tab
	}
	return len(buf) - tabsock.FrameHeadroom
}

// signal tells the socket there is something to send: its sender writes
// it (or hands it to the writer goroutine). It may be called with out.mu
// held.
func (c *conn) signal() {
	if c.snd == nil || c.sock == nil || !c.sock.Direct() {
		c.wakeWriter() // no sender for this socket: its writer sends everything
		return
	}
	if c.queued.CompareAndSwap(false, true) {
		c.snd.push(c)
	}
}
