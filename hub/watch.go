package hub

import (
	"errors"
	"fmt"
	"slices"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// watch handles a watch message. However many of its ids fail, it is
// answered with at most one error per kind (not_found, a journal fault),
// each listing the ids in sessions: a watch of 1,000 unknown ids must not
// fill the socket's message queue with 1,000 errors.
func (c *conn) watch(w *protocol.Watch) {
	if w.All {
		// The feed of every session first, then the list: a session
		// created meanwhile is in one or the other.
		first := !c.watches.all
		if first {
			if err := c.tracker.watchAll(c.ctx); err != nil {
				c.sendError(journalCode(err), "could not list sessions", protocol.MsgWatch)
				return
			}
		}
		metas, err := c.store.Sessions(c.ctx, c.subject)
		if err != nil {
			if first {
				c.tracker.interest.UnwatchAll()
			}
			c.sendError(journalCode(err), "could not list sessions", protocol.MsgWatch)
			return
		}
		c.watches.all = true
		c.presence.prefetch(c.ctx, metas...) // one store read for the snapshots' presence
		c.presence.watchAll(c)               // first: the snapshots count this socket
		c.tracker.watchOwner(c, c.subject, metas)
	}
	// The sessions are checked first, then booked in presence, then
	// watched: a status sent at once (a snapshot, or the one after a
	// session's load) then already counts this socket, and no second one
	// follows when presence is next flushed.
	n := min(len(w.Sessions), c.cfg.MaxWatch)
	ids := make([]presenceID, 0, n) // checked, in the message's order: session and owner
	defer func() {
		if len(ids) == 0 {
			return
		}
		metas := make([]journal.SessionMeta, len(ids))
		for i, id := range ids {
			metas[i] = journal.SessionMeta{ID: id.sid, Owner: id.owner}
		}
		if c.presence.store != nil {
			c.presence.prefetch(c.ctx, metas...) // one store read, not one per session's load
		}
		added := make([]string, len(ids))
		for i, id := range ids {
			added[i] = id.sid // the tracker's copy (known or interned above)
		}
		c.watches.ids = mergeIDs(c.watches.ids, added)
		c.presence.watch(c, c.watches.ids, ids)
		c.tracker.watch(c, metas)
	}()
	var unknown []string
	defer func() {
		switch len(unknown) {
		case 0:
		case 1:
			c.sendWatchError(protocol.CodeNotFound, "no such session: "+unknown[0], unknown)
		default:
			c.sendWatchError(protocol.CodeNotFound, fmt.Sprintf("no such sessions: %d ids (listed in sessions)", len(unknown)), unknown)
		}
	}()
	for i, sid := range w.Sessions {
		if _, already := slices.BinarySearch(c.watches.ids, sid); already {
			continue
		}
		if slices.ContainsFunc(ids, func(id presenceID) bool { return id.sid == sid }) {
			continue // named twice
		}
		if len(c.watches.ids)+len(ids) >= c.cfg.MaxWatch {
			c.sendError(protocol.CodeLimitExceeded, "watching more than the limit of sessions; unwatch some first", protocol.MsgWatch)
			return
		}
		// A session the tracker has loaded is known: its id and owner are
		// all a watch needs, and reading its meta again for every tab
		// that watches it made a burst of connecting tabs read the
		// journal ten times per tab.
		meta, known := c.tracker.known(sid)
		var err error
		if !known {
			meta, err = c.store.Session(c.ctx, sid)
		}
		if err != nil || !c.mayRead(meta.Owner) {
			if err != nil && !errors.Is(err, journal.ErrNotFound) {
				// The journal fails: the rest would fail alike (and each
				// could wait out a timeout); watch them again later.
				rest := slices.Clone(w.Sessions[i:])
				c.sendWatchError(journalCode(err), fmt.Sprintf("could not load %d sessions (listed in sessions); watch them again later", len(rest)), rest)
				return
			}
			unknown = append(unknown, sid)
			continue
		}
		if !known {
			meta.ID = c.tracker.intern(meta.ID) // one string per session, shared by its watchers
		}
		ids = append(ids, presenceID{sid: meta.ID, owner: meta.Owner})
	}
}

// sendWatchError sends one watch error about sids.
func (c *conn) sendWatchError(code protocol.Code, msg string, sids []string) {
	c.send(protocol.ErrorMessage{Type: protocol.MsgError, Code: code, Message: msg, Ref: protocol.MsgWatch, Sessions: sids})
}

// unwatch handles an unwatch message.
func (c *conn) unwatch(w *protocol.Watch) {
	sids := w.Sessions
	if w.All {
		sids = c.watches.ids
		c.watches.all, c.watches.ids = false, nil
	} else {
		// A new slice: presence holds the old one.
		gone := slices.Sorted(slices.Values(sids))
		c.watches.ids = slices.DeleteFunc(slices.Clone(c.watches.ids), func(sid string) bool {
			_, found := slices.BinarySearch(gone, sid)
			return found
		})
		if len(c.watches.ids) == 0 {
			c.watches.ids = nil
		}
	}
	c.out.dropStatuses(sids) // an unsent status of an unwatched session is void
	c.tracker.unwatch(c, sids)
	c.presence.unwatch(c, c.watches.ids, w.All)
	if w.All {
		c.tracker.unwatchOwner(c, c.subject)
	}
}
