package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
)

// A durable stream's records in the event log, and the committer's side
// of a stream's commit and drop (streams.go says where things are).

// streamOp is a stream write waiting for the committer: a commit
// (opStreamCommit: the meta's compare-and-set from version to next, and
// recs appended) or a drop (opStreamDrop, when the stored version is
// version).
type streamOp struct {
	name    string
	version uint64
	next    journal.StreamMeta
	raw     []byte // next as JSON
	recs    []journal.StreamRecord
}

// size is the data the op writes to the log.
func (op *streamOp) size() int {
	n := 0
	for _, r := range op.recs {
		n += len(r.Data)
	}
	return n
}

// streamBody is a decoded recStream record, its slices aliasing it.
type streamBody struct {
	name, gen         []byte
	index, end, count uint64
	data              []byte
}

// appendStreamRecord appends the record of r, of the stream name's
// generation gen, to dst.
func appendStreamRecord(dst []byte, name, gen string, r journal.StreamRecord) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, recStream)
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	dst = append(dst, name...)
	dst = binary.AppendUvarint(dst, uint64(len(gen)))
	dst = append(dst, gen...)
	dst = binary.AppendUvarint(dst, r.Index)
	dst = binary.AppendUvarint(dst, r.End)
	dst = binary.AppendUvarint(dst, uint64(r.Count))
	dst = append(dst, r.Data...)
	return sealRecord(dst, start)
}

// streamRecordLen bounds the body length of r's record (as maxRecord
// bounds it).
func streamRecordLen(name, gen string, r journal.StreamRecord) int {
	return 1 + 5*binary.MaxVarintLen64 + len(name) + len(gen) + len(r.Data)
}

// streamRecordOverhead is about what a stream record adds to its data
// (its header and fields, a name of ~64 bytes): a batch's buffer is grown
// by it per write.
const streamRecordOverhead = recHeader + 1 + 5*binary.MaxVarintLen64 + 64 + 16

// parseStreamBody decodes the body of a recStream record.
func parseStreamBody(body []byte) (streamBody, error) {
	var r streamBody
	if len(body) < 1 || body[0] != recStream {
		return r, errRecord
	}
	var rest []byte
	var ok bool
	if r.name, rest, ok = lenPrefixed(body[1:]); !ok {
		return r, errRecord
	}
	if r.gen, rest, ok = lenPrefixed(rest); !ok {
		return r, errRecord
	}
	for _, p := range []*uint64{&r.index, &r.end, &r.count} {
		v, k := binary.Uvarint(rest)
		if k <= 0 {
			return r, errRecord
		}
		*p, rest = v, rest[k:]
	}
	r.data = rest
	return r, nil
}

// streamEntry is a stream_index value: the record's end offset in the
// stream and its JSON message count (what a read answers without the
// data), and where its record is in the log.
type streamEntry struct {
	end   uint64
	count uint32
	off   uint64 // the record's global offset
	n     uint32 // the record's whole length
}

const streamEntryLen = 8 + 4 + 8 + 4

func (e streamEntry) encode() []byte {
	b := make([]byte, 0, streamEntryLen)
	b = binary.BigEndian.AppendUint64(b, e.end)
	b = binary.BigEndian.AppendUint32(b, e.count)
	b = binary.BigEndian.AppendUint64(b, e.off)
	return binary.BigEndian.AppendUint32(b, e.n)
}

func decodeStreamEntry(v []byte) (streamEntry, bool) {
	if len(v) != streamEntryLen {
		return streamEntry{}, false
	}
	return streamEntry{end: binary.BigEndian.Uint64(v), count: binary.BigEndian.Uint32(v[8:]),
		off: binary.BigEndian.Uint64(v[12:]), n: binary.BigEndian.Uint32(v[20:])}, true
}

// pendingStream is a stream record of the batch: its index entry is put
// once the batch's place in the log is known (flush).
type pendingStream struct {
	key     []byte
	end     uint64
	count   uint32
	rel     uint64 // in the writer's buffer
	n       uint64 // the record's whole length
	dropped bool   // its stream was dropped later in the batch
}

// streamCommit applies an opStreamCommit: the compare-and-set, the meta,
// the records into the batch's buffer. A lost compare-and-set is the
// request's answer and writes nothing.
func (w *writer) streamCommit(r *request) error {
	op := r.stream
	if err := w.needTx(); err != nil {
		return err
	}
	m, ok, err := loadMeta(w.tx, op.name)
	if err != nil {
		return err
	}
	var cur uint64
	if ok {
		cur = m.Version
	}
	if cur != op.version {
		r.err = journal.ErrConflict
		return nil
	}
	b, err := w.tx.CreateBucketIfNotExists(bucketStreams)
	if err != nil {
		return err
	}
	if err := b.Put([]byte(op.name), op.raw); err != nil {
		return err
	}
	for _, rec := range op.recs {
		rel := uint64(len(w.buf))
		w.buf = appendStreamRecord(w.buf, op.name, op.next.Gen, rec)
		w.streams = append(w.streams, pendingStream{key: recordKey(op.name, op.next.Gen, rec.Index),
			end: rec.End, count: uint32(rec.Count), rel: rel, n: uint64(len(w.buf)) - rel})
	}
	return nil
}

// streamDrop applies an opStreamDrop: the meta and every index entry of
// the stream's generation go (its records are dead in the log, counted
// out of their segments by merge).
func (w *writer) streamDrop(r *request) error {
	op := r.stream
	if err := w.needTx(); err != nil {
		return err
	}
	m, ok, err := loadMeta(w.tx, op.name)
	if err != nil {
		return err
	}
	if !ok {
		r.err = journal.ErrNotFound
		return nil
	}
	if m.Version != op.version {
		r.err = journal.ErrConflict
		return nil
	}
	if err := w.tx.Bucket(bucketStreams).Delete([]byte(op.name)); err != nil {
		return err
	}
	prefix := recordPrefix(op.name, m.Gen)
	for i := range w.streams {
		if bytes.HasPrefix(w.streams[i].key, prefix) {
			w.streams[i].dropped = true
		}
	}
	ib := w.tx.Bucket(bucketStreamIndex)
	if ib == nil {
		return nil
	}
	c := ib.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Seek(prefix) {
		ent, ok := decodeStreamEntry(v)
		if !ok {
			return fmt.Errorf("journal/bolt: stream %q: an index entry is cut short", op.name)
		}
		w.deadStreams = append(w.deadStreams, ent)
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// flushStreams puts the index entries of the batch's stream records.
func (w *writer) flushStreams() error {
	if len(w.streams) == 0 {
		return nil
	}
	ib, err := w.tx.CreateBucketIfNotExists(bucketStreamIndex)
	if err != nil {
		return err
	}
	for _, p := range w.streams {
		if p.dropped {
			continue
		}
		ent := streamEntry{end: p.end, count: p.count, off: w.global(p.rel), n: uint32(p.n)}
		if err := ib.Put(p.key, ent.encode()); err != nil {
			return err
		}
	}
	return nil
}

// mergeStreams counts the batch's stream records into the active segment
// (a batch is written to one segment) and its dropped ones out of theirs.
// It reports whether a segment may have lost its last live record.
func (s *Store) mergeStreams(w *writer) (dropped bool) {
	a := s.log.active()
	for _, p := range w.streams {
		if !p.dropped {
			a.live++
			a.liveBytes += p.n
		}
	}
	for _, ent := range w.deadStreams {
		if seg := s.log.find(ent.off); seg != nil {
			seg.live--
			seg.liveBytes -= uint64(ent.n)
		}
	}
	return len(w.deadStreams) > 0
}

// countStreams counts the records the stream index points at into their
// segments' live counts, on open (recover.go).
func (s *Store) countStreams(tx *bbolt.Tx) error {
	ib := tx.Bucket(bucketStreamIndex)
	if ib == nil {
		return nil
	}
	return ib.ForEach(func(k, v []byte) error {
		ent, ok := decodeStreamEntry(v)
		if !ok {
			return fmt.Errorf("journal/bolt: stream index entry %q is cut short", k)
		}
		seg := s.log.find(ent.off)
		if seg == nil || ent.off+uint64(ent.n) > seg.end() {
			return fmt.Errorf("journal/bolt: stream index entry %q: its record (offset %d) is missing from the event log", k, ent.off)
		}
		seg.live++
		seg.liveBytes += uint64(ent.n)
		return nil
	})
}
