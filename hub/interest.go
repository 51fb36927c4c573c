package hub

import (
	"context"
	"encoding/json"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// What this hub reads of the journal's status feed follows its tabs
// (journal.Interest): each session the tracker holds is watched, a
// watch-all socket watches every session, the router watches the
// sessions its tabs focus; on Redis the feed is read only in the
// partitions that hold them.

// track adds s to the tracked sessions, and its records to the feed this
// hub reads. Called with t.mu held.
func (t *tracker) track(s *tracked) {
	t.sessions[s.id] = s
	t.interest.Watch(s.id)
}

// untrack drops s. Called with t.mu held.
func (t *tracker) untrack(s *tracked) {
	if t.sessions[s.id] == s {
		delete(t.sessions, s.id)
		t.interest.Unwatch(s.id)
	}
}

// watchAll adds every session to the feed this hub reads, for a socket
// about to watch all its subject's sessions (which may be in any of the
// feed's partitions), and returns once the feed is read from now on, so
// that the sessions listed next and those created later are all seen.
// The socket's unwatchOwner (or, should its watch not be registered,
// unwatchAll) removes it.
func (t *tracker) watchAll(ctx context.Context) error {
	t.interest.WatchAll()
	if err := t.interest.Ready(ctx, ""); err != nil {
		t.interest.UnwatchAll()
		return err
	}
	return nil
}

// foldFeed folds a feed record into a session's status: an event, or the
// deltas a status-rate feed left out (journal.DeltasSkipped).
func foldFeed(st *session.Session, e *protocol.Envelope) error {
	if e.Type != journal.DeltasSkipped {
		return st.Apply(e)
	}
	var p journal.SkippedDeltas
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		return err
	}
	return st.Skip(e.RunID, p.Count, p.Tokens, p.Last, e.Seq, e.CreatedAt)
}

// unwatchOwner ends c's watch-all.
func (t *tracker) unwatchOwner(c *conn, owner string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if set := t.owners[owner]; set != nil {
		if _, in := set[c]; in {
			t.interest.UnwatchAll() // the watchAll's
		}
		delete(set, c)
		if len(set) == 0 {
			delete(t.owners, owner)
			for _, s := range t.sessions {
				t.gc(s)
			}
		}
	}
}

// gc drops a session nobody watches. Called with t.mu held.
func (t *tracker) gc(s *tracked) {
	if len(s.watchers) == 0 && len(t.owners[s.owner]) == 0 {
		t.untrack(s)
		delete(t.dirty, s.id)
	}
}
