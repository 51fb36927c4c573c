package bolt

import (
	"testing"
	"time"
)

func syncs(s *Store) int64 { return s.log.syncs.Load() }

// With SyncEvery, batches of events are acknowledged once written, before
// any fdatasync, and synced within SyncEvery; a batch that changes bbolt
// syncs what precedes it first. What was acknowledged is in the files at
// once: a copy of them taken while the store is open (a crash of the
// process) holds every acknowledged event.
func TestSyncEvery(t *testing.T) {
	path := t.TempDir() + "/journal.db"
	s := mustOpen(t, path, Options{SyncEvery: time.Hour})
	mustBegin(t, s, "s1", "r1") // changes bbolt: synced
	base := syncs(s)
	appendTokens(t, s, "s1", "r1", 1, 5)
	if n := syncs(s) - base; n != 0 {
		t.Fatalf("%d fdatasyncs for 5 appended events with SyncEvery 1h; want 0", n)
	}
	crashed := copyJournal(t, path, t.TempDir())
	mustBegin(t, s, "s2", "r2") // changes bbolt: the lazy batches are synced first
	if n := syncs(s) - base; n != 1 {
		t.Fatalf("a bbolt batch after lazy ones: %d fdatasyncs, want 1", n)
	}
	appendTokens(t, s, "s1", "r1", 6, 7)
	if err := s.Close(); err != nil { // syncs what is left
		t.Fatal(err)
	}
	s = mustOpen(t, path, Options{})
	checkRun(t, s, "r1", 7, true)
	s.Close()
	s = mustOpen(t, crashed, Options{})
	checkRun(t, s, "r1", 5, true)
	s.Close()

	// Within SyncEvery of a lazy batch, its fdatasync comes by itself.
	s = mustOpen(t, path, Options{SyncEvery: 10 * time.Millisecond})
	defer s.Close()
	base = syncs(s)
	appendTokens(t, s, "s1", "r1", 8, 8)
	deadline := time.Now().Add(5 * time.Second)
	for syncs(s) == base {
		if time.Now().After(deadline) {
			t.Fatal("a lazy batch was not synced within SyncEvery")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
