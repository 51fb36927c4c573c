package hub

import (
	"reflect"

	"github.com/runhub/runhub/journal"
)

// A socket that starts watching gets each session's status at once (its
// snapshot), after its presence is booked, so that the snapshot already
// counts it and the flush that publishes that presence sends it nothing
// more.

// watch adds c as a watcher of a session the caller has checked it may see;
// snapshot then sends it the current status. It returns the tracker's copy
// of the session id, for c to keep: every socket watching a session then
// shares one string.
func (t *tracker) watch(c *conn, meta journal.SessionMeta) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.ensure(meta)
	s.watchers.add(c)
	return s.id
}

// intern returns the tracker's copy of a session id when it tracks the
// session, else sid.
func (t *tracker) intern(sid string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.sessions[sid]; s != nil {
		return s.id
	}
	return sid
}

// snapshot sends c the current status of each of sids it watches whose
// status is known (the others' comes after their load). Called after c's
// presence is booked, so that the status already counts c.
func (t *tracker) snapshot(c *conn, sids []string) {
	var snaps []statusFrame
	t.mu.Lock()
	for _, sid := range sids {
		if s := t.sessions[sid]; s != nil {
			if s.watchers.has(c) {
				if frame, ok := t.snapshotFrame(c, s); ok {
					snaps = append(snaps, frame)
				}
			}
		}
	}
	t.mu.Unlock()
	if len(snaps) > 0 {
		c.offerStatuses(snaps)
	}
}

// snapshotFrame encodes a loaded session's status for a socket that starts
// watching it, with the presence of now (which counts the socket). A
// presence that changed marks the session for the other watchers; the
// flush that sends it skips c when the frame is the one c already has, so
// that a watch sends each status once. Called with t.mu held.
func (t *tracker) snapshotFrame(c *conn, s *tracked) (statusFrame, bool) {
	if !s.loaded {
		return statusFrame{}, false
	}
	if pr := t.h.presence.lookup(s.id, s.owner); !reflect.DeepEqual(pr, s.state.Presence) {
		s.state.Presence = pr
		t.dirty[s.id] = s
	}
	frame, err := s.frame(t.h)
	if err != nil {
		return statusFrame{}, false
	}
	if _, pending := t.dirty[s.id]; pending {
		if s.fresh == nil {
			s.fresh = map[*conn]statusFrame{}
		}
		s.fresh[c] = frame
	}
	return frame, true
}

// watchOwner makes c watch every session of owner, now and future, and
// sends it their current statuses (c's presence is booked first).
func (t *tracker) watchOwner(c *conn, owner string, metas []journal.SessionMeta) {
	var snaps []statusFrame
	t.mu.Lock()
	set := t.owners[owner]
	if set == nil {
		set = map[*conn]struct{}{}
		t.owners[owner] = set
	}
	set[c] = struct{}{}
	for _, m := range metas {
		if frame, ok := t.snapshotFrame(c, t.ensure(m)); ok {
			snaps = append(snaps, frame)
		}
	}
	t.mu.Unlock()
	if len(snaps) > 0 {
		c.offerStatuses(snaps)
	}
}
