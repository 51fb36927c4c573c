package hub

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

func newRouter(h *Hub) *router {
	return &router{h: h, interest: journal.WholeFeed{CancelFunc: func() {}}, feeds: map[string]*sessionFeed{}, focused: map[*conn]string{}, refresh: map[string]struct{}{},
		wake: make(chan struct{}, 1), quit: make(chan struct{})}
}

func (r *router) start() {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.loop()
	}()
}

func (r *router) stop() {
	close(r.quit)
	r.wg.Wait()
	r.mu.Lock()
	feeds := r.feeds
	r.feeds = map[string]*sessionFeed{}
	r.mu.Unlock()
	for _, f := range feeds {
		if f.cancel != nil {
			f.cancel()
		}
	}
}

// focus registers c as focusing sid.
func (r *router) focus(c *conn, sid string) {
	r.mu.Lock()
	f := r.feeds[sid]
	if f == nil {
		f = &sessionFeed{sid: sid, conns: map[*conn]struct{}{}}
		r.feeds[sid] = f
		r.refresh[sid] = struct{}{}
		r.interest.Watch(sid) // its new runs (run.started) on the feed
	}
	if _, in := f.conns[c]; !in {
		f.conns[c] = struct{}{}
		f.list = append(f.list, c)
	}
	r.focused[c] = sid
	r.mu.Unlock()
	r.signal()
}

// unfocus removes c from its focused session; the last one out stops the
// tail.
func (r *router) unfocus(c *conn) {
	r.mu.Lock()
	sid := r.focused[c]
	delete(r.focused, c)
	f := r.feeds[sid]
	var cancel func()
	if f != nil {
		if _, in := f.conns[c]; in {
			delete(f.conns, c)
			i := slices.Index(f.list, c)
			f.list[i] = f.list[len(f.list)-1]
			f.list[len(f.list)-1] = nil
			f.list = f.list[:len(f.list)-1]
		}
		if len(f.conns) == 0 {
			delete(r.feeds, sid)
			delete(r.refresh, sid)
			cancel = f.cancel
			r.interest.Unwatch(sid)
		}
	}
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// newRun tells the router that sid has a new latest run. It never blocks
// (the tracker calls it from the journal's delivery goroutine).
func (r *router) newRun(sid string) {
	r.mu.Lock()
	_, focused := r.feeds[sid]
	if focused {
		r.refresh[sid] = struct{}{}
	}
	r.mu.Unlock()
	if focused {
		r.signal()
	}
}

func (r *router) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *router) loop() {
	for {
		select {
		case <-r.quit:
			return
		case <-r.wake:
		}
		r.mu.Lock()
		todo := make([]string, 0, len(r.refresh))
		for sid := range r.refresh {
			todo = append(todo, sid)
		}
		clear(r.refresh)
		r.mu.Unlock()
		for _, sid := range todo {
			r.resubscribe(sid)
		}
	}
}

// resubscribe points sid's tail at its latest run and kicks the focusing
// sockets so they read whatever the tail did not see.
func (r *router) resubscribe(sid string) {
	// The feed first (focus watched it): a run started after the read
	// below is announced to newRun.
	ctx, stop := context.WithTimeout(r.h.ctx, 10*time.Second)
	err := r.interest.Ready(ctx, sid)
	stop()
	if err != nil {
		r.h.log.Warn("router: feed of session", "session_id", sid, "err", err)
	}
	meta, err := r.h.store.Session(r.h.ctx, sid)
	if err != nil {
		r.h.log.Warn("router: load session", "session_id", sid, "err", err)
		return
	}
	latest := meta.LatestRun()
	r.mu.RLock()
	f := r.feeds[sid]
	same := f == nil || f.runID == latest
	r.mu.RUnlock()
	if same {
		return
	}
	var cancel func()
	if latest != "" {
		cancel = r.h.store.SubscribeRun(latest, func(e protocol.Envelope) { r.deliver(sid, &e) })
	}
	r.mu.Lock()
	f = r.feeds[sid]
	if f == nil || f.runID == latest {
		r.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		return
	}
	old := f.cancel
	f.runID, f.cancel = latest, cancel
	conns := make([]*conn, 0, len(f.conns))
	for c := range f.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	if old != nil {
		old()
	}
	for _, c := range conns {
		c.kick(sid)
	}
}

// deliver encodes a live event once and offers it to every focusing socket.
func (r *router) deliver(sid string, e *protocol.Envelope) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f := r.feeds[sid]
	if f == nil || len(f.conns) == 0 {
		return
	}
	frame, err := protocol.EncodeEventFrame(e)
	if err != nil {
		r.h.log.Error("encode event", "run_id", e.RunID, "err", err)
		return
	}
	n := 0
	for _, c := range f.list {
		if c.offerEvent(e, frame) {
			n++
		}
	}
	r.h.env.metrics.EventsDelivered(e.Type, n)
}

// setFocus handles a focus message.
func (c *conn) setFocus(f *protocol.Focus) {
	if f.SessionID == nil {
		c.router.unfocus(c)
		c.presence.focus(c, "")
		c.out.setFocus(focusState{})
		return
	}
	sid := *f.SessionID
	// Without a cursor only the owner is needed: a session the tracker
	// holds is not read again (tracker.known).
	meta, known := c.tracker.known(sid)
	var err error
	if !known || f.Cursor != "" {
		meta, err = c.store.Session(c.ctx, sid)
	}
	if known {
		sid = meta.ID // the tracker's copy: the socket keeps no string of the message
	}
	if err != nil || !c.mayRead(meta.Owner) {
		if err != nil && !errors.Is(err, journal.ErrNotFound) {
			c.sendError(journalCode(err), "could not load the session", "focus")
			return
		}
		c.sendError(protocol.CodeNotFound, "no such session: "+sid, "focus")
		return // the previous focus stays in force
	}
	c.router.unfocus(c)
	c.metrics.ReplayRequested()
	st := focusState{sid: sid, resolve: true, lagging: true, replayPending: true, compact: c.rd.compact}
	if f.Cursor != "" {
		if cur, run, ok := c.checkCursor(sid, f.Cursor, &meta); ok {
			st.resolve = false
			st.runID, st.next = cur.RunID, cur.Seq+1
			// At the terminal event already: what follows is the next run.
			st.runDone = run.Terminal && cur.Seq == run.LastSeq
		}
	}
	c.out.setFocus(st) // the previous focus's undelivered events are void
	c.router.focus(c, sid)
	c.presence.focus(c, sid)
	c.signal()
}

// known returns the id (the tracker's copy) and owner of a session the
// tracker holds loaded, or made from a meta just read that is not loaded
// yet: a session that exists (its deletion reaches the tracker through
// the feed, which unloads it, or marks it changed while it loads) whose
// owner never changes. false: the caller reads the journal.
func (t *tracker) known(sid string) (journal.SessionMeta, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.sessions[sid]; s != nil && (s.loaded || s.unread) {
		return journal.SessionMeta{ID: s.id, Owner: s.owner}, true
	}
	return journal.SessionMeta{}, false
}
