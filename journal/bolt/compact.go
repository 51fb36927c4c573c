package bolt

import (
	"fmt"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
)

// Compaction. A segment whose runs and streams are all gone is dropped
// (merge.go). One
// that a few live runs still hold — a run that stays active for long, its
// events spread over segments whose other runs were trimmed — would hold
// its dead bytes as long: when less than a quarter of a sealed segment is
// live, the committer copies its live records to the end of the log (one
// write, one fdatasync), points the index at the copies (a durable
// stream's and an ended run's in bbolt, in one transaction after the
// copies are durable, which also moves the ended runs' records in
// segment_live) and drops the segment. A crash after the copies are durable and before
// the drop leaves both: recovery takes the later record of a seq, so
// either way each event is read once.

// compactRatio: a sealed segment is compacted when its live bytes are less
// than 1/compactRatio of its size.
const compactRatio = 4

// victim returns a sealed segment worth compacting, nil when none is.
func (s *Store) victim() *segment {
	segs := s.log.segs
	for _, seg := range segs[:len(segs)-1] {
		if seg.live > 0 && seg.liveBytes*compactRatio < seg.size.Load() {
			return seg
		}
	}
	return nil
}

// compact compacts one segment, if one is worth it, and reports whether
// another may be.
func (s *Store) compact() (more bool, err error) {
	seg := s.victim()
	if seg == nil {
		return false, nil
	}
	// Stream records count live by the index in bbolt: it must hold them
	// all (streamoverlay.go).
	if err := s.checkpointStreams(); err != nil {
		return false, err
	}
	all, err := seg.bytes(0, seg.size.Load())
	if err != nil {
		return false, err
	}
	type moved struct {
		id  string
		e   *runEntry
		seq uint64
		rel uint64 // in buf
	}
	// buf starts with a marker, kept when stream records move: their index
	// entries change in bbolt, after the copies are durable, as a batch's
	// (a crash between leaves the copies past the log's end, cut on open).
	buf := append([]byte(nil), markerRecord...)
	var moves []moved
	var smoves []streamMove
	endedMoves := 0
	seen := map[string]*runEntry{} // the entry of each run met, for the whole compaction
	err = s.db.View(func(tx *bbolt.Tx) error {
		ib := tx.Bucket(bucketStreamIndex)
		for off := uint64(0); off < seg.size.Load(); {
			body, n, ok := frame(all[off:])
			if !ok {
				return fmt.Errorf("journal/bolt: compact segment %s: %w at %d", segName(seg.base), errRecord, off)
			}
			rec := all[off : off+uint64(n)]
			if body[0] == recStream {
				if m, live := liveStream(ib, seg.base+off, body); live {
					m.rel = uint64(len(buf))
					smoves = append(smoves, m)
					buf = append(buf, rec...)
				}
			} else if id, e, seq, err := s.liveAt(tx, seen, seg.base+off, body); err != nil {
				return err
			} else if e != nil {
				moves = append(moves, moved{id: id, e: e, seq: seq, rel: uint64(len(buf))})
				buf = append(buf, rec...)
				if e.terminal {
					endedMoves++
				}
			}
			off += uint64(n)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	// The copies change bbolt when a stream's or an ended run's record
	// moves: then they keep the marker.
	skip := uint64(0) // of buf's start: the marker, when no stream record moves
	if len(smoves) == 0 && endedMoves == 0 {
		skip = uint64(len(markerRecord))
	}
	if len(moves)+len(smoves) > 0 {
		out := buf[skip:]
		start, err := s.log.reserve(uint64(len(out)))
		if err != nil {
			return false, err
		}
		from := s.log.active().size.Load()
		wedge, err := s.log.write(out)
		if wedge != nil {
			s.wedged = fmt.Errorf("%w: the event log cannot be repaired until reopened: %v", journal.ErrUnavailable, wedge)
		}
		if err != nil {
			return false, err
		}
		at := func(rel uint64) uint64 { return start + rel - skip }
		byRun := map[*runEntry]map[uint64]uint64{}
		ids := map[*runEntry]string{}
		for _, m := range moves {
			if byRun[m.e] == nil {
				byRun[m.e] = map[uint64]uint64{}
				ids[m.e] = m.id
			}
			byRun[m.e][m.seq] = at(m.rel)
		}
		// The ended runs' new offsets, written to bbolt with the streams'.
		relocated := map[*runEntry]offList{}
		counts := segCounts{}
		for e, to := range byRun {
			if e.terminal {
				relocated[e] = e.offs.relocated(to)
			}
		}
		for _, m := range moves {
			if m.e.terminal {
				n := recordLen(buf[m.rel:])
				counts.count(seg.base, n, -1)
				counts.count(s.log.active().base, n, 1)
			}
		}
		if len(smoves) > 0 || endedMoves > 0 {
			if err := s.relocate(smoves, at, relocated, ids, counts, start+uint64(len(out))); err != nil {
				if cerr := s.log.cut(from); cerr != nil {
					s.wedged = fmt.Errorf("%w: the event log cannot be repaired until reopened: %v", journal.ErrUnavailable, cerr)
				}
				return false, err
			}
		}
		a := s.log.active()
		for _, m := range moves {
			a.live++
			a.liveBytes += recordLen(buf[m.rel:])
		}
		for _, m := range smoves {
			a.live++
			a.liveBytes += uint64(m.ent.n)
		}
		s.idxMu.Lock()
		for e, to := range byRun {
			l, ok := relocated[e]
			if !ok {
				e.offs.relocate(to) // an active run's
				continue
			}
			// An ended run's: e is cached or was read for this
			// compaction. A copy a reader read from bbolt before the
			// transaction and cached meanwhile is stale: it goes.
			e.offs = l
			if c := s.ended.get(ids[e]); c != nil && c != e {
				s.ended.remove(ids[e])
			}
		}
		s.ended.gen++ // a copy read from bbolt before the move is stale
		s.idxMu.Unlock()
	}
	seg.live, seg.liveBytes = 0, 0
	if err := s.log.drop(seg); err != nil {
		return false, err
	}
	return s.victim() != nil, nil
}

// liveAt returns the run id, entry and seq of the event record at off
// when it is the one the index points at, nil otherwise. An ended run's
// entry comes from the cache, else from bbolt (tx). Each run's entry is
// kept in seen for the rest of the compaction, so that every record of a
// run is moved in one entry (a reader may put another copy in the cache
// meanwhile).
func (s *Store) liveAt(tx *bbolt.Tx, seen map[string]*runEntry, off uint64, body []byte) (string, *runEntry, uint64, error) {
	eb, err := parseEventBody(body)
	if err != nil {
		return "", nil, 0, nil // a marker
	}
	row, err := parseRow(eb.row)
	if err != nil {
		return "", nil, 0, nil
	}
	id := string(row.run)
	e, ok := seen[id]
	if !ok {
		if e = s.index[id]; e == nil {
			s.idxMu.RLock()
			e = s.ended.get(id)
			s.idxMu.RUnlock()
		}
		if e == nil {
			if e, err = loadEnded(tx, id); err != nil {
				return "", nil, 0, err
			}
		}
		seen[id] = e
	}
	if e == nil || off < e.born || row.seq == 0 || row.seq > e.lastSeq || e.offs.at(row.seq) != off {
		return "", nil, 0, nil
	}
	return id, e, row.seq, nil
}

// relocate points the index at the copies (to: new offsets by seq).
func (l *offList) relocate(to map[uint64]uint64) { *l = l.relocated(to) }

// relocated is l with the seqs of to at their new offsets.
func (l *offList) relocated(to map[uint64]uint64) offList {
	var out offList
	l.each(1, func(seq, off uint64) bool {
		if n, ok := to[seq]; ok {
			off = n
		}
		out.add(off)
		return true
	})
	out.data, out.marks = slices.Clip(out.data), slices.Clip(out.marks)
	return out
}

// streamMove is a live stream record compaction copies forward.
type streamMove struct {
	key []byte
	ent streamEntry
	rel uint64 // in the copies' buffer
}

// liveStream reports whether the stream record at off (its body) is the
// one the stream index ib points at.
func liveStream(ib *bbolt.Bucket, off uint64, body []byte) (streamMove, bool) {
	if ib == nil {
		return streamMove{}, false
	}
	r, err := parseStreamBody(body)
	if err != nil {
		return streamMove{}, false
	}
	key := recordKey(string(r.name), string(r.gen), r.index)
	ent, ok := decodeStreamEntry(ib.Get(key))
	if !ok || ent.off != off {
		return streamMove{}, false
	}
	return streamMove{key: key, ent: ent}, true
}

// relocate points the stream index and the ended runs' offsets at the
// copies (at gives a stream copy's offset; relocated holds the runs' new
// offsets, ids their ids), moves the ended runs' records in segment_live
// (counts) and records the log's new end, in one transaction.
func (s *Store) relocate(moves []streamMove, at func(rel uint64) uint64, relocated map[*runEntry]offList, ids map[*runEntry]string, counts segCounts, logEnd uint64) error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		ib := tx.Bucket(bucketStreamIndex)
		for _, m := range moves {
			ent := m.ent
			ent.off = at(m.rel)
			if err := ib.Put(m.key, ent.encode()); err != nil {
				return err
			}
		}
		ob := tx.Bucket(bucketEndedOffs)
		for e, l := range relocated {
			if err := ob.Put([]byte(ids[e]), encodeEnded(l.n, l.data)); err != nil {
				return err
			}
		}
		if err := applySegCounts(tx, counts); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(metaLogEnd, be64(logEnd))
	})
}
