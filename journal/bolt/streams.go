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
// it appends) is a write of the committer's batch, as a run's terminal
// event is: the records are written and fdatasynced with the batch's other
// records, then the meta and the index entries commit in the batch's bbolt
// transaction, which records the log's new end; the commit is answered
// after both. A crash between the two leaves a marked batch past the log's
// end, which recovery cuts: an acknowledged append survives a crash, and a
// producer's state never disagrees with the data. Commits of other streams
// and run events that arrive meanwhile share the batch (one fdatasync).
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
	var out []journal.StreamRecord
	err := s.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketStreamIndex)
		if b == nil {
			return nil
		}
		prefix := recordPrefix(name, gen)
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
		}
		return nil
	})
	return out, err
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
	var out []string
	err := ss.s.view(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketStreams)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var m journal.StreamMeta
			if json.Unmarshal(v, &m) == nil && m.Expiring() {
				out = append(out, string(k))
			}
			return nil
		})
	})
	return out, err
}

// SubscribeStream implements journal.StreamStore.
func (ss StreamStore) SubscribeStream(name string, fn func()) func() {
	return ss.hub().Subscribe(name, fn)
}

// NotifyStream implements journal.StreamStore.
func (ss StreamStore) NotifyStream(_ context.Context, name string) { ss.hub().Notify(name) }
