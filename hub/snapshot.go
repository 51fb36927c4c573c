package hub

import (
	"reflect"

	"github.com/runhub/runhub/journal"
)

// A socket that starts watching gets each session's status at once (its
// snapshot), after its presence is booked, so that the snapshot already
// counts it and the flush that publishes that presence sends it nothing
// more.

// watch adds c as a watcher of sessions the caller has checked it may see
// and sends it the current status of each that is loaded (its snapshot;
// the others' comes after their load). Called after c's presence is
// booked, so that the snapshots already count c.
//
// Both under one hold of t.mu: a flush that ran between c becoming a
// watcher and its snapshot would send c a dirty session's frame, and the
// snapshot the same frame again (seen under load: a tab on a second hub
// got the same status twice).
func (t *tracker) watch(c *conn, metas []journal.SessionMeta) {
	var snaps []statusFrame
	t.mu.Lock()
	for _, m := range metas {
		t.ensure(m).watchers.add(c)
	}
	for _, m := range metas {
		if frame, ok := t.snapshotFrame(c, t.sessions[m.ID]); ok {
			snaps = append(snaps, frame)
		}
	}
	t.mu.Unlock()
	if len(snaps) > 0 {
		c.offerStatuses(snaps)
	}
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
