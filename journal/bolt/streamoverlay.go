package bolt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
)

// The stream overlay. A batch of the committer that changes nothing else
// in bbolt commits its durable-stream writes in the log alone: one write,
// one fdatasync, as a batch of run events. Each commit's records are
// followed by a recStreamMeta record holding the stream's new meta, so
// the log says everything the commit changed. Until bbolt holds them too,
// the metas and index entries of those commits are in the overlay, which
// readers consult before bbolt. The next batch that opens a bbolt
// transaction writes the overlay into it first (writer.needTx), and so
// does a checkpoint, which the committer runs when the overlay has grown
// (checkpointEntries), has waited long enough (checkpointEvery), before a
// compaction and on Close; either records the log's end, and the overlay
// is emptied once the transaction commits. On open, recovery replays the
// stream records past bbolt's log end into the overlay and checkpoints
// it.
type streamOverlay struct {
	mu    sync.RWMutex
	metas map[string]overlayMeta
	recs  map[string][]overlayRec // by recordPrefix(name, gen), in index order
	n     int                     // entries in recs
	since time.Time               // when the overlay stopped being empty
}

type overlayMeta struct {
	raw     []byte // journal.StreamMeta JSON
	version uint64
}

type overlayRec struct {
	index uint64
	key   []byte
	ent   streamEntry
}

// Checkpoint policy (Options.checkpoint's defaults): the overlay goes to
// bbolt once it holds this many entries, or once it is this old.
const (
	checkpointEntries = 4096
	checkpointEvery   = time.Second
)

// meta returns the overlay's meta of name.
func (o *streamOverlay) meta(name string) (overlayMeta, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	m, ok := o.metas[name]
	return m, ok
}

// names lists the streams the overlay has metas of.
func (o *streamOverlay) names() map[string][]byte {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make(map[string][]byte, len(o.metas))
	for name, m := range o.metas {
		out[name] = m.raw
	}
	return out
}

// records returns a copy of the overlay's entries of prefix with index in
// from..to.
func (o *streamOverlay) records(prefix string, from, to uint64) []overlayRec {
	o.mu.RLock()
	defer o.mu.RUnlock()
	var out []overlayRec
	for _, r := range o.recs[prefix] {
		if r.index >= from && r.index <= to {
			out = append(out, r)
		}
	}
	return out
}

func (o *streamOverlay) empty() bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return len(o.metas) == 0 && o.n == 0
}

// due reports whether the committer should checkpoint now: the overlay
// holds entries or more, or is every old.
func (o *streamOverlay) due(now time.Time, entries int, every time.Duration) bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if len(o.metas) == 0 && o.n == 0 {
		return false
	}
	return o.n >= entries || now.Sub(o.since) >= every
}

// add records a committed batch's stream metas and entries.
func (o *streamOverlay) add(metas map[string]overlayMeta, recs []overlayRec, prefixes []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.metas == nil {
		o.metas, o.recs = map[string]overlayMeta{}, map[string][]overlayRec{}
	}
	if len(o.metas) == 0 && o.n == 0 {
		o.since = time.Now()
	}
	for name, m := range metas {
		o.metas[name] = m
	}
	for i, r := range recs {
		o.recs[prefixes[i]] = append(o.recs[prefixes[i]], r)
		o.n++
	}
}

// clear empties the overlay: bbolt holds all of it.
func (o *streamOverlay) clear() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.metas)
	clear(o.recs)
	o.n = 0
}

// writeTo puts the overlay's metas and entries in tx.
func (o *streamOverlay) writeTo(tx *bbolt.Tx) error {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if len(o.metas) == 0 && o.n == 0 {
		return nil
	}
	sb, err := tx.CreateBucketIfNotExists(bucketStreams)
	if err != nil {
		return err
	}
	for name, m := range o.metas {
		if err := sb.Put([]byte(name), m.raw); err != nil {
			return err
		}
	}
	ib, err := tx.CreateBucketIfNotExists(bucketStreamIndex)
	if err != nil {
		return err
	}
	for _, rs := range o.recs {
		for _, r := range rs {
			if err := ib.Put(r.key, r.ent.encode()); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkpointStreams writes the overlay to bbolt, with the log's end, and
// empties it. The committer's (or Open's, before it starts).
func (s *Store) checkpointStreams() error {
	if s.overlay.empty() {
		return nil
	}
	if err := s.log.sync(); err != nil { // what bbolt's log end covers is durable
		s.wedged = fmt.Errorf("%w: %v", journal.ErrUnavailable, err)
		return err
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		if err := s.overlay.writeTo(tx); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(metaLogEnd, be64(s.log.end()))
	})
	if err == nil {
		s.overlay.clear()
	}
	return err
}

// streamReplay gathers, on open, the stream commits past bbolt's log end.
type streamReplay struct {
	metas    map[string]overlayMeta
	recs     []overlayRec
	prefixes []string
	pending  []overlayRec // records whose meta record has not come yet
	pendPfx  []string
}

func (rp *streamReplay) record(off uint64, body []byte) error {
	if body[0] == recStream {
		r, err := parseStreamBody(body)
		if err != nil {
			return fmt.Errorf("%w at offset %d", err, off)
		}
		key := recordKey(string(r.name), string(r.gen), r.index)
		rp.pending = append(rp.pending, overlayRec{index: r.index, key: key,
			ent: streamEntry{end: r.end, count: uint32(r.count), off: off, n: uint32(recHeader + len(body))}})
		rp.pendPfx = append(rp.pendPfx, string(key[:len(key)-8]))
		return nil
	}
	name, raw, err := parseStreamMetaBody(body)
	if err != nil {
		return fmt.Errorf("%w at offset %d", err, off)
	}
	var m journal.StreamMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("journal/bolt: stream %q: the meta record at offset %d: %w", name, off, err)
	}
	if rp.metas == nil {
		rp.metas = map[string]overlayMeta{}
	}
	rp.metas[string(name)] = overlayMeta{raw: bytes.Clone(raw), version: m.Version}
	rp.recs = append(rp.recs, rp.pending...)
	rp.prefixes = append(rp.prefixes, rp.pendPfx...)
	rp.pending, rp.pendPfx = nil, nil
	return nil
}
