package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
	"go.etcd.io/bbolt"
)

// UpdateSession changes a session's runtime-owned state (queue, goal,
// recent keys, title) in one transaction; see journal.SessionUpdater.
// bbolt runs one write transaction at a time, so the change is atomic with
// the committer's batches (BeginRun, terminal appends).
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(*journal.SessionMeta) error) (journal.SessionMeta, error) {
	if err := ctx.Err(); err != nil {
		return journal.SessionMeta{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return journal.SessionMeta{}, journal.ErrClosed
	}
	var out journal.SessionMeta
	err := s.db.Update(func(tx *bbolt.Tx) error {
		cur, err := loadSession(tx, id)
		if err != nil {
			return err
		}
		next := cur
		next.Queue = append([]journal.QueuedMessage(nil), cur.Queue...)
		next.RecentKeys = append([]string(nil), cur.RecentKeys...)
		if cur.Goal != nil {
			g := *cur.Goal
			next.Goal = &g
		}
		if err := fn(&next); err != nil {
			return err
		}
		journal.RedactSession(&next)
		// Only the runtime-owned fields change.
		cur.Queue, cur.Goal, cur.RecentKeys, cur.Title = next.Queue, next.Goal, next.RecentKeys, next.Title
		raw, err := json.Marshal(cur)
		if err != nil {
			return fmt.Errorf("journal/bolt: session %q meta: %w", id, err)
		}
		out = cur
		return tx.Bucket(bucketSessions).Put([]byte(id), raw)
	})
	if err == nil {
		s.bus.publish([]protocol.Envelope{journal.SessionChangedRecord(id)})
	}
	return out, err
}

// IdleQueues lists the sessions with queued messages and no active run;
// see journal.Queues. It reads every session (recovery calls it once, at
// start-up).
func (s *Store) IdleQueues(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []string
	err := s.view(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketSessions).ForEach(func(k, v []byte) error {
			if !bytes.Contains(v, []byte(`"queue":[{`)) {
				return nil // no queue: skip the decoding
			}
			var m journal.SessionMeta
			if json.Unmarshal(v, &m) != nil {
				return nil // unreadable: Session reports it to whoever reads it
			}
			if m.ActiveRun == "" && len(m.Queue) > 0 {
				out = append(out, m.ID)
			}
			return nil
		})
	})
	return out, err
}

var (
	_ journal.SessionUpdater = (*Store)(nil)
	_ journal.Queues         = (*Store)(nil)
)
