package bolt

import (
	"encoding/binary"
	"hash/maphash"
	"math"

	"github.com/runhub/runhub/protocol"
)

// runEntry is what the store keeps in memory of a run: its changing state
// and where its events are in the log. The committer changes entries (under
// Store.idxMu, exclusive); readers read them under it, shared.
type runEntry struct {
	session      string
	born         uint64 // log offset before which no record is this run's
	lastSeq      uint64
	terminal     bool
	terminalType protocol.EventType
	terminalAt   float64
	offs         offList
	keys         *keyTable // the idempotency keys of an active run; nil once it ended
}

// offList holds the log offsets of a run's events, seq 1..n, compactly:
// zigzag-varint deltas from the previous offset (a few bytes an event:
// events of runs appending at once are close in the log), with the absolute
// offset of every markEvery-th event to start decoding from.
type offList struct {
	n     uint64
	last  uint64
	data  []byte
	marks []offMark
}

type offMark struct {
	at  uint32 // index in data of the delta of event mark*markEvery+1
	off uint64 // that event's offset
}

const markEvery = 32

func zigzag(d int64) uint64 { return uint64(d<<1) ^ uint64(d>>63) }

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// add appends the offset of event n+1.
func (l *offList) add(off uint64) {
	if l.n%markEvery == 0 {
		l.marks = append(l.marks, offMark{at: uint32(len(l.data)), off: off})
	}
	l.data = binary.AppendUvarint(l.data, zigzag(int64(off-l.last)))
	l.last = off
	l.n++
}

// each calls fn with the offsets of seqs from..n, in order, until fn
// returns false.
func (l *offList) each(from uint64, fn func(seq, off uint64) bool) {
	if from < 1 {
		from = 1
	}
	if from > l.n {
		return
	}
	m := l.marks[(from-1)/markEvery]
	seq := (from-1)/markEvery*markEvery + 1
	i := int(m.at)
	var off uint64
	for ; seq <= l.n; seq++ {
		u, k := binary.Uvarint(l.data[i:])
		i += k
		if (seq-1)%markEvery == 0 {
			off = l.marks[(seq-1)/markEvery].off
		} else {
			off += uint64(unzigzag(u))
		}
		if seq >= from && !fn(seq, off) {
			return
		}
	}
}

// at returns the offset of seq (1 ≤ seq ≤ n).
func (l *offList) at(seq uint64) uint64 {
	var out uint64
	l.each(seq, func(_, off uint64) bool { out = off; return false })
	return out
}

// size is the memory the list holds, in bytes.
func (l *offList) size() int { return cap(l.data) + 16*cap(l.marks) }

// keyTable finds the seq an idempotency key was stored at: an open-addressing
// table of 32-bit fingerprints and seqs (8 bytes a slot, at most 3/4 full).
// A fingerprint match is a candidate the caller confirms against the key
// stored in the event's record. A run with seqs past 2^32-1 stops indexing
// (overflow) and its keys are found by reading its records.
type keyTable struct {
	slots    []uint64 // fingerprint<<32 | seq; 0 is empty
	used     int
	overflow bool
}

func keyPrint(seed maphash.Seed, key string) uint32 {
	return uint32(maphash.String(seed, key))
}

func slotOf(fp uint32, mask int) int { return int((uint64(fp)*0x9E3779B97F4A7C15)>>32) & mask }

// insert records that the key with fingerprint fp is at seq.
func (t *keyTable) insert(fp uint32, seq uint64) {
	if seq > math.MaxUint32 {
		t.overflow = true
		return
	}
	if (t.used+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	t.put(uint64(fp)<<32 | seq)
	t.used++
}

func (t *keyTable) put(v uint64) {
	mask := len(t.slots) - 1
	for i := slotOf(uint32(v>>32), mask); ; i = (i + 1) & mask {
		if t.slots[i] == 0 {
			t.slots[i] = v
			return
		}
	}
}

func (t *keyTable) grow() {
	old := t.slots
	t.slots = make([]uint64, max(8, 2*len(old)))
	for _, v := range old {
		if v != 0 {
			t.put(v)
		}
	}
}

// candidates calls fn with each seq whose key has fingerprint fp until fn
// returns false.
func (t *keyTable) candidates(fp uint32, fn func(seq uint64) bool) {
	if len(t.slots) == 0 {
		return
	}
	mask := len(t.slots) - 1
	for i := slotOf(fp, mask); t.slots[i] != 0; i = (i + 1) & mask {
		if uint32(t.slots[i]>>32) == fp && !fn(t.slots[i]&math.MaxUint32) {
			return
		}
	}
}
