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

// writer applies the requests of one batch. Events go to a buffer that the
// committer appends to the log in one write; a request that changes what
// bbolt holds (a session, a run's registration or end, an outbox entry, a
// deletion) opens the batch's one bbolt read-write transaction, which
// commits after the log write is durable (commit.go). The runs and
// sessions the batch touches are cached and written once. A method returns
// an error only when the batch must fail (a storage fault); refusals such
// as ErrTerminal are results, stored in the request, and write nothing.
type writer struct {
	s         *Store
	tx        *bbolt.Tx               // nil until the batch needs bbolt
	open      [nBuckets]*bbolt.Bucket // opened on first use
	runCache  map[string]*runState
	touched   []*runState // runCache's values, in the order first touched
	sessCache map[string]*sessState
	buf       []byte // markerRecord, then the batch's records
	published []protocol.Envelope
	outbox    bool   // Options.Outbox: record notable events (outbox.go)
	start     uint64 // log offset the batch's output starts at (set by the committer before flush)
	marked    bool   // the output starts with markerRecord
	free      []*runState

	streams     []pendingStream       // the batch's durable-stream records (streamrec.go)
	deadStreams []streamEntry         // the records of the streams it drops
	streamMetas map[string]*batchMeta // the stream metas it writes
	ext         []extData             // the stream data it writes, where it is (streamrec.go)
}

// runState is a run as the batch sees it.
type runState struct {
	id      string
	exists  bool
	old     *runEntry // the committed entry it started from, nil when none
	dropOld bool      // old is deleted by this batch
	created bool      // registered by this batch
	headDue bool      // its bbolt head changes (registration, end)
	bornRel uint64    // created: len(buf) when it was registered

	session      string
	lastSeq      uint64
	terminal     bool
	terminalType protocol.EventType
	terminalAt   float64

	first uint64     // seq of rel[0]
	rel   []uint64   // offsets in buf of the batch's events of the run
	keys  []batchKey // idempotency keys stored by the batch
}

type batchKey struct {
	key string
	fp  uint32
	seq uint64
}

// sessState is a session as the batch sees it.
type sessState struct {
	meta  journal.SessionMeta
	dirty bool
}

// maxKeptBuf is the largest record buffer kept from one batch to the next
// (durable streams' data is not copied into it: writer.ext).
const maxKeptBuf = 4 << 20

func newWriter(s *Store) *writer {
	return &writer{s: s, runCache: make(map[string]*runState), sessCache: make(map[string]*sessState)}
}

func (w *writer) begin() {
	clear(w.sessCache)
	w.marked = false
	w.buf = append(w.buf[:0], markerRecord...)
}

// end forgets the batch; the caller has committed or rolled back w.tx.
func (w *writer) end() {
	w.tx = nil
	clear(w.open[:])
	for _, rs := range w.touched {
		*rs = runState{rel: rs.rel[:0], keys: rs.keys[:0]}
		w.free = append(w.free, rs)
	}
	clear(w.touched)
	w.touched = w.touched[:0]
	clear(w.runCache)
	clear(w.sessCache)
	clear(w.streams)
	w.streams, w.deadStreams = w.streams[:0], w.deadStreams[:0]
	clear(w.streamMetas)
	clear(w.ext)
	w.ext = w.ext[:0]
	if cap(w.buf) > maxKeptBuf {
		w.buf = nil
	}
}

// needTx opens the batch's bbolt transaction if it is not open yet.
func (w *writer) needTx() error {
	if w.tx != nil {
		return nil
	}
	tx, err := w.s.db.Begin(true)
	if err != nil {
		return err
	}
	w.tx = tx
	// The stream writes bbolt does not hold yet: the overlay's, then the
	// batch's own before now (streamoverlay.go).
	if err := w.s.overlay.writeTo(tx); err != nil {
		return err
	}
	return w.writeBatchMetas()
}

// bucket returns a top-level bucket of the transaction, opening both on
// first use.
func (w *writer) bucket(i int) (*bbolt.Bucket, error) {
	if err := w.needTx(); err != nil {
		return nil, err
	}
	if w.open[i] == nil {
		w.open[i] = w.tx.Bucket(bucketNames[i])
	}
	return w.open[i], nil
}

// mustBucket is bucket for callers that opened the transaction already.
func (w *writer) mustBucket(i int) *bbolt.Bucket {
	b, _ := w.bucket(i)
	return b
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
	case opStreamCommit:
		return w.streamCommit(r)
	case opStreamDrop:
		return w.streamDrop(r)
	}
	return fmt.Errorf("journal/bolt: unknown write %d", r.kind)
}

// global is the log offset of the record at buf[rel] once buf is written
// (with its marker when the batch has a transaction and records, without
// otherwise).
func (w *writer) global(rel uint64) uint64 {
	rel += w.extBefore(rel)
	if w.marked {
		return w.start + rel
	}
	return w.start + rel - uint64(len(markerRecord))
}

// flush writes the heads and sessions the batch changed and the log's end
// into the transaction.
func (w *writer) flush(logEnd uint64) error {
	for _, rs := range w.touched {
		if !rs.exists || !rs.headDue {
			continue
		}
		var born uint64
		if rs.created {
			born = w.global(rs.bornRel)
		} else {
			born = rs.old.born
		}
		h := head{born: born, terminal: rs.terminal, terminalAt: rs.terminalAt, terminalType: rs.terminalType, sessionID: rs.session}
		if err := w.mustBucket(bHeads).Put([]byte(rs.id), h.encode()); err != nil {
			return err
		}
	}
	for id, ss := range w.sessCache {
		if ss.dirty {
			raw, err := json.Marshal(ss.meta)
			if err != nil {
				return err
			}
			if err := w.mustBucket(bSessions).Put([]byte(id), raw); err != nil {
				return err
			}
			if err := markQueued(w.mustBucket(bQueued), id, len(ss.meta.Queue) > 0); err != nil {
				return err
			}
		}
	}
	if err := w.flushEnded(); err != nil {
		return err
	}
	if err := w.flushStreams(); err != nil {
		return err
	}
	return w.mustBucket(bMeta).Put(metaLogEnd, be64(logEnd))
}

// flushEnded writes the index of the runs the batch ends and deletes that
// of the ended runs it deletes (endedindex.go), with their records'
// counts in segment_live.
func (w *writer) flushEnded() error {
	counts := segCounts{}
	for _, rs := range w.touched {
		if rs.dropOld && rs.old != nil && rs.old.terminal {
			if err := w.mustBucket(bEndedOffs).Delete([]byte(rs.id)); err != nil {
				return err
			}
			w.s.countRecords(counts, &rs.old.offs, -1)
		}
		if !rs.exists || !rs.terminal || (!rs.created && rs.old != nil && rs.old.terminal) {
			continue
		}
		// Ended by this batch: its earlier events' offsets, then the
		// batch's.
		var offs offList
		if !rs.created && rs.old != nil {
			w.s.countRecords(counts, &rs.old.offs, 1)
			offs = offList{n: rs.old.offs.n, last: rs.old.offs.last, data: slices.Clone(rs.old.offs.data)}
		}
		base := w.s.log.active().base
		for _, rel := range rs.rel {
			offs.data = binary.AppendUvarint(offs.data, zigzag(int64(w.global(rel)-offs.last)))
			offs.last = w.global(rel)
			offs.n++
			counts.count(base, recordLen(w.buf[rel:]), 1)
		}
		if err := w.mustBucket(bEndedOffs).Put([]byte(rs.id), encodeEnded(rs.lastSeq, offs.data)); err != nil {
			return err
		}
	}
	return applySegCounts(w.tx, counts)
}

// newState returns a cleared runState.
func (w *writer) newState(id string) *runState {
	var rs *runState
	if n := len(w.free); n > 0 {
		rs, w.free = w.free[n-1], w.free[:n-1]
	} else {
		rs = &runState{}
	}
	rs.id = id
	w.runCache[id] = rs
	w.touched = append(w.touched, rs)
	return rs
}

// run returns the run as the batch sees it, nil when it does not exist.
func (w *writer) run(id string) (*runState, error) {
	if rs, ok := w.runCache[id]; ok {
		if !rs.exists {
			return nil, nil
		}
		return rs, nil
	}
	rs := w.newState(id)
	e, err := w.s.committed(w.tx, id)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, nil
	}
	rs.exists, rs.old = true, e
	rs.session, rs.lastSeq, rs.first = e.session, e.lastSeq, e.lastSeq+1
	rs.terminal, rs.terminalType, rs.terminalAt = e.terminal, e.terminalType, e.terminalAt
	return rs, nil
}

// session returns the session as the batch sees it, nil when it does not
// exist.
func (w *writer) session(id string) (*sessState, error) {
	if ss, ok := w.sessCache[id]; ok {
		return ss, nil
	}
	b, err := w.bucket(bSessions)
	if err != nil {
		return nil, err
	}
	if b.Get([]byte(id)) == nil {
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
// check, then the new record and, for a terminal event, the run's end in
// bbolt and, for a notable one, the outbox entry.
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
	if rs.session != e.SessionID {
		r.err = protocol.Errorf(protocol.CodeBadRequest, "session_id: run %s belongs to session %s, not %s", e.RunID, rs.session, e.SessionID)
		return nil
	}
	var fp uint32
	if r.key != "" {
		fp = keyPrint(w.s.seed, r.key)
		seq, err := w.findKey(rs, r.key, fp)
		if err != nil {
			return err
		}
		if seq != 0 {
			r.stored, err = w.readEvent(rs, seq)
			return err
		}
	}
	if rs.terminal {
		var err error
		if r.stored, err = w.readEvent(rs, rs.lastSeq); err != nil {
			return err
		}
		r.err = fmt.Errorf("run %q: %w", e.RunID, journal.ErrTerminal)
		return nil
	}
	if e.Terminal || (w.outbox && journal.Notable(&e)) {
		if err := w.needTx(); err != nil {
			return err
		}
	}
	seq := rs.lastSeq + 1
	e.Seq = seq
	e.EventID = e.RunID + ":" + strconv.FormatUint(seq, 10)
	rs.rel = append(rs.rel, uint64(len(w.buf)))
	w.buf = appendEventRecord(w.buf, recEvent, r.key, &e)
	if r.key != "" {
		rs.keys = append(rs.keys, batchKey{key: r.key, fp: fp, seq: seq})
	}
	rs.lastSeq = seq
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

// findKey returns the seq the run stored key at, 0 when it did not.
func (w *writer) findKey(rs *runState, key string, fp uint32) (uint64, error) {
	for _, k := range rs.keys {
		if k.fp == fp && k.key == key {
			return k.seq, nil
		}
	}
	if rs.created || rs.old == nil {
		return 0, nil
	}
	var found uint64
	var err error
	match := func(seq uint64) bool {
		var body []byte
		if body, _, err = w.s.log.body(rs.old.offs.at(seq)); err != nil {
			return false
		}
		var eb eventBody
		if eb, err = parseEventBody(body); err != nil {
			return false
		}
		if string(eb.key) == key {
			found = seq
			return false
		}
		return true
	}
	if t := rs.old.keys; t != nil && !t.overflow {
		t.candidates(fp, match)
		return found, err
	}
	// An ended run keeps no key table: its records say.
	rs.old.offs.each(1, func(seq, _ uint64) bool { return match(seq) })
	return found, err
}

// readEvent returns the run's event at seq, from the batch or the log.
func (w *writer) readEvent(rs *runState, seq uint64) (protocol.Envelope, error) {
	var body []byte
	if seq >= rs.first && seq-rs.first < uint64(len(rs.rel)) {
		b, _, ok := frame(w.buf[rs.rel[seq-rs.first]:])
		if !ok {
			return protocol.Envelope{}, errRecord
		}
		body = b
	} else {
		if rs.old == nil || seq == 0 || seq > rs.old.lastSeq {
			return protocol.Envelope{}, fmt.Errorf("journal/bolt: run %q has no event %d", rs.id, seq)
		}
		b, _, err := w.s.log.body(rs.old.offs.at(seq))
		if err != nil {
			return protocol.Envelope{}, err
		}
		body = b
	}
	eb, err := parseEventBody(body)
	if err != nil {
		return protocol.Envelope{}, err
	}
	d := rowDecoder{runID: rs.id}
	return d.decode(seq, eb.row)
}

// finish records a run's terminal event: head, indexes, session.
func (w *writer) finish(rs *runState, e *protocol.Envelope) error {
	rs.terminal, rs.terminalType, rs.terminalAt = true, e.Type, e.CreatedAt
	rs.headDue = true
	if err := w.mustBucket(bActive).Delete([]byte(rs.id)); err != nil {
		return err
	}
	if err := w.mustBucket(bEnded).Put(endedKey(e.CreatedAt, rs.id), []byte{}); err != nil {
		return err
	}
	ss, err := w.session(rs.session)
	if err != nil {
		return err
	}
	if ss != nil && ss.meta.ActiveRun == rs.id {
		ss.meta.ActiveRun = ""
		ss.dirty = true
	}
	return nil
}
