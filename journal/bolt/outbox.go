package bolt

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// bucketOutbox holds the outbox (Options.Outbox): be64(n) → the entry as
// JSON (journal.OutboxEntry), n from the bucket's sequence. It is written
// by the committer in the transaction that appends the notable event, and
// changed by the sender (OutboxSave, OutboxDelete) in transactions of
// their own.
var bucketOutbox = []byte("outbox")

// recordOutbox records e in the outbox when the outbox is on and e is
// notable (journal.Notable), in the batch's transaction: committed with
// the event or not at all.
func (w *writer) recordOutbox(e *protocol.Envelope) error {
	if !w.outbox || !journal.Notable(e) {
		return nil
	}
	b, err := w.tx.CreateBucketIfNotExists(bucketOutbox)
	if err != nil {
		return err
	}
	n, err := b.NextSequence()
	if err != nil {
		return err
	}
	v, err := json.Marshal(journal.OutboxEntry{SessionID: e.SessionID, RunID: e.RunID, Seq: e.Seq, Type: e.Type})
	if err != nil {
		return err
	}
	return b.Put(be64(n), v)
}

// OutboxList returns up to limit entries of the outbox, oldest first
// (webhook.Outbox). The outbox is empty unless Options.Outbox is on.
func (s *Store) OutboxList(ctx context.Context, limit int) ([]journal.OutboxEntry, error) {
	var out []journal.OutboxEntry
	err := s.view(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketOutbox)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			var en journal.OutboxEntry
			if err := json.Unmarshal(v, &en); err != nil {
				return fmt.Errorf("journal/bolt: outbox entry %x: %w", k, err)
			}
			en.ID = hex.EncodeToString(k)
			out = append(out, en)
		}
		return ctx.Err()
	})
	return out, err
}

// OutboxSave stores the sender's state of the entry id; an entry deleted
// meanwhile stays deleted.
func (s *Store) OutboxSave(ctx context.Context, id string, state []byte) error {
	return s.outboxUpdate(ctx, id, func(b *bbolt.Bucket, k, v []byte) error {
		var en journal.OutboxEntry
		if err := json.Unmarshal(v, &en); err != nil {
			return err
		}
		en.State = state
		nv, err := json.Marshal(en)
		if err != nil {
			return err
		}
		return b.Put(k, nv)
	})
}

// OutboxDelete removes the entry id (done with, by every endpoint).
func (s *Store) OutboxDelete(ctx context.Context, id string) error {
	return s.outboxUpdate(ctx, id, func(b *bbolt.Bucket, k, _ []byte) error { return b.Delete(k) })
}

func (s *Store) outboxUpdate(ctx context.Context, id string, fn func(b *bbolt.Bucket, k, v []byte) error) error {
	k, err := hex.DecodeString(id)
	if err != nil || len(k) != 8 {
		return fmt.Errorf("journal/bolt: outbox id %q: %w", id, journal.ErrNotFound)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return journal.ErrClosed
	}
	err = s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketOutbox)
		if b == nil {
			return nil
		}
		v := b.Get(k)
		if v == nil {
			return nil
		}
		return fn(b, k, v)
	})
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return journal.ErrClosed
	}
	if err != nil {
		return fmt.Errorf("journal/bolt: outbox %s: %w", id, err)
	}
	return nil
}
