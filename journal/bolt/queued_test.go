package bolt

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
)

func queuedKeys(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	if err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketQueued).ForEach(func(k, _ []byte) error { out = append(out, string(k)); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// The queued bucket lists exactly the sessions with a queued message as
// queues fill and empty (UpdateSession, BeginRunUpdate) and sessions go;
// IdleQueues reads those alone. A file written before it existed has it
// built at its next open.
func TestQueuedIndex(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	s := mustOpen(t, path, Options{NoSync: true})
	defer func() { s.Close() }()
	enqueue := func(sid string) {
		t.Helper()
		if _, err := s.UpdateSession(ctx, sid, func(m *journal.SessionMeta) error {
			m.Queue = append(m.Queue, journal.QueuedMessage{ID: "q", Message: "next"})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		endRun(t, s, fmt.Sprint("s", i), fmt.Sprint("r", i), 1)
	}
	enqueue("s1")
	enqueue("s2")
	enqueue("s3")
	// s2's queue drains into a run (which stays active), s3's session goes.
	if _, err := s.BeginRunUpdate(ctx, journal.RunMeta{ID: "r2b", SessionID: "s2"}, func(m *journal.SessionMeta) error {
		m.Queue = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "s3"); err != nil {
		t.Fatal(err)
	}
	enqueue("s4")
	mustBegin(t, s, "s4", "r4b") // queued behind an active run: not idle
	if got := queuedKeys(t, s); !slices.Equal(got, []string{"s1", "s4"}) {
		t.Fatalf("queued bucket %v, want [s1 s4]", got)
	}
	if got, err := s.IdleQueues(ctx); err != nil || !slices.Equal(got, []string{"s1"}) {
		t.Fatalf("IdleQueues = %v, %v; want [s1]", got, err)
	}
	s.Close()

	// As an earlier runhub left it: no queued bucket content, no mark.
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(bucketQueued); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Delete(metaQueuedIndex)
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = mustOpen(t, path, Options{NoSync: true})
	if got := queuedKeys(t, s); !slices.Equal(got, []string{"s1", "s4"}) {
		t.Fatalf("queued bucket built at open %v, want [s1 s4]", got)
	}
	if got, err := s.IdleQueues(ctx); err != nil || !slices.Equal(got, []string{"s1"}) {
		t.Fatalf("IdleQueues after the open = %v, %v; want [s1]", got, err)
	}
}
