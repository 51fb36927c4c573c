package bolt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/runhub/runhub/journal"
)

// beginRun registers r.run as its session's newest, active run.
func (w *writer) beginRun(r *request) error {
	m := r.run
	ss, err := w.session(m.SessionID)
	if err != nil {
		return err
	}
	switch {
	case ss == nil:
		r.err = fmt.Errorf("session %q: %w", m.SessionID, journal.ErrNotFound)
		return nil
	case w.mustBucket(bRuns).Get([]byte(m.ID)) != nil:
		r.err = fmt.Errorf("run %q: %w", m.ID, journal.ErrExists)
		return nil
	case ss.meta.ActiveRun != "":
		r.err = fmt.Errorf("session %q has active run %q: %w", m.SessionID, ss.meta.ActiveRun, journal.ErrConflict)
		return nil
	}
	if r.update != nil {
		// BeginRunUpdate: fn's changes to the runtime-owned fields go in
		// the same transaction as the registration (fn sees a copy).
		next := ss.meta
		next.Runs = slices.Clone(ss.meta.Runs)
		next.Queue = slices.Clone(ss.meta.Queue)
		next.RecentKeys = slices.Clone(ss.meta.RecentKeys)
		if ss.meta.Goal != nil {
			g := *ss.meta.Goal
			next.Goal = &g
		}
		if err := r.update(&next); err != nil {
			r.err = err
			return nil
		}
		journal.RedactSession(&next)
		ss.meta.Queue, ss.meta.Goal, ss.meta.RecentKeys, ss.meta.Title = next.Queue, next.Goal, next.RecentKeys, next.Title
	}
	if m.Owner == "" {
		m.Owner = ss.meta.Owner
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := w.mustBucket(bRuns).Put([]byte(m.ID), raw); err != nil {
		return err
	}
	if err := w.mustBucket(bActive).Put([]byte(m.ID), []byte{}); err != nil {
		return err
	}
	// A run deleted earlier in this batch keeps its state: its old entry
	// is dropped when the batch merges.
	rs, ok := w.runCache[m.ID]
	if !ok {
		rs = w.newState(m.ID)
		if rs.old, err = w.s.committed(w.tx, m.ID); err != nil { // nil: bbolt has no such run
			return err
		}
		rs.dropOld = rs.old != nil
	}
	rs.exists, rs.created, rs.headDue = true, true, true
	rs.bornRel = uint64(len(w.buf)) // records before it, even of this batch, are not this run's
	rs.session, rs.lastSeq, rs.first = m.SessionID, 0, 1
	rs.terminal, rs.terminalType, rs.terminalAt = false, "", 0
	ss.meta.Runs = append(ss.meta.Runs, m.ID)
	ss.meta.ActiveRun = m.ID
	ss.dirty = true
	if r.update != nil {
		r.sess = ss.meta
		r.sess.Runs = slices.Clone(ss.meta.Runs)
	}
	return nil
}

// trim deletes up to r.limit terminal runs that ended before r.before.
func (w *writer) trim(r *request) error {
	cutoff := endedKey(r.before, "")
	ended, err := w.bucket(bEnded)
	if err != nil {
		return err
	}
	var doomed [][]byte
	c := ended.Cursor()
	for k, _ := c.First(); k != nil && len(doomed) < r.limit && bytes.Compare(k[:8], cutoff) < 0; k, _ = c.Next() {
		doomed = append(doomed, bytes.Clone(k))
	}
	for _, k := range doomed {
		if err := ended.Delete(k); err != nil {
			return err
		}
		rs, err := w.run(string(k[8:]))
		if err != nil {
			return err
		}
		if rs == nil || !rs.terminal {
			continue // a stale index entry; never trim an active run
		}
		if err := w.deleteRun(rs); err != nil {
			return err
		}
		r.trimmed++
	}
	return nil
}

// deleteSession removes r.session.ID, which must have no active run, with
// every run of it and its place in its owner's index.
func (w *writer) deleteSession(r *request) error {
	id := r.session.ID
	ss, err := w.session(id)
	if err != nil {
		return err
	}
	switch {
	case ss == nil:
		r.err = fmt.Errorf("session %q: %w", id, journal.ErrNotFound)
		return nil
	case ss.meta.ActiveRun != "":
		r.err = fmt.Errorf("session %q has active run %q: %w", id, ss.meta.ActiveRun, journal.ErrConflict)
		return nil
	}
	for _, rid := range slices.Clone(ss.meta.Runs) {
		rs, err := w.run(rid)
		if err != nil {
			return err
		}
		if rs == nil {
			continue
		}
		if rs.terminal {
			if err := w.mustBucket(bEnded).Delete(endedKey(rs.terminalAt, rid)); err != nil {
				return err
			}
		}
		if err := w.deleteRun(rs); err != nil {
			return err
		}
	}
	if err := w.deleteOwned(ss.meta.Owner, id); err != nil {
		return err
	}
	delete(w.sessCache, id) // not written back at flush
	if err := markQueued(w.mustBucket(bQueued), id, false); err != nil {
		return err
	}
	return w.mustBucket(bSessions).Delete([]byte(id))
}

// deleteRun removes a run's meta and place in its session; its events
// leave the index when the batch merges, and the log once no live event
// is left in their segment.
func (w *writer) deleteRun(rs *runState) error {
	id := []byte(rs.id)
	for _, b := range []int{bRuns, bHeads, bActive} {
		if err := w.mustBucket(b).Delete(id); err != nil {
			return err
		}
	}
	ss, err := w.session(rs.session)
	if err != nil {
		return err
	}
	if ss != nil {
		if i := slices.Index(ss.meta.Runs, rs.id); i >= 0 {
			ss.meta.Runs = slices.Delete(slices.Clone(ss.meta.Runs), i, i+1)
			ss.dirty = true
		}
	}
	// Events this batch appended to the run are written all the same (the
	// batch's buffer is one write) but belong to no run: the next open
	// skips them, as it skips every record of a deleted run.
	old := rs.old
	*rs = runState{id: rs.id, old: old, dropOld: old != nil, rel: rs.rel[:0], keys: rs.keys[:0]}
	return nil
}
