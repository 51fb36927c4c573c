package bolt

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
)

// A page after a session and a deletion each find the session's place in
// its owner's list through owner_keys; a file written before owner_keys
// existed has it built at its next open, and both work the same there.
func TestOwnerKeys(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	s := mustOpen(t, path, Options{NoSync: true})
	defer func() { s.Close() }()
	for i := range 10 {
		if err := s.CreateSession(ctx, journal.SessionMeta{ID: fmt.Sprint("s", i), Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateSession(ctx, journal.SessionMeta{ID: fmt.Sprint("b", i), Owner: "bob"}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(b []byte) int {
		n := 0
		s.db.View(func(tx *bbolt.Tx) error { n = tx.Bucket(b).Stats().KeyN; return nil })
		return n
	}
	check := func(when string, deleted string, left int) {
		t.Helper()
		if err := s.DeleteSession(ctx, deleted); err != nil {
			t.Fatal(err)
		}
		if n, k := count(bucketOwners), count(bucketOwnerKeys); n != left || k != left {
			t.Fatalf("%s: %d owner entries and %d owner keys after deleting %s, want %d", when, n, k, deleted, left)
		}
		page, more, err := s.SessionsPage(ctx, "alice", "s6", 2)
		if err != nil || len(page) != 2 || page[0].ID != "s7" || page[1].ID != "s8" || !more {
			t.Fatalf("%s: the page after s6: %v, more %v, %v", when, page, more, err)
		}
		if _, _, err := s.SessionsPage(ctx, "alice", "b1", 2); err == nil {
			t.Fatalf("%s: a page after bob's session in alice's list answered", when)
		}
	}
	check("written", "s3", 19)
	s.Close()

	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(bucketOwnerKeys); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Delete(metaOwnerKeysIndex)
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = mustOpen(t, path, Options{NoSync: true})
	check("built at the open", "s5", 18)
}
