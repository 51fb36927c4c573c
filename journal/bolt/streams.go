package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/internal/localstreams"
	"github.com/runhub/runhub/protocol"
)

// Durable streams live in the journal as runs do: each stream's meta
// (JSON) is in bbolt's streams bucket under its name, its records are in
// the event log (recStream records, streamrec.go), and bbolt's
// stream_index bucket points at each one, under name, 0, generation, 0,
// index (big-endian). A commit (the meta's compare-and-set and the records
// it appends) is a write of the committer's batch: its records and a
// recStreamMeta record with the new meta are written and fdatasynced with
// the batch's other records, and it is answered after that. When the
// batch opens a bbolt transaction anyway, the meta and the index entries
// commit in it, as a run's terminal event does (a crash between the log
// and bbolt leaves a marked batch past the log's end, which recovery
// cuts); otherwise they wait in the overlay until a checkpoint
// (streamoverlay.go), and a crash before it is repaired by replaying the
// log. Either way an acknowledged append survives a crash and a
// producer's state never disagrees with the data. Commits of other
// streams and run events that arrive meanwhile share the batch (one
// fdatasync). A drop always opens the transaction.
var (
	bucketStreams     = []byte("streams")
	bucketStreamIndex = []byte("stream_index")
	// bucketStreamRecordsV2 held the records' data in bbolt itself (layout
	// 2); Open moves them to the log (migrate_streams.go).
	bucketStreamRecordsV2 = []byte("stream_records")
)

// Streams returns the durable streams held in s.
func (s *Store) Streams(l journal.StreamLimits) journal.Streams {
	return journal.NewStreams(StreamStore{s}, l)
}

// Docs returns the documents held in s (journal.Docs).
func (s *Store) Docs() journal.Docs { return journal.NewDocs(StreamStore{s}) }

// StreamStore is the journal.StreamStore of a Store.
type StreamStore struct{ s *Store }

var _ journal.StreamStore = StreamStore{}

// streamHubs: one notification hub per Store (keyed by the Store).
func (ss StreamStore) hub() *localstreams.Hub { return &ss.s.streamHub }

func recordPrefix(name, gen string) []byte {
	k := make([]byte, 0, len(name)+len(gen)+2)
	k = append(k, name...)
	k = append(k, 0)
	k = append(k, gen...)
	return append(k, 0)
}

func recordKey(name, gen string, i uint64) []byte {
	return binary.BigEndian.AppendUint64(recordPrefix(name, gen), i)
}

func loadMeta(tx *bbolt.Tx, name string) (journal.StreamMeta, bool, error) {
	var m journal.StreamMeta
	b := tx.Bucket(bucketStreams)
	if b == nil {
		return m, false, nil
	}
	raw := b.Get([]byte(name))
	if raw == nil {
		return m, false, nil
	}
	return m, true, json.Unmarshal(raw, &m)
}

// LoadStream implements journal.StreamStore.
func (ss StreamStore) LoadStream(_ context.Context, name string) (journal.StreamMeta, error) {
	var m journal.StreamMeta
	if om, ok := ss.s.overlay.meta(name); ok {
		return m, json.Unmarshal(om.raw, &m)
	}
	err := ss.s.view(func(tx *bbolt.Tx) error {
		var ok bool
		var err error
		m, ok, err = loadMeta(tx, name)
		if err == nil && !ok {
			err = journal.ErrNotFound
		}
		return err
	})
	return m, err
}

// StreamRecords implements journal.StreamStore: the index entries from
// bbolt, the data from the log, under the log's read lock (no segment is
// dropped while the records are copied out).
func (ss StreamStore) StreamRecords(_ context.Context, name, gen string, from, to uint64) ([]journal.StreamRecord, error) {
	s := ss.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, journal.ErrClosed
	}
	s.log.mu.RLock()
	defer s.log.mu.RUnlock()
	prefix := recordPrefix(name, gen)
	// The overlay first: a checkpoint between the two reads moves its
	// entries to bbolt, never away from both (streamoverlay.go).
	newer := s.overlay.records(string(prefix), from, to)
	var out []journal.StreamRecord
	read := func(i uint64, ent streamEntry) error {
		body, _, err := s.log.body(ent.off)
		if err != nil {
			return fmt.Errorf("journal/bolt: stream %q, record %d: %w", name, i, err)
		}
		r, err := parseStreamBody(body)
		if err != nil || string(r.name) != name || string(r.gen) != gen || r.index != i {
			return fmt.Errorf("journal/bolt: stream %q: record %d at offset %d is another record", name, i, ent.off)
		}
		out = append(out, journal.StreamRecord{Index: i, End: ent.end, Count: int(ent.count),
			Data: bytes.Clone(r.data)})
		return nil
	}
	err := s.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketStreamIndex)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(recordKey(name, gen, from)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			i := binary.BigEndian.Uint64(k[len(prefix):])
			if i > to {
				break
			}
			ent, ok := decodeStreamEntry(v)
			if !ok {
				return fmt.Errorf("journal/bolt: stream %q: the index entry of record %d is cut short", name, i)
			}
			if err := read(i, ent); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, r := range newer {
		if len(out) > 0 && r.index <= out[len(out)-1].Index {
			continue // in bbolt too by now
		}
		if err := read(r.index, r.ent); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CommitStream implements journal.StreamStore.
func (ss StreamStore) CommitStream(ctx context.Context, name string, prev uint64, next journal.StreamMeta, recs []journal.StreamRecord) error {
	raw, err := json.Marshal(next)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if n := streamRecordLen(name, next.Gen, r); n > maxRecord {
			return protocol.Errorf(protocol.CodeTooLarge, "stream %s: a record of %d bytes is past the journal's bound of %d", name, n, maxRecord)
		}
	}
	return ss.submit(ctx, &request{kind: opStreamCommit,
		stream: &streamOp{name: name, version: prev, next: next, raw: raw, recs: recs}})
}

// DropStream implements journal.StreamStore.
func (ss StreamStore) DropStream(ctx context.Context, name string, version uint64) error {
	return ss.submit(ctx, &request{kind: opStreamDrop, stream: &streamOp{name: name, version: version}})
}

// submit queues a stream write and returns its answer.
func (ss StreamStore) submit(ctx context.Context, r *request) error {
	if err := ss.s.submit(ctx, r); err != nil {
		return err
	}
	return r.err
}

// ExpiringStreams implements journal.StreamStore.
func (ss StreamStore) ExpiringStreams(_ context.Context) ([]string, error) {
	newer := ss.s.overlay.names()
	var out []string
	listed := map[string]bool{}
	expiring := func(raw []byte) bool {
		var m journal.StreamMeta
		return json.Unmarshal(raw, &m) == nil && m.Expiring()
	}
	err := ss.s.view(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketStreams)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if raw, ok := newer[string(k)]; ok {
				v = raw
			}
			if expiring(v) {
				out = append(out, string(k))
				listed[string(k)] = true
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	for name, raw := range newer {
		if expiring(raw) && !listed[name] {
			out = append(out, name)
		}
	}
	return out, nil
}

// SubscribeStream implements journal.StreamStore.
func (ss StreamStore) SubscribeStream(name string, fn func()) func() {
	return ss.hub().Subscribe(name, fn)
}

// NotifyStream implements journal.StreamStore.
func (ss StreamStore) NotifyStream(_ context.Context, name string) { ss.hub().Notify(name) }
