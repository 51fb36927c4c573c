package bolt

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// writer applies the requests of one batch inside one read-write
// transaction. It caches the heads and sessions the batch touches and
// writes each once, at flush. A method returns an error only when the
// transaction must fail (a storage fault); refusals such as ErrTerminal are
// results, stored in the request, and write nothing.
type writer struct {
	tx        *bbolt.Tx
	open      [nBuckets]*bbolt.Bucket // opened on first use
	pos       uint64                  // last log position used
	posDirty  bool
	runCache  map[string]*runState
	sessCache map[string]*sessState
	buf       []byte              // rows of this batch; a value must stay intact until commit
	published []protocol.Envelope // reused by commit
	outbox    bool                // Options.Outbox: record notable events (outbox.go)
}

// runState is a run as the batch sees it.
type runState struct {
	id     string
	exists bool
	dirty  bool
	head   head
	keys   *bbolt.Bucket // nil until needed
}

// sessState is a session as the batch sees it.
type sessState struct {
	meta  journal.SessionMeta
	dirty bool
}

// maxKeptBuf is the largest row buffer kept from one batch to the next.
const maxKeptBuf = 4 << 20

func newWriter() *writer {
	return &writer{runCache: make(map[string]*runState), sessCache: make(map[string]*sessState)}
}

func (w *writer) begin(tx *bbolt.Tx) {
	w.tx = tx
	w.posDirty = false
	clear(w.runCache)
	clear(w.sessCache)
	w.buf = w.buf[:0]
}

// end forgets the transaction; called after it commits or rolls back.
func (w *writer) end() {
	w.tx = nil
	clear(w.open[:])
	clear(w.runCache)
	clear(w.sessCache)
	if cap(w.buf) > maxKeptBuf {
		w.buf = nil
	}
}

// bucket returns a top-level bucket of the transaction, opening it on
// first use.
func (w *writer) bucket(i int) *bbolt.Bucket {
	if w.open[i] == nil {
		w.open[i] = w.tx.Bucket(bucketNames[i])
		if i == bLog {
			w.open[i].FillPercent = logFill
		}
	}
	return w.open[i]
}

// apply applies one request.
func (w *writer) apply(r *request) error {
	r.stored, r.fresh, r.trimmed, r.err = protocol.Envelope{}, false, 0, nil
	switch r.kind {
	case opAppend:
		return w.append(r)
	case opCreateSession:
		return w.createSession(r)
	case opBeginRun:
		return w.beginRun(r)
	case opTrim:
		return w.trim(r)
	case opDeleteSession:
		return w.deleteSession(r)
	}
	return fmt.Errorf("journal/bolt: unknown write %d", r.kind)
}

// flush writes the heads and sessions the batch changed.
func (w *writer) flush() error {
	if w.posDirty {
		if err := w.bucket(bLog).SetSequence(w.pos); err != nil {
			return err
		}
	}
	for id, rs := range w.runCache {
		if rs.exists && rs.dirty {
			if err := w.bucket(bHeads).Put([]byte(id), rs.head.encode()); err != nil {
				return err
			}
		}
	}
	for id, ss := range w.sessCache {
		if ss.dirty {
			raw, err := json.Marshal(ss.meta)
			if err != nil {
				return err
			}
			if err := w.bucket(bSessions).Put([]byte(id), raw); err != nil {
				return err
			}
		}
	}
	return nil
}

// run returns the run as the batch sees it, nil when it does not exist.
func (w *writer) run(id string) (*runState, error) {
	if rs, ok := w.runCache[id]; ok {
		if !rs.exists {
			return nil, nil
		}
		return rs, nil
	}
	rs := &runState{id: id}
	w.runCache[id] = rs
	hb := w.bucket(bHeads).Get([]byte(id))
	if hb == nil {
		return nil, nil
	}
	h, err := decodeHead(hb)
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", id, err)
	}
	rs.exists, rs.head = true, h
	return rs, nil
}

// session returns the session as the batch sees it, nil when it does not
// exist.
func (w *writer) session(id string) (*sessState, error) {
	if ss, ok := w.sessCache[id]; ok {
		return ss, nil
	}
	if w.bucket(bSessions).Get([]byte(id)) == nil {
		return nil, nil
	}
	m, err := loadSession(w.tx, id)
	if err != nil {
		return nil, err
	}
	ss := &sessState{meta: m}
	w.sessCache[id] = ss
	return ss, nil
}

// append journals r.event: the idempotency key first, then the terminal
// check, then the new row, its key, the head and, for a terminal event, the
// indexes and the session's active run.
func (w *writer) append(r *request) error {
	e := r.event
	rs, err := w.run(e.RunID)
	if err != nil {
		return err
	}
	if rs == nil {
		r.err = fmt.Errorf("run %q: %w", e.RunID, journal.ErrNotFound)
		return nil
	}
	if rs.head.sessionID != e.SessionID {
		r.err = protocol.Errorf(protocol.CodeBadRequest, "session_id: run %s belongs to session %s, not %s", e.RunID, rs.head.sessionID, e.SessionID)
		return nil
	}
	if r.key != "" {
		for _, k := range rs.head.keys {
			if k.key == r.key {
				r.stored, err = readEvent(w.tx, e.RunID, rs.head.pending, k.seq)
				return err
			}
		}
		if rs.keys == nil {
			rs.keys = w.bucket(bKeys).Bucket([]byte(e.RunID))
		}
		if rs.keys != nil {
			if v := rs.keys.Get([]byte(r.key)); v != nil {
				if len(v) != 8 {
					return fmt.Errorf("journal/bolt: run %q key %q: malformed seq", e.RunID, r.key)
				}
				r.stored, err = readEvent(w.tx, e.RunID, rs.head.pending, binary.BigEndian.Uint64(v))
				return err
			}
		}
	}
	if rs.head.terminal {
		r.stored, err = readEvent(w.tx, e.RunID, rs.head.pending, rs.head.lastSeq)
		if err != nil {
			return err
		}
		r.err = fmt.Errorf("run %q: %w", e.RunID, journal.ErrTerminal)
		return nil
	}

	seq := rs.head.lastSeq + 1
	e.Seq = seq
	e.EventID = e.RunID + ":" + strconv.FormatUint(seq, 10)
	start := len(w.buf)
	w.buf = appendRow(w.buf, &e)
	log := w.bucket(bLog)
	if !w.posDirty {
		w.pos, w.posDirty = log.Sequence(), true
	}
	w.pos++
	if err := log.Put(be64(w.pos), w.buf[start:]); err != nil {
		return err
	}
	rs.head.pending = addExtent(rs.head.pending, seq, w.pos)
	if len(rs.head.pending) >= spillExtents {
		if err := w.spill(rs); err != nil {
			return err
		}
	}
	if r.key != "" {
		rs.head.keys = append(rs.head.keys, headKey{key: r.key, seq: seq})
		if len(rs.head.keys) >= spillKeys {
			if err := w.spillKeys(rs); err != nil {
				return err
			}
		}
	}
	rs.head.lastSeq = seq
	rs.dirty = true
	if e.Terminal {
		if err := w.finish(rs, &e); err != nil {
			return err
		}
	}
	if err := w.recordOutbox(&e); err != nil {
		return err
	}
	r.stored, r.fresh = e, true
	return nil
}

// spillKeys is how many idempotency keys a head holds before they move to
// the run's keys bucket. Keys kept in the head, which a batch rewrites
// anyway, spare the batch a page of the run's keys bucket per run it
// appends to: with one page per run, a batch over 200 runs wrote 200 more
// pages, and keyed appends (the executor's) cost 2.5 times the CPU of
// unkeyed ones.
const spillKeys = 16

// spillKeys moves the head's idempotency keys to the run's keys bucket.
func (w *writer) spillKeys(rs *runState) error {
	if len(rs.head.keys) == 0 {
		return nil
	}
	if rs.keys == nil {
		rs.keys = w.bucket(bKeys).Bucket([]byte(rs.id))
	}
	if rs.keys == nil {
		var err error
		if rs.keys, err = w.bucket(bKeys).CreateBucket([]byte(rs.id)); err != nil {
			return err
		}
	}
	for _, k := range rs.head.keys {
		if err := rs.keys.Put([]byte(k.key), be64(k.seq)); err != nil {
			return err
		}
	}
	rs.head.keys = rs.head.keys[:0]
	return nil
}

// spill moves the head's pending extents to a segment of the index.
func (w *writer) spill(rs *runState) error {
	if len(rs.head.pending) == 0 {
		return nil
	}
	seg := appendExtents(nil, rs.head.pending)
	if err := w.bucket(bIndex).Put(segmentKey(rs.id, rs.head.pending[0].seq), seg); err != nil {
		return err
	}
	rs.head.pending = nil
	return nil
}

// finish records a run's terminal event: head, index, indexes, session.
func (w *writer) finish(rs *runState, e *protocol.Envelope) error {
	rs.head.terminal, rs.head.terminalType, rs.head.terminalAt = true, e.Type, e.CreatedAt
	if err := w.spill(rs); err != nil {
		return err
	}
	if err := w.bucket(bActive).Delete([]byte(rs.id)); err != nil {
		return err
	}
	if err := w.bucket(bEnded).Put(endedKey(e.CreatedAt, rs.id), []byte{}); err != nil {
		return err
	}
	ss, err := w.session(rs.head.sessionID)
	if err != nil {
		return err
	}
	if ss != nil && ss.meta.ActiveRun == rs.id {
		ss.meta.ActiveRun = ""
		ss.dirty = true
	}
	return nil
}

// createSession registers r.session and indexes it under its owner.
func (w *writer) createSession(r *request) error {
	m := r.session
	ss, err := w.session(m.ID)
	if err != nil {
		return err
	}
	if ss != nil {
		r.err = fmt.Errorf("session %q: %w", m.ID, journal.ErrExists)
		return nil
	}
	n, err := w.bucket(bOwners).NextSequence()
	if err != nil {
		return err
	}
	if err := w.bucket(bOwners).Put(ownerKey(m.Owner, n), []byte(m.ID)); err != nil {
		return err
	}
	w.sessCache[m.ID] = &sessState{meta: m, dirty: true}
	return nil
}

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
	case w.bucket(bRuns).Get([]byte(m.ID)) != nil:
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
	if err := w.bucket(bRuns).Put([]byte(m.ID), raw); err != nil {
		return err
	}
	if err := w.bucket(bActive).Put([]byte(m.ID), []byte{}); err != nil {
		return err
	}
	w.runCache[m.ID] = &runState{id: m.ID, exists: true, dirty: true, head: head{sessionID: m.SessionID}}
	ss.meta.Runs = append(ss.meta.Runs, m.ID)
	ss.meta.ActiveRun = m.ID
	ss.dirty = true
	if r.update != nil {
		r.sess = ss.meta
		r.sess.Runs = slices.Clone(ss.meta.Runs)
	}
	return nil
}
