package bolt

import (
	"fmt"

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
// stream's in bbolt, in one transaction after the copies are durable) and
// drops the segment. A crash after the copies are durable and before
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
			} else if e, seq := s.liveAt(seg.base+off, body); e != nil {
				moves = append(moves, moved{e: e, seq: seq, rel: uint64(len(buf))})
				buf = append(buf, rec...)
			}
			off += uint64(n)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	skip := uint64(0) // of buf's start: the marker, when no stream record moves
	if len(smoves) == 0 {
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
		if len(smoves) > 0 {
			if err := s.relocateStreams(smoves, at, start+uint64(len(out))); err != nil {
				if cerr := s.log.cut(from); cerr != nil {
					s.wedged = fmt.Errorf("%w: the event log cannot be repaired until reopened: %v", journal.ErrUnavailable, cerr)
				}
				return false, err
			}
		}
		a := s.log.active()
		byRun := map[*runEntry]map[uint64]uint64{}
		for _, m := range moves {
			if byRun[m.e] == nil {
				byRun[m.e] = map[uint64]uint64{}
			}
			byRun[m.e][m.seq] = at(m.rel)
			a.live++
			a.liveBytes += recordLen(buf[m.rel:])
		}
		for _, m := range smoves {
			a.live++
			a.liveBytes += uint64(m.ent.n)
		}
		s.idxMu.Lock()
		for e, to := range byRun {
			e.offs.relocate(to)
		}
		s.idxMu.Unlock()
	}
	seg.live, seg.liveBytes = 0, 0
	if err := s.log.drop(seg); err != nil {
		return false, err
	}
	return s.victim() != nil, nil
}

// liveAt returns the run entry and seq of the event record at off when it
// is the one the index points at, nil otherwise.
func (s *Store) liveAt(off uint64, body []byte) (*runEntry, uint64) {
	eb, err := parseEventBody(body)
	if err != nil {
		return nil, 0 // a marker
	}
	row, err := parseRow(eb.row)
	if err != nil {
		return nil, 0
	}
	e := s.index[string(row.run)]
	if e == nil || off < e.born || row.seq == 0 || row.seq > e.lastSeq || e.offs.at(row.seq) != off {
		return nil, 0
	}
	return e, row.seq
}

// relocate points the seqs of to at their new offsets.
func (l *offList) relocate(to map[uint64]uint64) {
	offs := make([]uint64, 0, l.n)
	l.each(1, func(seq, off uint64) bool {
		if n, ok := to[seq]; ok {
			off = n
		}
		offs = append(offs, off)
		return true
	})
	*l = offList{}
	for _, off := range offs {
		l.add(off)
	}
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

// relocateStreams points the stream index at the copies (at gives a
// copy's offset) and records the log's new end, in one transaction.
func (s *Store) relocateStreams(moves []streamMove, at func(rel uint64) uint64, logEnd uint64) error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		ib := tx.Bucket(bucketStreamIndex)
		for _, m := range moves {
			ent := m.ent
			ent.off = at(m.rel)
			if err := ib.Put(m.key, ent.encode()); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaLogEnd, be64(logEnd))
	})
}
