package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/bbolt"
)

// Events live in one global log (position → row) so that a batch appending
// to many runs writes a few adjacent pages instead of one page per run. A
// run finds its events through its index: a list of extents, each mapping
// count consecutive seqs to count consecutive log positions. The newest
// extents sit in the run's head (rewritten with every batch anyway); every
// spillExtents of them move to a segment in the index bucket, keyed by the
// run and the segment's first seq.

// extent maps seqs seq..seq+count-1 of a run to log positions
// pos..pos+count-1.
type extent struct {
	seq, pos, count uint64
}

func (e extent) end() uint64 { return e.seq + e.count } // first seq after e

// spillExtents is how many extents a head holds before they move to a
// segment. More means fewer index pages written per batch, and bigger
// heads.
const spillExtents = 32

var errIndex = errors.New("journal/bolt: malformed run index")

// appendExtents encodes extents whose seqs are contiguous:
// uvarint(count of extents), uvarint(first seq), then per extent
// uvarint(pos - end of previous extent's positions), uvarint(count).
func appendExtents(dst []byte, exts []extent) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(exts)))
	if len(exts) == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, exts[0].seq)
	var prevEnd uint64
	for _, e := range exts {
		dst = binary.AppendUvarint(dst, e.pos-prevEnd)
		dst = binary.AppendUvarint(dst, e.count)
		prevEnd = e.pos + e.count
	}
	return dst
}

// decodeExtents decodes what appendExtents wrote, appending to exts, and
// returns the rest of b.
func decodeExtents(exts []extent, b []byte) ([]extent, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return exts, nil, errIndex
	}
	b = b[k:]
	if n == 0 {
		return exts, b, nil
	}
	exts = slices.Grow(exts, int(n)+1) // +1: room for the head's next extent
	seq, k := binary.Uvarint(b)
	if k <= 0 {
		return exts, nil, errIndex
	}
	b = b[k:]
	var prevEnd uint64
	for range n {
		d, k1 := binary.Uvarint(b)
		if k1 <= 0 {
			return exts, nil, errIndex
		}
		c, k2 := binary.Uvarint(b[k1:])
		if k2 <= 0 || c == 0 {
			return exts, nil, errIndex
		}
		b = b[k1+k2:]
		e := extent{seq: seq, pos: prevEnd + d, count: c}
		exts = append(exts, e)
		seq, prevEnd = e.end(), e.pos+e.count
	}
	return exts, b, nil
}

// addExtent records that seq is at pos, growing the last extent when both
// continue it.
func addExtent(exts []extent, seq, pos uint64) []extent {
	if n := len(exts); n > 0 && exts[n-1].end() == seq && exts[n-1].pos+exts[n-1].count == pos {
		exts[n-1].count++
		return exts
	}
	return append(exts, extent{seq: seq, pos: pos, count: 1})
}

// segmentPrefix is the common prefix of a run's index segments. Run ids
// never hold a zero byte, so one run's prefix is never another's.
func segmentPrefix(runID string) []byte {
	k := make([]byte, 0, len(runID)+9)
	k = append(k, runID...)
	return append(k, 0)
}

// segmentKey is the key of the run's segment starting at seq.
func segmentKey(runID string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(segmentPrefix(runID), seq)
}

// extentsAfter returns the run's extents that hold seqs after after, in
// seq order, enough to cover at least want events when there are that
// many. index is the index bucket, pending the extents of the head.
func extentsAfter(index *bbolt.Bucket, runID string, pending []extent, after uint64, want int) ([]extent, error) {
	var out []extent
	covered := 0
	take := func(exts []extent) {
		for _, e := range exts {
			if e.end() > after+1 {
				out = append(out, e)
				covered += int(e.end() - max(e.seq, after+1))
			}
		}
	}
	if len(pending) == 0 || pending[0].seq > after+1 {
		prefix := segmentPrefix(runID)
		target := segmentKey(runID, after+1)
		c := index.Cursor()
		k, v := c.Seek(target)
		if k == nil {
			k, v = c.Last()
		} else if !bytes.Equal(k, target) {
			k, v = c.Prev()
		}
		if k == nil || !bytes.HasPrefix(k, prefix) {
			k, v = c.Seek(target)
		}
		var buf []extent
		for ; k != nil && bytes.HasPrefix(k, prefix) && covered < want; k, v = c.Next() {
			var err error
			buf, _, err = decodeExtents(buf[:0], v)
			if err != nil {
				return nil, fmt.Errorf("run %q segment: %w", runID, err)
			}
			take(buf)
		}
	}
	take(pending)
	return out, nil
}

// logCursor reads rows of the log by position.
type logCursor struct {
	c   *bbolt.Cursor
	key [8]byte
}

func newLogCursor(log *bbolt.Bucket) *logCursor { return &logCursor{c: log.Cursor()} }

// scan calls fn with the rows of positions pos..pos+count-1, in order,
// until fn returns false.
func (lc *logCursor) scan(pos, count uint64, fn func(pos uint64, row []byte) bool) error {
	binary.BigEndian.PutUint64(lc.key[:], pos)
	k, v := lc.c.Seek(lc.key[:])
	for i := range count {
		if k == nil || binary.BigEndian.Uint64(k) != pos+i {
			return fmt.Errorf("journal/bolt: log position %d is missing", pos+i)
		}
		if !fn(pos+i, v) {
			return nil
		}
		if i+1 < count {
			k, v = lc.c.Next()
		}
	}
	return nil
}
