package bolt

import (
	"cmp"
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/bbolt"
)

// The index of ended runs. An active run's index (its offsets and keys)
// lives in memory, rebuilt on open from the log. An ended run's is also
// written to bbolt by the transaction of the batch that ends it:
//
//	ended_offsets  run id → uvarint(last seq), then the zigzag-varint
//	               deltas of its events' offsets (offList.data's form)
//	segment_live   be64(segment base) → uvarint(records), uvarint(bytes):
//	               the ended runs' records each segment holds
//
// so that an open reads neither the ended runs' heads nor their records:
// it reads the log only from the earliest birth of an active run (or
// bbolt's log end, if earlier), and takes the segments' live counts of
// ended runs from segment_live. An ended run's entry is read from bbolt
// when it is first needed and kept in a bounded cache (endedCache).
// Deleting an ended run (Trim, DeleteSession) takes its records out of
// segment_live in the deleting batch's transaction; compaction moves them
// in the transaction that points the index at the copies.

// endedCacheBytes and endedCacheRuns bound the ended runs' entries kept in
// memory (their offsets: a few bytes an event).
const (
	endedCacheBytes = 16 << 20
	endedCacheRuns  = 4096
)

// endedCache keeps the entries of ended runs read from bbolt (and of runs
// that ended in this process), first in first out. It is guarded by
// Store.idxMu: lookups under the shared lock, changes under the exclusive
// one. gen counts the changes a reader's copy from bbolt may have missed
// (a deletion, a relocation): a load started under an older gen is used
// once and not kept.
type endedCache struct {
	m     map[string]*list.Element // of *cachedRun
	order list.List
	bytes int
	gen   uint64

	maxRuns, maxBytes int // 0: endedCacheRuns, endedCacheBytes
}

type cachedRun struct {
	id string
	e  *runEntry
	n  int // bytes counted
}

func entrySize(id string, e *runEntry) int { return len(id) + 128 + e.offs.size() }

func (c *endedCache) get(id string) *runEntry {
	if el := c.m[id]; el != nil {
		return el.Value.(*cachedRun).e
	}
	return nil
}

func (c *endedCache) put(id string, e *runEntry) {
	if c.m == nil {
		c.m = make(map[string]*list.Element)
	}
	c.remove(id)
	cr := &cachedRun{id: id, e: e, n: entrySize(id, e)}
	c.m[id] = c.order.PushBack(cr)
	c.bytes += cr.n
	maxRuns, maxBytes := cmp.Or(c.maxRuns, endedCacheRuns), cmp.Or(c.maxBytes, endedCacheBytes)
	for (c.bytes > maxBytes || len(c.m) > maxRuns) && c.order.Len() > 1 {
		old := c.order.Front().Value.(*cachedRun)
		c.remove(old.id)
	}
}

func (c *endedCache) remove(id string) {
	if el := c.m[id]; el != nil {
		c.bytes -= el.Value.(*cachedRun).n
		c.order.Remove(el)
		delete(c.m, id)
	}
}

// encodeEnded is an ended run's ended_offsets value.
func encodeEnded(lastSeq uint64, data []byte) []byte {
	b := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(data)), lastSeq)
	return append(b, data...)
}

var errEndedOffsets = errors.New("journal/bolt: malformed ended-run offsets")

// decodeEnded rebuilds an ended run's offsets from its ended_offsets value.
func decodeEnded(b []byte) (offList, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return offList{}, errEndedOffsets
	}
	var l offList
	var off uint64
	i := k
	for seq := uint64(0); seq < n; seq++ {
		u, k := binary.Uvarint(b[i:])
		if k <= 0 {
			return offList{}, errEndedOffsets
		}
		i += k
		off += uint64(unzigzag(u))
		l.add(off)
	}
	if i != len(b) {
		return offList{}, errEndedOffsets
	}
	l.data, l.marks = slices.Clip(l.data), slices.Clip(l.marks)
	return l, nil
}

// endedLastSeq reads the last seq at the start of an ended_offsets value.
func endedLastSeq(b []byte) (uint64, bool) {
	n, k := binary.Uvarint(b)
	return n, k > 0
}

// loadEnded reads an ended run's entry from bbolt: nil when bbolt has no
// ended run of that id.
func loadEnded(tx *bbolt.Tx, id string) (*runEntry, error) {
	raw := tx.Bucket(bucketHeads).Get([]byte(id))
	if raw == nil {
		return nil, nil
	}
	h, err := decodeHead(raw)
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", id, err)
	}
	if !h.terminal {
		return nil, nil
	}
	v := tx.Bucket(bucketEndedOffs).Get([]byte(id))
	if v == nil {
		return nil, fmt.Errorf("journal/bolt: ended run %q has no offsets", id)
	}
	offs, err := decodeEnded(v)
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", id, err)
	}
	return &runEntry{session: h.sessionID, born: h.born, lastSeq: offs.n, terminal: true,
		terminalType: h.terminalType, terminalAt: h.terminalAt, offs: offs}, nil
}

// endedState reads an ended run's changing state, without its offsets:
// nil when bbolt has no ended run of that id.
func endedState(tx *bbolt.Tx, id string) (*runEntry, error) {
	raw := tx.Bucket(bucketHeads).Get([]byte(id))
	if raw == nil {
		return nil, nil
	}
	h, err := decodeHead(raw)
	if err != nil || !h.terminal {
		return nil, err
	}
	last, ok := endedLastSeq(tx.Bucket(bucketEndedOffs).Get([]byte(id)))
	if !ok {
		return nil, fmt.Errorf("journal/bolt: ended run %q has no offsets", id)
	}
	return &runEntry{session: h.sessionID, born: h.born, lastSeq: last, terminal: true,
		terminalType: h.terminalType, terminalAt: h.terminalAt}, nil
}

// lookup returns the run's entry for a reader (not the committer): an
// active run's from the index, an ended one's from the cache or, read
// from bbolt, kept in it. nil: no such run (or one registered this
// instant: bbolt knows it before the index). The caller holds log.mu
// shared, so no segment its offsets point at is dropped meanwhile.
func (s *Store) lookup(id string) (*runEntry, error) {
	s.idxMu.RLock()
	e := s.index[id]
	if e == nil {
		e = s.ended.get(id)
	}
	gen := s.ended.gen
	s.idxMu.RUnlock()
	if e != nil {
		return e, nil
	}
	if err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		e, err = loadEnded(tx, id)
		return err
	}); err != nil || e == nil {
		return nil, err
	}
	s.idxMu.Lock()
	if s.ended.gen == gen && s.index[id] == nil {
		if c := s.ended.get(id); c != nil {
			e = c
		} else {
			s.ended.put(id, e)
		}
	}
	s.idxMu.Unlock()
	return e, nil
}

// entry returns a copy of the run's changing state (without its offsets),
// nil when the run has none yet or does not exist: an active run's from
// the index, an ended one's from the cache or bbolt (tx).
func (s *Store) entry(tx *bbolt.Tx, id string) (*runEntry, error) {
	s.idxMu.RLock()
	e := s.index[id]
	if e == nil {
		e = s.ended.get(id)
	}
	if e != nil {
		c := &runEntry{session: e.session, lastSeq: e.lastSeq, terminal: e.terminal, terminalType: e.terminalType, terminalAt: e.terminalAt}
		s.idxMu.RUnlock()
		return c, nil
	}
	s.idxMu.RUnlock()
	return endedState(tx, id)
}

// committed returns the run's entry for the committer: from the index,
// the cache, or bbolt through tx (nil: the committer opens a read
// transaction of its own). nil: no such run.
func (s *Store) committed(tx *bbolt.Tx, id string) (*runEntry, error) {
	if e := s.index[id]; e != nil { // the committer alone changes index
		return e, nil
	}
	s.idxMu.RLock()
	e := s.ended.get(id)
	s.idxMu.RUnlock()
	if e != nil {
		return e, nil
	}
	var err error
	if tx != nil {
		e, err = loadEnded(tx, id)
	} else {
		err = s.db.View(func(tx *bbolt.Tx) error {
			e, err = loadEnded(tx, id)
			return err
		})
	}
	if err != nil || e == nil {
		return nil, err
	}
	s.idxMu.Lock()
	s.ended.put(id, e)
	s.idxMu.Unlock()
	return e, nil
}

// segCounts is a change of segment_live: records and bytes by segment base.
type segCounts map[uint64][2]int64

// count adds the record at off, of length n, with sign.
func (c segCounts) count(base uint64, n uint64, sign int64) {
	v := c[base]
	v[0] += sign
	v[1] += sign * int64(n)
	c[base] = v
}

// countRecords adds (sign 1) or takes (-1) the records at the offsets of
// l to c; the committer's (or recovery's) view of the log.
func (s *Store) countRecords(c segCounts, l *offList, sign int64) {
	l.each(1, func(_, off uint64) bool {
		if seg := s.log.find(off); seg != nil {
			n := uint64(recHeader)
			if h, err := seg.bytes(off-seg.base, recHeader); err == nil {
				n = recordLen(h)
			}
			c.count(seg.base, n, sign)
		}
		return true
	})
}

// applySegCounts adds c to segment_live in tx; a segment left with no
// record loses its key.
func applySegCounts(tx *bbolt.Tx, c segCounts) error {
	b := tx.Bucket(bucketSegLive)
	for base, d := range c {
		if d == [2]int64{} {
			continue
		}
		k := be64(base)
		n, bytes := decodeSegLive(b.Get(k))
		n, bytes = n+d[0], bytes+d[1]
		var err error
		if n <= 0 {
			err = b.Delete(k)
		} else {
			err = b.Put(k, encodeSegLive(n, bytes))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func encodeSegLive(n, bytes int64) []byte {
	b := binary.AppendUvarint(nil, uint64(n))
	return binary.AppendUvarint(b, uint64(max(bytes, 0)))
}

func decodeSegLive(v []byte) (n, bytes int64) {
	a, k := binary.Uvarint(v)
	if k <= 0 {
		return 0, 0
	}
	b, j := binary.Uvarint(v[k:])
	if j <= 0 {
		return 0, 0
	}
	return int64(a), int64(b)
}

// persistEndedRuns writes the ended_offsets and segment_live of every
// ended run in the index, then marks the file formatEndedIndex, and lets
// the ended runs' entries go from memory: Open of a file of an earlier
// layout, after a full recovery. It goes a chunk of runs a transaction;
// a crash before the mark leaves the file of its layout, and the next
// open does it again (its writes are the same).
func (s *Store) persistEndedRuns() error {
	var ids []string
	for id, e := range s.index {
		if e.terminal {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	counts := segCounts{}
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 4096)]
		ids = ids[len(chunk):]
		if err := s.db.Update(func(tx *bbolt.Tx) error {
			b := tx.Bucket(bucketEndedOffs)
			for _, id := range chunk {
				e := s.index[id]
				if err := b.Put([]byte(id), encodeEnded(e.lastSeq, e.offs.data)); err != nil {
					return err
				}
				s.countRecords(counts, &e.offs, 1)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if err := s.db.Update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(bucketSegLive); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketSegLive); err != nil {
			return err
		}
		if err := applySegCounts(tx, counts); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(metaFormat, be64(formatEndedIndex))
	}); err != nil {
		return err
	}
	for id, e := range s.index {
		if e.terminal {
			delete(s.index, id)
		}
	}
	return nil
}
