package hub

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

func meaningOf(s *session.Session) meaning {
	m := meaning{title: s.Title, queueDepth: s.QueueDepth, goal: s.Goal}
	if r := s.Latest; r != nil {
		m.runID, m.status, m.terminal, m.terminalState = r.RunID, r.Status, r.Terminal, r.TerminalState
		m.approval, m.clarify = r.PendingApproval, r.PendingClarify
	}
	return m
}

// maxPending bounds the feed events buffered for a session being loaded.
const maxPending = 4096

func newTracker(h *Hub) *tracker {
	return &tracker{h: h, sessions: map[string]*tracked{}, owners: map[string]map[*conn]struct{}{},
		dirty: map[string]*tracked{}, loads: map[string]struct{}{}, loadWake: make(chan struct{}, 1),
		urgent: make(chan struct{}, 1), quit: make(chan struct{})}
}

func (t *tracker) start() {
	// The feed of the sessions this hub's tabs watch or focus, and no
	// other (journal.Interest): every tracked session is watched, a
	// watch-all socket watches all, the router watches the sessions its
	// tabs focus.
	t.interest = t.h.store.SubscribeInterest(t.onFeed)
	t.wg.Add(2)
	go func() {
		defer t.wg.Done()
		t.flushLoop()
	}()
	go func() {
		defer t.wg.Done()
		t.loadLoop()
	}()
}

func (t *tracker) stop() {
	t.interest.Cancel()
	close(t.quit)
	t.wg.Wait()
}

// onFeed folds one journaled event. It runs on the journal's delivery
// goroutine and never blocks on I/O.
func (t *tracker) onFeed(e protocol.Envelope) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.Type == journal.SessionChanged {
		t.sessionChanged(e.SessionID)
		return
	}
	if e.Type == protocol.EventRunStarted {
		t.h.router.newRun(e.SessionID)
	}
	s := t.sessions[e.SessionID]
	if s == nil {
		if e.Type == protocol.EventRunStarted && len(t.owners) > 0 {
			t.scheduleLoad(e.SessionID) // maybe a new session of a watch-all owner
		}
		return
	}
	if !s.loaded {
		if len(s.pending) < maxPending {
			s.pending = append(s.pending, e)
		} else {
			s.overflow = true
		}
		return
	}
	t.apply(s, &e)
}

// sessionChanged handles the journal's notice that a session changed
// without an event (created, a run registered but still queued, its queue
// or goal updated) on this node or any other: a tracked session is
// reloaded, an untracked one is loaded if it may be a new session of a
// watch-all owner. Called with t.mu held.
func (t *tracker) sessionChanged(sid string) {
	s := t.sessions[sid]
	switch {
	case s == nil:
		if len(t.owners) > 0 {
			t.scheduleLoad(sid)
		}
	case s.loaded:
		s.loaded = false // feed events buffer until the load lands
		t.scheduleLoad(sid)
	default:
		// A load in flight may have read the session before the change:
		// load it once more when it lands (and load it should none be on
		// its way).
		s.overflow, s.unread = true, false
		t.scheduleLoad(sid)
	}
}

// apply folds e into a loaded session; anything out of sequence that is not
// a duplicate schedules a reload from the journal. Called with t.mu held.
func (t *tracker) apply(s *tracked, e *protocol.Envelope) {
	s.enc = nil // the status changes (or is reloaded)
	if err := foldFeed(&s.state, e); err != nil {
		if l := s.state.Latest; l != nil && e.RunID == l.RunID && e.Seq <= l.LastSeq {
			return // already folded
		}
		s.loaded = false
		t.scheduleLoad(s.id)
		return
	}
	t.changed(s)
}

// changed marks a loaded session's status as unsent; a change of its
// meaning wakes the flush at once. Called with t.mu held.
func (t *tracker) changed(s *tracked) {
	t.dirty[s.id] = s
	if !s.meaningful && meaningOf(&s.state) != s.sent {
		s.meaningful = true
		select {
		case t.urgent <- struct{}{}:
		default:
		}
	}
}

// loadRetry is the pause before loading a session again after the journal
// failed to read it.
const loadRetry = time.Second

func (t *tracker) scheduleLoad(sid string) {
	t.loads[sid] = struct{}{}
	select {
	case t.loadWake <- struct{}{}:
	default:
	}
}

func (t *tracker) loadLoop() {
	for {
		select {
		case <-t.quit:
			return
		case <-t.loadWake:
		}
		for {
			t.mu.Lock()
			var sid string
			for id := range t.loads {
				sid = id
				break
			}
			delete(t.loads, sid)
			t.mu.Unlock()
			if sid == "" {
				break
			}
			t.load(sid)
		}
	}
}

// load folds a session from the journal and installs it, replaying the feed
// events that arrived meanwhile.
func (t *tracker) load(sid string) {
	ctx, cancel := context.WithTimeout(t.h.ctx, 30*time.Second)
	defer cancel()
	var st session.Session
	// The feed first: what is journaled after the read below reaches
	// the tracker (a session not watched, dropped meanwhile, waits for
	// nothing).
	err := t.interest.Ready(ctx, sid)
	var meta journal.SessionMeta
	if err == nil {
		meta, err = t.h.store.Session(ctx, sid)
	}
	if err == nil {
		t.mu.Lock()
		known, watched := t.sessions[sid] != nil, len(t.owners[meta.Owner]) > 0
		t.mu.Unlock()
		if !known && !watched {
			return // read the runs only of a session some tab watches
		}
		st, err = journal.FoldSessionMeta(ctx, t.h.store, meta)
		if err == nil {
			t.h.presence.prefetch(ctx, meta) // the first status carries every hub's count (a no-op after the watch's prefetch)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sessions[sid]
	if err != nil {
		if s != nil && !errors.Is(err, journal.ErrNotFound) {
			// The journal is failing (Redis away, say): try again, or the
			// session's status would stay frozen once it is back.
			t.h.log.Warn("status: load session; retrying", "session_id", sid, "err", err, "in", loadRetry)
			time.AfterFunc(loadRetry, func() {
				t.mu.Lock()
				defer t.mu.Unlock()
				if s := t.sessions[sid]; s != nil && !s.loaded {
					t.scheduleLoad(sid)
				}
			})
			return
		}
		if s != nil {
			t.gone(s) // deleted
		}
		return
	}
	if s == nil {
		if len(t.owners[meta.Owner]) == 0 {
			return // nobody watches it
		}
		s = &tracked{id: sid, owner: meta.Owner}
		t.track(s)
	}
	s.owner = meta.Owner
	st.Presence = t.h.presence.lookup(sid, meta.Owner)
	s.state, s.loaded, s.enc, s.unread = st, true, nil, false
	pending, overflow := s.pending, s.overflow
	s.pending, s.overflow = nil, false
	if overflow {
		s.loaded = false
		t.scheduleLoad(sid)
		return
	}
	for i := range pending {
		t.apply(s, &pending[i])
		if !s.loaded {
			return
		}
	}
	t.changed(s)
}

// flushLoop flushes at once when a status's meaning changed, and every
// tenth of StatusInterval (5–100 ms) for progress that has become due, so a
// progress-only status waits at most StatusInterval plus that tick.
func (t *tracker) flushLoop() {
	tick := time.NewTicker(min(max(t.h.cfg.StatusInterval/10, 5*time.Millisecond), 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-t.quit:
			return
		case <-t.urgent:
		case <-tick.C:
		}
		t.flush(time.Now())
	}
}

// flush sends the changed statuses that are due, each encoded once, to
// their watchers: those whose meaning changed, and those with only progress
// whose session's last status went out StatusInterval or more ago. Each
// socket gets all of its statuses under one lock and one wake-up, so they
// leave in one frame; a status not yet due stays dirty, merging the
// progress that follows.
func (t *tracker) flush(now time.Time) {
	t.mu.Lock()
	if len(t.dirty) == 0 {
		if t.spans != nil && now.Sub(t.flushedAt) > scratchLinger {
			t.spans, t.offers, t.due = nil, nil, nil // idle: the scratch of the last busy flushes goes
		}
		t.mu.Unlock()
		return
	}
	t.flushedAt = now
	// The scratch (spans, offers, due) is reused across flushes (only
	// flushLoop calls flush), so a flush that offers every socket its
	// statuses (presence, during a burst of connecting tabs) allocates
	// nothing per socket; a tracker with nothing to flush for
	// scratchLinger lets it go. Each socket's statuses are one span of
	// offers: counted first, then filled.
	if t.spans == nil {
		t.spans = map[*conn]offerSpan{}
	}
	spans, due := t.spans, t.due[:0]
	for sid, s := range t.dirty {
		if !s.loaded {
			delete(t.dirty, sid)
			s.fresh = nil
			continue
		}
		if !s.meaningful && now.Sub(s.sentAt) < t.h.cfg.StatusInterval {
			continue // progress only, not due yet
		}
		delete(t.dirty, sid)
		s.sent, s.sentAt, s.meaningful = meaningOf(&s.state), now, false
		frame, err := s.frame(t.h)
		if err != nil {
			t.h.log.Error("encode status", "session_id", sid, "err", err)
			continue
		}
		due = append(due, dueStatus{s: s, frame: frame})
		t.eachReceiver(s, frame, func(c *conn) {
			sp := spans[c]
			sp.n++
			spans[c] = sp
		})
	}
	total := int32(0)
	for c, sp := range spans {
		spans[c] = offerSpan{start: total}
		total += sp.n
	}
	offers := slices.Grow(t.offers[:0], int(total))[:total]
	for _, d := range due {
		o := d.frame
		t.eachReceiver(d.s, d.frame, func(c *conn) {
			sp := spans[c]
			offers[sp.start+sp.n] = o
			sp.n++
			spans[c] = sp
		})
		d.s.fresh = nil
	}
	clear(due)
	t.due = due[:0]
	// The scratch of a flush that offered many statuses (presence during
	// a burst of connecting tabs: one per watcher of every session) goes
	// with it: kept, it would be live at each collection meanwhile, and
	// the heap may grow to twice what is live before the next one.
	if total <= keptOffers {
		t.offers = offers[:0]
	} else {
		t.offers, t.spans = nil, nil
	}
	t.mu.Unlock()
	for c, sp := range spans {
		c.offerStatuses(offers[sp.start : sp.start+sp.n])
	}
	clear(offers) // drop the frames until the next flush
	clear(spans)
}

// eachReceiver calls fn for each socket a flush sends s's frame: its
// watchers and its owner's watch-all sockets, each once, but those whose
// snapshot was that frame already. Called with t.mu held.
func (t *tracker) eachReceiver(s *tracked, frame statusFrame, fn func(*conn)) {
	for _, c := range s.watchers {
		if !s.has(c, frame) {
			fn(c)
		}
	}
	for c := range t.owners[s.owner] {
		if !s.watchers.has(c) && !s.has(c, frame) {
			fn(c)
		}
	}
}

// scratchLinger is how long flush keeps its scratch (tracker.spans,
// offers and due) with nothing to flush.
const scratchLinger = 2 * time.Second

// keptOffers is the most offers whose scratch (tracker.offers, spans) a
// flush keeps for the next one.
const keptOffers = 4096

func (h *Hub) encodeStatus(s *session.Session) ([]byte, error) {
	st := h.StatusOf(s)
	return json.Marshal(protocol.StatusMessage{Type: protocol.MsgStatus, Session: &st})
}

// frame is s's status message, the bytes encodeStatus makes of s.state:
// the status without its presence, encoded once per change of the
// session (s.enc), and the presence of now, encoded once per change of
// the presence; the frame is kept (s.framed) until either changes.
// Called with t.mu held.
func (s *tracked) frame(h *Hub) (statusFrame, error) {
	// A runtime's capabilities may change while the session does not (what
	// its server reports): its active_controls are narrowed again.
	caps, _ := h.capsOf(&s.state)
	if s.enc == nil || !slices.Equal(caps, s.encCaps) {
		st := h.StatusOf(&s.state)
		st.Presence = nil
		enc, err := json.Marshal(protocol.StatusMessage{Type: protocol.MsgStatus, Session: &st})
		if err != nil {
			return statusFrame{}, err
		}
		s.enc, s.encCaps = enc, slices.Clone(caps)
	}
	pr, old := s.state.Presence, s.framed
	if old.frameParts != nil && &old.base[0] == &s.enc[0] && old.of == pr {
		return old.statusFrame, nil
	}
	f := frameParts{sid: s.id, base: s.enc}
	switch {
	case pr == nil:
	case old.frameParts != nil && old.of == pr:
		f.pres = old.pres // the status changed, its presence did not
	default:
		p, err := json.Marshal(pr)
		if err != nil {
			return statusFrame{}, err
		}
		f.pres = p
	}
	s.framed = lastFrame{statusFrame{&f}, pr}
	return s.framed.statusFrame, nil
}

// ensure returns the tracked entry of a session, creating it (and
// scheduling its load) when missing. Called with t.mu held.
func (t *tracker) ensure(meta journal.SessionMeta) *tracked {
	s := t.sessions[meta.ID]
	if s == nil {
		s = &tracked{id: meta.ID, owner: meta.Owner, unread: true}
		t.track(s)
		t.scheduleLoad(meta.ID)
	}
	return s
}

// sessionCreated makes a session created on this hub visible to its owner's
// watch-all sockets before its first run.
func (t *tracker) sessionCreated(meta journal.SessionMeta) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.owners[meta.Owner]) > 0 {
		t.ensure(meta)
	}
}

// unwatch removes c as a watcher of sids.
func (t *tracker) unwatch(c *conn, sids []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, sid := range sids {
		if s := t.sessions[sid]; s != nil {
			s.watchers.remove(c)
			delete(s.fresh, c)
			t.gc(s)
		}
	}
}

// status returns the folded status of a tracked, loaded session.
func (t *tracker) status(sid string) (protocol.SessionStatus, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sessions[sid]
	if s == nil || !s.loaded {
		return protocol.SessionStatus{}, false
	}
	return t.h.StatusOf(&s.state), true
}

// gone tells the watchers of a session the journal no longer has (it was
// deleted) with a last status, deleted: true, and stops tracking it.
// Called with t.mu held.
func (t *tracker) gone(s *tracked) {
	st := protocol.SessionStatus{SessionID: s.id, ActiveControls: []string{}, Deleted: true}
	enc, err := json.Marshal(protocol.StatusMessage{Type: protocol.MsgStatus, Session: &st})
	if err == nil {
		frame := plainFrame(s.id, enc)
		for _, c := range s.watchers {
			c.offerStatus(frame)
		}
		for c := range t.owners[s.owner] {
			if !s.watchers.has(c) {
				c.offerStatus(frame)
			}
		}
	}
	t.untrack(s)
	delete(t.dirty, s.id)
}
