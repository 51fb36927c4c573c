package bolt

import (
	"math"

	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/runhub/runhub/protocol"
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

// headV1 is a run's head in the first layout (format 1), read only to
// migrate a journal (migrate.go): the changing part of a run's meta,
// written with every batch that appended to the run.
//
//	last seq      8 bytes big-endian
//	flags         1 byte (bit 0: terminal)
//	terminal at   8 bytes (float64 bits)
//	terminal type uvarint length, bytes
//	session id    uvarint length, bytes
//	pending       the extents not yet spilled to a segment (appendExtents)
//	keys          optional (absent when there are none): uvarint count, then
//	              per key uvarint length, bytes, uvarint seq — the newest
//	              idempotency keys, not yet spilled to the run's keys bucket
type headV1 struct {
	lastSeq      uint64
	terminal     bool
	terminalAt   float64
	terminalType protocol.EventType
	sessionID    string
	pending      []extent
	keys         []headKeyV1
}

// headKeyV1 is an idempotency key kept in the head and the seq it stored.
type headKeyV1 struct {
	key string
	seq uint64
}

func (h *headV1) encode() []byte {
	b := make([]byte, 0, 17+2*binary.MaxVarintLen64+len(h.terminalType)+len(h.sessionID)+4*len(h.pending)+16)
	b = binary.BigEndian.AppendUint64(b, h.lastSeq)
	var flags byte
	if h.terminal {
		flags = 1
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(h.terminalAt))
	b = binary.AppendUvarint(b, uint64(len(h.terminalType)))
	b = append(b, h.terminalType...)
	b = binary.AppendUvarint(b, uint64(len(h.sessionID)))
	b = append(b, h.sessionID...)
	b = appendExtents(b, h.pending)
	if len(h.keys) > 0 {
		b = binary.AppendUvarint(b, uint64(len(h.keys)))
		for _, k := range h.keys {
			b = binary.AppendUvarint(b, uint64(len(k.key)))
			b = append(b, k.key...)
			b = binary.AppendUvarint(b, k.seq)
		}
	}
	return b
}

func decodeHeadV1(b []byte) (headV1, error) {
	if len(b) < 17 || b[8] > 1 {
		return headV1{}, errHead
	}
	h := headV1{
		lastSeq:    binary.BigEndian.Uint64(b),
		terminal:   b[8] == 1,
		terminalAt: math.Float64frombits(binary.BigEndian.Uint64(b[9:17])),
	}
	typ, rest, ok := lenPrefixed(b[17:])
	if !ok {
		return headV1{}, errHead
	}
	h.terminalType = eventType(typ)
	sess, rest, ok := lenPrefixed(rest)
	if !ok {
		return headV1{}, errHead
	}
	h.sessionID = string(sess)
	var err error
	if h.pending, rest, err = decodeExtents(nil, rest); err != nil {
		return headV1{}, errHead
	}
	if len(rest) == 0 {
		return h, nil // no keys (and every head written before they were kept here)
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 || n == 0 || n > uint64(len(rest)) {
		return headV1{}, errHead
	}
	rest = rest[k:]
	h.keys = make([]headKeyV1, 0, n)
	for range n {
		key, r, ok := lenPrefixed(rest)
		if !ok {
			return headV1{}, errHead
		}
		seq, k := binary.Uvarint(r)
		if k <= 0 {
			return headV1{}, errHead
		}
		h.keys = append(h.keys, headKeyV1{key: string(key), seq: seq})
		rest = r[k:]
	}
	if len(rest) != 0 {
		return headV1{}, errHead
	}
	return h, nil
}
