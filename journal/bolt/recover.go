package bolt

import (
	"encoding/binary"
	"fmt"

	"go.etcd.io/bbolt"
)

// recover checks the log against bbolt and builds the index, on open:
//
//  1. every record of every segment is framed and checked (length, CRC);
//     the first one that is not whole ends the log: a torn write of the
//     newest segment, which is cut off there (an older segment was whole
//     and synced before the next one began, so a bad record there is
//     corruption, reported);
//  2. a marker at or past bbolt's log end starts a batch whose bbolt
//     transaction never committed (commit.go): none of its writers was
//     answered, and it is cut off;
//  3. every event record of a run bbolt knows, at or past the run's birth,
//     goes to the run's offsets (a later copy of the same seq, made by
//     compaction, wins); the seqs must then run 1..n without a hole. An
//     active run's idempotency keys go to its key table;
//  4. the durable-stream commits past bbolt's log end (batches that
//     committed in the log alone, streamoverlay.go) are replayed: each
//     commit's records, then its meta record, go to bbolt (records not
//     followed by their meta record are a torn commit's and are left
//     dead); then every record the stream index points at counts as live
//     in its segment;
//  5. segments without a live record are dropped.
//
// With the index of ended runs in bbolt (formatEndedIndex, endedindex.go),
// not full: steps 1 and 3 read the log only from the earliest birth of an
// active run, or bbolt's log end if that is earlier (what lies before is
// whole and synced: an acknowledged write's, or the previous opens'
// checked bytes), only the active runs are indexed, and the segments'
// records of ended runs are counted from segment_live. Full (an earlier
// layout, before persistEndedRuns): every record and every run.
func (s *Store) recover(full bool) error {
	heads := map[string]*building{}
	var logEnd uint64
	ended := segCounts{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(metaLogEnd); len(v) == 8 {
			logEnd = beU64(v)
		}
		hb := tx.Bucket(bucketHeads)
		add := func(k, v []byte) error {
			h, err := decodeHead(v)
			if err != nil {
				return fmt.Errorf("run %q: %w", k, err)
			}
			heads[string(k)] = &building{h: h}
			return nil
		}
		if full {
			return hb.ForEach(add)
		}
		if err := tx.Bucket(bucketActive).ForEach(func(k, _ []byte) error {
			v := hb.Get(k)
			if v == nil {
				return fmt.Errorf("journal/bolt: active run %q has no head", k)
			}
			return add(k, v)
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketSegLive).ForEach(func(k, v []byte) error {
			n, b := decodeSegLive(v)
			ended[beU64(k)] = [2]int64{n, b}
			return nil
		})
	})
	if err != nil {
		return err
	}
	from := uint64(0)
	if !full {
		from = logEnd
		for _, b := range heads {
			from = min(from, b.h.born)
		}
	}
	if err := s.checkFrames(logEnd, from); err != nil {
		return err
	}
	var rp streamReplay
	err = s.eachRecord(from, logEnd, func(off uint64, body []byte) error {
		s.recovered++
		if off >= logEnd && (body[0] == recStream || body[0] == recStreamMeta) {
			return rp.record(off, body)
		}
		if body[0] != recEvent && body[0] != recCopy {
			return nil
		}
		eb, err := parseEventBody(body)
		if err != nil {
			return fmt.Errorf("%w at offset %d", err, off)
		}
		row, err := parseRow(eb.row)
		if err != nil {
			return fmt.Errorf("%w at offset %d", err, off)
		}
		b := heads[string(row.run)]
		if b == nil || off < b.h.born || row.seq == 0 {
			return nil // a deleted run's, or an older run's of that id
		}
		for uint64(len(b.offs)) < row.seq {
			b.offs = append(b.offs, noOffset)
		}
		b.offs[row.seq-1] = off
		if !b.h.terminal && len(eb.key) > 0 {
			if b.keys == nil {
				b.keys = &keyTable{}
			}
			b.keys.insert(keyPrint(s.seed, string(eb.key)), row.seq)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.index = make(map[string]*runEntry, len(heads))
	for id, b := range heads {
		e := &runEntry{session: b.h.sessionID, born: b.h.born, terminal: b.h.terminal,
			terminalType: b.h.terminalType, terminalAt: b.h.terminalAt, keys: b.keys}
		if !e.terminal && e.keys == nil {
			e.keys = &keyTable{}
		}
		for i, off := range b.offs {
			if off == noOffset {
				return fmt.Errorf("journal/bolt: run %q: event %d is missing from the event log", id, i+1)
			}
			e.offs.add(off)
			seg := s.log.find(off)
			seg.live++
			if h, err := seg.bytes(off-seg.base, recHeader); err == nil {
				seg.liveBytes += recordLen(h)
			}
		}
		e.lastSeq = uint64(len(b.offs))
		s.index[id] = e
	}
	for base, c := range ended {
		if seg := s.log.find(base); seg != nil && seg.base == base {
			seg.live += int(c[0])
			seg.liveBytes += uint64(c[1])
		}
	}
	s.overlay.add(rp.metas, rp.recs, rp.prefixes)
	if err := s.checkpointStreams(); err != nil {
		return err
	}
	if err := s.db.View(s.countStreams); err != nil {
		return err
	}
	s.dropDead()
	return nil
}

// building is a run's index while recover reads the log.
type building struct {
	h    head
	offs []uint64 // by seq-1; noOffset until found
	keys *keyTable
}

const noOffset = ^uint64(0)

func beU64(b []byte) uint64 {
	var n uint64
	for _, c := range b {
		n = n<<8 | uint64(c)
	}
	return n
}

// checkFrames is steps 1 and 2 of recover, from the record at or past
// from on.
func (s *Store) checkFrames(logEnd, from uint64) error {
	doubt := noOffset
	last := len(s.log.segs) - 1
	for i, seg := range s.log.segs {
		if i != last && seg.end() <= from {
			continue
		}
		all, err := seg.bytes(0, seg.size.Load())
		if err != nil {
			return err
		}
		off := boundaryFrom(all, seg.base, from, logEnd)
		for off < seg.size.Load() {
			body, n, ok := frame(all[off:])
			if !ok {
				if i != last {
					return fmt.Errorf("journal/bolt: segment %s: %w at %d of %d bytes", segName(seg.base), errRecord, off, seg.size.Load())
				}
				if err := s.log.cut(off); err != nil {
					return err
				}
				break
			}
			if body[0] == recMarker && seg.base+off >= logEnd && doubt == noOffset {
				doubt = seg.base + off
			}
			off += uint64(n)
		}
	}
	if doubt == noOffset {
		return nil
	}
	a := s.log.active()
	if doubt < a.base {
		return fmt.Errorf("journal/bolt: segment %s: a batch that never committed is followed by another segment", segName(s.log.find(doubt).base))
	}
	return s.log.cut(doubt - a.base)
}

// eachRecord calls fn with the offset and body of every record from the
// one at or past from on, in order (logEnd: boundaryFrom's).
func (s *Store) eachRecord(from, logEnd uint64, fn func(off uint64, body []byte) error) error {
	for i, seg := range s.log.segs {
		if i != len(s.log.segs)-1 && seg.end() <= from {
			continue
		}
		all, err := seg.bytes(0, seg.size.Load())
		if err != nil {
			return err
		}
		for off := boundaryFrom(all, seg.base, from, logEnd); off < seg.size.Load(); {
			body, n, ok := frame(all[off:])
			if !ok {
				return fmt.Errorf("journal/bolt: segment %s: %w at %d", segName(seg.base), errRecord, off)
			}
			if err := fn(seg.base+off, body); err != nil {
				return err
			}
			off += uint64(n)
		}
	}
	return nil
}

// boundaryFrom returns where, in the segment whose bytes are all (from
// base on), the first record at or past the log offset from starts.
// from is bbolt's log end, which every writer of it sets at the end of
// what it wrote, or an active run's birth, which is where its batch's
// next record went: both are where a record starts (or the log ends).
// That is taken as it is for the log end, and for a birth when a whole
// record starts there; otherwise the records' lengths are walked from
// the segment's start (they were committed and synced before the last
// open's writes). A length that leads nowhere stops the walk there, for
// the check to judge.
func boundaryFrom(all []byte, base, from, logEnd uint64) uint64 {
	if from <= base {
		return 0
	}
	if rel := from - base; rel <= uint64(len(all)) {
		if from == logEnd {
			return rel
		}
		if _, _, ok := frame(all[rel:]); ok {
			return rel
		}
	}
	off := uint64(0)
	for base+off < from && off+recHeader <= uint64(len(all)) {
		l := uint64(binary.LittleEndian.Uint32(all[off:]))
		if l == 0 || l > maxRecord || off+recHeader+l > uint64(len(all)) {
			break
		}
		off += recHeader + l
	}
	return off
}
