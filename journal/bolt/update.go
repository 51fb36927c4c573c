package bolt

import (
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
		if err := markQueued(tx.Bucket(bucketQueued), id, len(cur.Queue) > 0); err != nil {
			return err
		}
		return tx.Bucket(bucketSessions).Put([]byte(id), raw)
	})
	if err == nil {
		s.bus.Publish([]protocol.Envelope{journal.SessionChangedRecord(id)})
	}
	return out, err
}

var (
	_ journal.SessionUpdater = (*Store)(nil)
	_ journal.Queues         = (*Store)(nil)
)
