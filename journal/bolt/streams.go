package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/internal/localstreams"
)

// Durable streams live in two buckets of the journal's bbolt file: each
// stream's meta (JSON) under its name, and its records under name, 0,
// generation, 0, index (big-endian), each the record's end (8 bytes), its
// JSON message count (4 bytes) and its data. A commit is one bbolt
// transaction (fsynced, as every journal commit; concurrent commits of
// several streams share one): the meta's compare-and-set and the records
// it appends are one step, so an
// acknowledged append survives a crash and a producer's state never
// disagrees with the data.
var (
	bucketStreams       = []byte("streams")
	bucketStreamRecords = []byte("stream_records")
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

// update runs fn in a write transaction, grouped with the commits of
// other streams that arrive meanwhile (streamcommit.go).
func (ss StreamStore) update(fn func(tx *bbolt.Tx) error) error {
	s := ss.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return journal.ErrClosed
	}
	return s.streamCommits.do(s.db, fn)
}

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

// StreamRecords implements journal.StreamStore.
func (ss StreamStore) StreamRecords(_ context.Context, name, gen string, from, to uint64) ([]journal.StreamRecord, error) {
	var out []journal.StreamRecord
	err := ss.s.view(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketStreamRecords)
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
			if len(v) < 12 {
				return errors.New("journal/bolt: a stream record is cut short")
			}
			out = append(out, journal.StreamRecord{Index: i, End: binary.BigEndian.Uint64(v),
				Count: int(binary.BigEndian.Uint32(v[8:])), Data: append([]byte(nil), v[12:]...)})
		}
		return nil
	})
	return out, err
}

// CommitStream implements journal.StreamStore.
func (ss StreamStore) CommitStream(_ context.Context, name string, prev uint64, next journal.StreamMeta, recs []journal.StreamRecord) error {
	raw, err := json.Marshal(next)
	if err != nil {
		return err
	}
	return ss.update(func(tx *bbolt.Tx) error {
		m, ok, err := loadMeta(tx, name)
		if err != nil {
			return err
		}
		var cur uint64
		if ok {
			cur = m.Version
		}
		if cur != prev {
			return journal.ErrConflict
		}
		b, err := tx.CreateBucketIfNotExists(bucketStreams)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(name), raw); err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		rb, err := tx.CreateBucketIfNotExists(bucketStreamRecords)
		if err != nil {
			return err
		}
		for _, r := range recs {
			v := make([]byte, 12, 12+len(r.Data))
			binary.BigEndian.PutUint64(v, r.End)
			binary.BigEndian.PutUint32(v[8:], uint32(r.Count))
			if err := rb.Put(recordKey(name, next.Gen, r.Index), append(v, r.Data...)); err != nil {
				return err
			}
		}
		return nil
	})
}

// DropStream implements journal.StreamStore.
func (ss StreamStore) DropStream(_ context.Context, name string, version uint64) error {
	return ss.update(func(tx *bbolt.Tx) error {
		m, ok, err := loadMeta(tx, name)
		if err != nil {
			return err
		}
		if !ok {
			return journal.ErrNotFound
		}
		if m.Version != version {
			return journal.ErrConflict
		}
		if err := tx.Bucket(bucketStreams).Delete([]byte(name)); err != nil {
			return err
		}
		rb := tx.Bucket(bucketStreamRecords)
		if rb == nil {
			return nil
		}
		prefix := recordPrefix(name, m.Gen)
		c := rb.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
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
