package bolt

import (
	"encoding/binary"
	"slices"
)

// merge folds a committed batch into the index, under idxMu: the batch's
// events become readable, its new runs appear and its deleted ones go. It
// counts the live records of each segment and drops the segments left
// with none.
func (s *Store) merge(w *writer) {
	a := s.log.active()
	dropped := false
	s.idxMu.Lock()
	for _, rs := range w.touched {
		id := rs.id
		if rs.dropOld && rs.old != nil {
			s.forget(rs.old)
			delete(s.index, id)
			s.ended.remove(id)
			s.ended.gen++ // a copy read from bbolt before the deletion is stale
			dropped = true
		}
		if !rs.exists || (!rs.created && rs.old.terminal) {
			continue // an ended run: nothing of it changes
		}
		e := rs.old
		if rs.created {
			e = &runEntry{session: rs.session, born: w.global(rs.bornRel), keys: &keyTable{}}
			s.index[id] = e
		}
		for _, rel := range rs.rel {
			e.offs.add(w.global(rel))
			a.live++
			a.liveBytes += recordLen(w.buf[rel:])
		}
		if e.keys != nil {
			for _, k := range rs.keys {
				e.keys.insert(k.fp, k.seq)
			}
		}
		e.lastSeq = rs.lastSeq
		e.terminal, e.terminalType, e.terminalAt = rs.terminal, rs.terminalType, rs.terminalAt
		if e.terminal {
			// Its index is in bbolt now (flushEnded): it leaves the
			// active runs for the cache of ended ones.
			e.keys = nil // an ended run's keys are found in its records
			e.offs.data = slices.Clip(append([]byte(nil), e.offs.data...))
			e.offs.marks = slices.Clip(append([]offMark(nil), e.offs.marks...))
			delete(s.index, id)
			s.ended.put(id, e)
		}
	}
	s.idxMu.Unlock()
	if s.mergeStreams(w) {
		dropped = true
	}
	if dropped {
		s.dropDead()
		s.compactDue = true
	}
}

// recordLen is the whole length of the record at the start of b.
func recordLen(b []byte) uint64 {
	return recHeader + uint64(binary.LittleEndian.Uint32(b))
}

// forget takes a deleted run's records out of their segments' live counts.
func (s *Store) forget(e *runEntry) {
	e.offs.each(1, func(_, off uint64) bool {
		if seg := s.log.find(off); seg != nil {
			seg.live--
			if h, err := seg.bytes(off-seg.base, recHeader); err == nil {
				seg.liveBytes -= recordLen(h)
			}
		}
		return true
	})
}

// dropDead removes the segments, but the one written, that hold no live
// record. A failure leaves the file for the next open to drop.
func (s *Store) dropDead() {
	for _, seg := range slices.Clone(s.log.segs[:len(s.log.segs)-1]) {
		if seg.live <= 0 {
			s.log.drop(seg)
		}
	}
}
