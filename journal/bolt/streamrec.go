package bolt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"

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
	return append(appendStreamHead(dst, name, gen, r), r.Data...)
}

// appendStreamHead appends the record of r but its data, which is to
// follow it in the log: the committer writes the data from where it is
// (writer.extData), not copied into its buffer.
func appendStreamHead(dst []byte, name, gen string, r journal.StreamRecord) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, recStream)
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	dst = append(dst, name...)
	dst = binary.AppendUvarint(dst, uint64(len(gen)))
	dst = append(dst, gen...)
	dst = binary.AppendUvarint(dst, r.Index)
	dst = binary.AppendUvarint(dst, r.End)
	dst = binary.AppendUvarint(dst, uint64(r.Count))
	return sealRecordWith(dst, start, r.Data)
}

// streamRecordLen bounds the body length of r's record (as maxRecord
// bounds it).
func streamRecordLen(name, gen string, r journal.StreamRecord) int {
	return 1 + 5*binary.MaxVarintLen64 + len(name) + len(gen) + len(r.Data)
}

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

// appendStreamMetaRecord appends the recStreamMeta record of the stream
// name's meta raw (JSON) to dst.
func appendStreamMetaRecord(dst []byte, name string, raw []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, recStreamMeta)
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	dst = append(dst, name...)
	dst = append(dst, raw...)
	return sealRecord(dst, start)
}

// parseStreamMetaBody decodes the body of a recStreamMeta record.
func parseStreamMetaBody(body []byte) (name, raw []byte, err error) {
	if len(body) < 1 || body[0] != recStreamMeta {
		return nil, nil, errRecord
	}
	name, raw, ok := lenPrefixed(body[1:])
	if !ok {
		return nil, nil, errRecord
	}
	return name, raw, nil
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
	prefix  int // of key: recordPrefix(name, gen)
	index   uint64
	end     uint64
	count   uint32
	rel     uint64 // in the writer's buffer
	n       uint64 // the record's whole length
	dropped bool   // its stream was dropped later in the batch
}

// batchMeta is a stream's meta as the batch leaves it.
type batchMeta struct {
	overlayMeta
	gone bool // dropped by the batch
}

// streamVersion is the stored version of name as the batch sees it (0:
// none), and its meta when it has one: the batch's own writes, then the
// overlay, then bbolt.
func (w *writer) streamVersion(name string) (journal.StreamMeta, uint64, error) {
	var m journal.StreamMeta
	if bm, ok := w.streamMetas[name]; ok {
		if bm.gone {
			return m, 0, nil
		}
		return m, bm.version, json.Unmarshal(bm.raw, &m)
	}
	if om, ok := w.s.overlay.meta(name); ok {
		return m, om.version, json.Unmarshal(om.raw, &m)
	}
	var ok bool
	var err error
	if w.tx != nil {
		m, ok, err = loadMeta(w.tx, name)
	} else {
		err = w.s.db.View(func(tx *bbolt.Tx) error {
			m, ok, err = loadMeta(tx, name)
			return err
		})
	}
	if err != nil || !ok {
		return m, 0, err
	}
	return m, m.Version, nil
}

// streamCommit applies an opStreamCommit: the compare-and-set, then the
// records and the meta record into the batch's buffer; the meta into the
// batch's transaction when it has one (else the overlay takes it once the
// batch is durable, merge). A lost compare-and-set is the request's answer
// and writes nothing.
func (w *writer) streamCommit(r *request) error {
	op := r.stream
	_, cur, err := w.streamVersion(op.name)
	if err != nil {
		return err
	}
	if cur != op.version {
		r.err = journal.ErrConflict
		return nil
	}
	if w.streamMetas == nil {
		w.streamMetas = map[string]*batchMeta{}
	}
	w.streamMetas[op.name] = &batchMeta{overlayMeta: overlayMeta{raw: op.raw, version: op.next.Version}}
	if w.tx != nil {
		if err := putStreamMeta(w.tx, op.name, op.raw); err != nil {
			return err
		}
	}
	for _, rec := range op.recs {
		rel := uint64(len(w.buf))
		w.buf = appendStreamHead(w.buf, op.name, op.next.Gen, rec)
		n := uint64(len(w.buf)) - rel + uint64(len(rec.Data))
		w.addExt(rec.Data)
		w.streams = append(w.streams, pendingStream{key: recordKey(op.name, op.next.Gen, rec.Index),
			prefix: len(op.name) + len(op.next.Gen) + 2, index: rec.Index,
			end: rec.End, count: uint32(rec.Count), rel: rel, n: n})
	}
	w.buf = appendStreamMetaRecord(w.buf, op.name, op.raw)
	return nil
}

func putStreamMeta(tx *bbolt.Tx, name string, raw []byte) error {
	b, err := tx.CreateBucketIfNotExists(bucketStreams)
	if err != nil {
		return err
	}
	return b.Put([]byte(name), raw)
}

// writeBatchMetas puts the metas the batch wrote before it opened its
// transaction (writer.needTx, after the overlay).
func (w *writer) writeBatchMetas() error {
	for name, bm := range w.streamMetas {
		if bm.gone {
			continue
		}
		if err := putStreamMeta(w.tx, name, bm.raw); err != nil {
			return err
		}
	}
	return nil
}

// streamDrop applies an opStreamDrop, in the batch's transaction (which
// holds the overlay and the batch's earlier metas by then): the meta and
// every index entry of the stream's generation go (its records are dead in
// the log, counted out of their segments by merge).
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
	if w.streamMetas == nil {
		w.streamMetas = map[string]*batchMeta{}
	}
	w.streamMetas[op.name] = &batchMeta{gone: true}
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
		if err := ib.Put(p.key, w.entry(p).encode()); err != nil {
			return err
		}
	}
	return nil
}

// entry is p's index entry, once the batch's place in the log is known.
func (w *writer) entry(p pendingStream) streamEntry {
	return streamEntry{end: p.end, count: p.count, off: w.global(p.rel), n: uint32(p.n)}
}

// mergeStreams counts the batch's stream records into the active segment
// (a batch is written to one segment) and its dropped ones out of theirs,
// and hands the batch's stream writes to the overlay — or, when the batch
// had a transaction, which wrote the overlay too, empties it. It reports
// whether a segment may have lost its last live record.
func (s *Store) mergeStreams(w *writer) (dropped bool) {
	if w.tx != nil {
		s.overlay.clear()
	} else if len(w.streamMetas) > 0 {
		metas := make(map[string]overlayMeta, len(w.streamMetas))
		for name, bm := range w.streamMetas {
			metas[name] = bm.overlayMeta // a batch without a transaction drops nothing
		}
		recs := make([]overlayRec, 0, len(w.streams))
		prefixes := make([]string, 0, len(w.streams))
		for _, p := range w.streams {
			recs = append(recs, overlayRec{index: p.index, key: p.key, ent: w.entry(p)})
			prefixes = append(prefixes, string(p.key[:p.prefix]))
		}
		s.overlay.add(metas, recs, prefixes)
	}
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

// extData is stream data the batch writes after the buffer's first at
// bytes (and before the rest), from where the write carried it; cum is
// the data's length up to and with this piece.
type extData struct {
	at   int
	data []byte
	cum  uint64
}

// addExt puts data in the log after the buffer as it is now.
func (w *writer) addExt(data []byte) {
	if len(data) == 0 {
		return
	}
	var cum uint64
	if n := len(w.ext); n > 0 {
		cum = w.ext[n-1].cum
	}
	w.ext = append(w.ext, extData{at: len(w.buf), data: data, cum: cum + uint64(len(data))})
}

// extBefore is the length of the data placed before buffer index rel.
func (w *writer) extBefore(rel uint64) uint64 {
	i := sort.Search(len(w.ext), func(i int) bool { return uint64(w.ext[i].at) > rel })
	if i == 0 {
		return 0
	}
	return w.ext[i-1].cum
}

// extBytes is the length of all the batch's placed data.
func (w *writer) extBytes() uint64 { return w.extBefore(uint64(len(w.buf))) }

// parts is the batch's output from buffer index from: the buffer's pieces
// with the placed data between them.
func (w *writer) parts(from int) [][]byte {
	out := make([][]byte, 0, 2*len(w.ext)+1)
	for _, x := range w.ext {
		out = append(out, w.buf[from:x.at], x.data)
		from = x.at
	}
	return append(out, w.buf[from:])
}
