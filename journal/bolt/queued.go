package bolt

import (
	"bytes"
	"context"
	"encoding/json"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
)

// The queued bucket lists the sessions whose queue holds a message (a key
// each, no value), written with the session's meta wherever it is
// written, so that IdleQueues reads those sessions and not every one.

// markQueued adds session id to the queued bucket b or takes it out.
func markQueued(b *bbolt.Bucket, id string, queued bool) error {
	if queued {
		return b.Put([]byte(id), nil)
	}
	return b.Delete([]byte(id))
}

// buildQueued fills the queued bucket from every session's meta, once: a
// file written before it existed (metaQueuedIndex records that it is
// done).
func (s *Store) buildQueued() error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta.Get(metaQueuedIndex) != nil {
			return nil
		}
		q := tx.Bucket(bucketQueued)
		if err := tx.Bucket(bucketSessions).ForEach(func(k, v []byte) error {
			if !bytes.Contains(v, []byte(`"queue":[{`)) {
				return nil // no queue: skip the decoding
			}
			var m journal.SessionMeta
			if json.Unmarshal(v, &m) != nil || len(m.Queue) == 0 {
				return nil // unreadable: Session reports it to whoever reads it
			}
			return q.Put(bytes.Clone(k), nil)
		}); err != nil {
			return err
		}
		return meta.Put(metaQueuedIndex, []byte{1})
	})
}

// IdleQueues lists the sessions with queued messages and no active run;
// see journal.Queues. It reads the sessions the queued bucket lists
// (recovery calls it once, at start-up).
func (s *Store) IdleQueues(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []string
	err := s.view(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketQueued).ForEach(func(k, _ []byte) error {
			m, err := loadSession(tx, string(k))
			if err != nil {
				return nil // gone or unreadable: Session reports it to whoever reads it
			}
			if m.ActiveRun == "" && len(m.Queue) > 0 {
				out = append(out, m.ID)
			}
			return nil
		})
	})
	return out, err
}
