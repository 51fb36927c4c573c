package bolt

import (
	"bytes"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/runhub/runhub/journal"
)

// trim deletes up to r.limit terminal runs that ended before r.before.
func (w *writer) trim(r *request) error {
	cutoff := endedKey(r.before, "")
	var doomed [][]byte
	c := w.bucket(bEnded).Cursor()
	for k, _ := c.First(); k != nil && len(doomed) < r.limit && bytes.Compare(k[:8], cutoff) < 0; k, _ = c.Next() {
		doomed = append(doomed, bytes.Clone(k))
	}
	for _, k := range doomed {
		if err := w.bucket(bEnded).Delete(k); err != nil {
			return err
		}
		id := string(k[8:])
		rs, err := w.run(id)
		if err != nil {
			return err
		}
		if rs == nil || !rs.head.terminal {
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
	for _, rid := range append([]string(nil), ss.meta.Runs...) {
		rs, err := w.run(rid)
		if err != nil {
			return err
		}
		if rs == nil {
			continue
		}
		if rs.head.terminal {
			if err := w.bucket(bEnded).Delete(endedKey(rs.head.terminalAt, rid)); err != nil {
				return err
			}
		}
		if err := w.deleteRun(rs); err != nil {
			return err
		}
	}
	prefix := ownerPrefix(ss.meta.Owner)
	var owned []byte
	c := w.bucket(bOwners).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(k) == len(prefix)+8 && string(v) == id {
			owned = bytes.Clone(k)
			break
		}
	}
	if owned != nil {
		if err := w.bucket(bOwners).Delete(owned); err != nil {
			return err
		}
	}
	delete(w.sessCache, id) // not written back at flush
	return w.bucket(bSessions).Delete([]byte(id))
}

// deleteRun removes a run's events, index, keys, meta and place in its
// session.
func (w *writer) deleteRun(rs *runState) error {
	id := []byte(rs.id)
	exts, err := extentsAfter(w.bucket(bIndex), rs.id, rs.head.pending, 0, int(min(rs.head.lastSeq, 1<<31)))
	if err != nil {
		return err
	}
	for _, e := range exts {
		for p := e.pos; p < e.pos+e.count; p++ {
			if err := w.bucket(bLog).Delete(be64(p)); err != nil {
				return err
			}
		}
	}
	prefix := segmentPrefix(rs.id)
	var segs [][]byte
	c := w.bucket(bIndex).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		segs = append(segs, bytes.Clone(k))
	}
	for _, k := range segs {
		if err := w.bucket(bIndex).Delete(k); err != nil {
			return err
		}
	}
	if err := w.bucket(bKeys).DeleteBucket(id); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
		return err
	}
	for _, b := range []*bbolt.Bucket{w.bucket(bRuns), w.bucket(bHeads), w.bucket(bActive)} {
		if err := b.Delete(id); err != nil {
			return err
		}
	}
	ss, err := w.session(rs.head.sessionID)
	if err != nil {
		return err
	}
	if ss != nil {
		for i, r := range ss.meta.Runs {
			if r == rs.id {
				ss.meta.Runs = append(ss.meta.Runs[:i:i], ss.meta.Runs[i+1:]...)
				ss.dirty = true
				break
			}
		}
	}
	*rs = runState{id: rs.id}
	return nil
}
