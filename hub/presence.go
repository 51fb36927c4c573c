package hub

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Presence: how many tabs watch and focus each session, and whose, over
// every hub (protocol.Presence in SessionStatus).
//
// Each socket's share is a set of targets: "o:<subject>" while it watches
// all of its subject's sessions, "s:<sid>" for a session it watches by id
// (unless watch all covers it already) or focuses. This hub keeps its
// sockets' counts per target and subject; once per StatusInterval the
// changed targets go to the PresenceStore (this hub's entry of each), the
// merged entries of every hub come back, and the sessions the status
// tracker holds get their new Presence and are marked changed: presence
// rides the status coalescing, and its cost per interval is bounded by the
// targets that changed. A session's presence is "s:<sid>" plus
// "o:<owner>".

// presenceRefresh is how often a hub with a PresenceStore re-reads every
// target it shows, so that the entries of a hub that died (and lapsed in
// the store) leave the statuses.
const presenceRefresh = 3 * time.Second

func newPresence(h *Hub) *presence {
	return &presence{h: h, store: h.cfg.PresenceStore, conns: map[*conn]*connPresence{}, local: map[string]pentry{},
		dirty: map[string]struct{}{}, stale: map[string]struct{}{}, merged: map[string]pentry{}, pub: map[string]pentry{},
		quit: make(chan struct{})}
}

func (p *presence) start() {
	if p.store != nil {
		p.unsubscr = p.store.Subscribe(func(target string) {
			p.mu.Lock()
			if len(p.stale) < 1<<16 {
				p.stale[target] = struct{}{}
			}
			p.mu.Unlock()
		})
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(p.h.cfg.StatusInterval)
		defer tick.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-tick.C:
				p.flush()
			}
		}
	}()
}

func (p *presence) stop() {
	if p.unsubscr != nil {
		p.unsubscr()
	}
	close(p.quit)
	p.wg.Wait()
}

// --- the hooks of sockets --------------------------------------------------

// watch records c watching sessions by id: ids is all it now watches by
// id (its watches.ids, which presence keeps as it is), added the sessions
// new in it, with their owners.
func (p *presence) watch(c *conn, ids []string, added []presenceID) {
	if len(added) == 0 {
		return
	}
	p.change(c, func(cp *connPresence) {
		cp.ids = ids
		var foreign []string
		for _, id := range added {
			if id.owner != cp.subject {
				foreign = append(foreign, id.sid)
			}
		}
		if len(foreign) > 0 {
			cp.foreign = mergeIDs(cp.foreign, foreign)
		}
	})
}

// watchAll records c watching all of its subject's sessions.
func (p *presence) watchAll(c *conn) { p.change(c, func(cp *connPresence) { cp.all = true }) }

// unwatch records c unwatching sessions: ids is what it still watches by
// id (its watches.ids), all that it stopped watching all of its subject's.
func (p *presence) unwatch(c *conn, ids []string, all bool) {
	p.change(c, func(cp *connPresence) {
		if all {
			cp.all = false
		}
		cp.ids = ids
		if cp.foreign != nil {
			var keep []string
			for _, sid := range cp.foreign {
				if _, ok := slices.BinarySearch(ids, sid); ok {
					keep = append(keep, sid)
				}
			}
			cp.foreign = keep
		}
	})
}

// focus records c focusing sid ("": none).
func (p *presence) focus(c *conn, sid string) { p.change(c, func(cp *connPresence) { cp.focus = sid }) }

// gone forgets a closed socket.
func (p *presence) gone(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cp := p.conns[c]; cp != nil {
		p.book(cp, &connPresence{subject: cp.subject})
		delete(p.conns, c)
	}
}

// change applies fn to c's share and books the difference. fn replaces
// the share's ids, never changes them in place: book compares the two.
func (p *presence) change(c *conn, fn func(*connPresence)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cp := p.conns[c]
	if cp == nil {
		cp = &connPresence{subject: c.subject}
		p.conns[c] = cp
	}
	old := *cp
	fn(cp)
	p.book(&old, cp)
	if !cp.all && len(cp.ids) == 0 && cp.focus == "" {
		delete(p.conns, c)
	}
}

// watching is what the socket's watch of ids[i] counts: 1, or 0 when its
// watch of all of its subject's sessions covers it already.
func (cp *connPresence) watching(i int) int {
	if _, foreign := slices.BinarySearch(cp.foreign, cp.ids[i]); cp.all && !foreign {
		return 0
	}
	return 1
}

// book replaces a socket's share old with next, touching (and marking
// dirty) only the targets whose counts differ: a focus switch changes two
// sessions' presence, not every watched one's. A share is its targets:
// "o:<subject>" while it watches all, "s:<sid>" for each session it
// watches by id (unless all covers it) and the one it focuses; it keeps
// no map of them, they follow from the share. Called with p.mu held.
func (p *presence) book(old, next *connPresence) {
	subject := next.subject
	if old.all != next.all {
		d := 1
		if old.all {
			d = -1
		}
		p.add(subject, "o:"+subject, pcount{W: d})
	}
	i, j := 0, 0
	for i < len(old.ids) || j < len(next.ids) {
		var sid string
		var was, is int
		switch {
		case j == len(next.ids) || (i < len(old.ids) && old.ids[i] < next.ids[j]):
			sid, was = old.ids[i], old.watching(i)
			i++
		case i == len(old.ids) || next.ids[j] < old.ids[i]:
			sid, is = next.ids[j], next.watching(j)
			j++
		default:
			sid, was, is = old.ids[i], old.watching(i), next.watching(j)
			i++
			j++
		}
		if was != is {
			p.add(subject, "s:"+sid, pcount{W: is - was})
		}
	}
	if old.focus != next.focus {
		if old.focus != "" {
			p.add(subject, "s:"+old.focus, pcount{F: -1})
		}
		if next.focus != "" {
			p.add(subject, "s:"+next.focus, pcount{F: 1})
		}
	}
}

// add adds d to subject's counts of target and marks it dirty. A socket's
// share is in the counts it changes, so no count goes below zero however
// the changes of one book are ordered. Called with p.mu held.
func (p *presence) add(subject, target string, d pcount) {
	e := p.local[target]
	if e == nil {
		e = pentry{}
		p.local[target] = e
	}
	cur := e[subject]
	cur.W += d.W
	cur.F += d.F
	if cur.W <= 0 && cur.F <= 0 {
		delete(e, subject)
	} else {
		e[subject] = cur
	}
	if len(e) == 0 {
		delete(p.local, target)
	}
	p.dirty[target] = struct{}{}
}

// --- what statuses carry -----------------------------------------------------

// stamp gives HTTP answers (statuses[i] of metas[i]) the presence of now:
// this hub's counts, or with a store every hub's, read in one round trip.
// Should the store fail, the statuses keep what the tracker had.
func (p *presence) stamp(ctx context.Context, statuses []protocol.SessionStatus, metas []journal.SessionMeta) {
	if len(statuses) == 0 || len(statuses) != len(metas) {
		return
	}
	if p.store == nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		for i := range statuses {
			statuses[i].Presence = p.compute(metas[i].ID, metas[i].Owner)
		}
		return
	}
	set := map[string]struct{}{}
	for _, m := range metas {
		set["s:"+m.ID] = struct{}{}
		set["o:"+m.Owner] = struct{}{}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	entries, err := p.store.Get(ctx, slices.Collect(maps.Keys(set)))
	if err != nil {
		return
	}
	got := make(map[string]pentry, len(entries))
	for t, raws := range entries {
		got[t] = mergeEntries(raws)
	}
	for i, m := range metas {
		statuses[i].Presence = computeFrom(got, m.ID, m.Owner)
	}
}

// flush publishes this hub's changed targets, reads the merged ones back
// (with a store) and gives the tracked sessions they touch their new
// presence.
func (p *presence) flush() {
	if p.store == nil {
		p.mu.Lock()
		changed := p.dirty
		p.dirty = map[string]struct{}{}
		p.mu.Unlock()
		if len(changed) > 0 {
			p.restamp(changed)
		}
		return
	}
	p.mu.Lock()
	now := time.Now()
	idle := now.Before(p.pause) || (len(p.dirty) == 0 && len(p.stale) == 0 && !now.After(p.refresh))
	p.mu.Unlock()
	if idle {
		return // nothing to publish or read: no need to list the tracked sessions' targets
	}
	needed := p.h.tracker.presenceTargets()
	p.mu.Lock()
	puts := make(map[string][]byte, len(p.dirty))
	read := make(map[string]struct{}, len(p.dirty)+len(p.stale))
	for t := range p.dirty {
		var b []byte
		if e := p.local[t]; len(e) > 0 {
			b, _ = json.Marshal(e)
		}
		puts[t] = b
		if _, ok := needed[t]; ok {
			read[t] = struct{}{}
		}
	}
	clear(p.dirty)
	for t := range p.stale {
		if _, ok := needed[t]; ok {
			read[t] = struct{}{}
		}
	}
	clear(p.stale)
	if now := time.Now(); now.After(p.refresh) {
		p.refresh = now.Add(presenceRefresh)
		for t := range needed {
			read[t] = struct{}{}
		}
		for t := range p.merged {
			if _, ok := needed[t]; !ok {
				delete(p.merged, t) // no session here shows it any more
			}
		}
	}
	p.mu.Unlock()
	if len(puts)+len(read) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(p.h.ctx, 5*time.Second)
	defer cancel()
	if len(puts) > 0 && !p.publish(ctx, puts, read) {
		return
	}
	if len(read) == 0 {
		return
	}
	targets := slices.Collect(maps.Keys(read))
	entries, err := p.store.Get(ctx, targets)
	if err != nil {
		p.h.log.Warn("presence: read; retrying", "err", err)
		p.retry(nil, read)
		return
	}
	changed := map[string]struct{}{}
	p.mu.Lock()
	for _, t := range targets {
		sum := mergeEntries(entries[t])
		if old, ok := p.merged[t]; ok && maps.Equal(old, sum) {
			continue
		}
		p.merged[t] = sum
		changed[t] = struct{}{}
	}
	p.mu.Unlock()
	if len(changed) > 0 {
		p.restamp(changed)
	}
}

// publish puts this hub's changed entries in the store and records them as
// published, holding io so that no prefetch reads the store in between;
// on failure it schedules a retry and reports false.
func (p *presence) publish(ctx context.Context, puts map[string][]byte, read map[string]struct{}) bool {
	p.io.Lock()
	defer p.io.Unlock()
	if err := p.store.Put(ctx, puts); err != nil {
		p.h.log.Warn("presence: publish; retrying", "err", err)
		p.retry(puts, read)
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for t, b := range puts {
		var e pentry
		if b != nil && json.Unmarshal(b, &e) == nil && len(e) > 0 {
			p.pub[t] = e
		} else {
			delete(p.pub, t)
		}
	}
	return true
}

// presenceRetry is the pause after a failed store call.
const presenceRetry = time.Second

// retry marks what a failed flush did not publish or read for the next,
// after a pause.
func (p *presence) retry(puts map[string][]byte, read map[string]struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pause = time.Now().Add(presenceRetry)
	for t := range puts {
		p.dirty[t] = struct{}{}
	}
	for t := range read {
		p.stale[t] = struct{}{}
	}
}

// restamp gives the tracked sessions of the changed targets their new
// presence and marks those whose presence did change, for the next status
// flush.
func (p *presence) restamp(changed map[string]struct{}) {
	t := p.h.tracker
	t.mu.Lock()
	defer t.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	for sid, s := range t.sessions {
		_, a := changed["s:"+sid]
		_, b := changed["o:"+s.owner]
		if (a || b) && s.loaded {
			if pr := p.compute(sid, s.owner); !reflect.DeepEqual(pr, s.state.Presence) {
				s.state.Presence = pr
				t.dirty[sid] = s
			}
		}
	}
}

// presenceTargets lists the targets of the sessions the tracker holds.
func (t *tracker) presenceTargets() map[string]struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]struct{}, 2*len(t.sessions))
	for sid, s := range t.sessions {
		out["s:"+sid] = struct{}{}
		out["o:"+s.owner] = struct{}{}
	}
	return out
}
