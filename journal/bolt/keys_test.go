package bolt_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/runhub/runhub/journal/bolt"
)

// Idempotency keys hold across the head's spill to the keys bucket and
// across a reopen: every key, old or new, returns the event it stored,
// and no retry adds a row. Keys are per run.
func TestStore_KeysAcrossSpillAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	s, err := bolt.Open(path, bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	begin(t, s, "s1", "r1")
	begin(t, s, "s2", "r2")
	const n = 40 // more than two spills
	for i := range n {
		for _, rid := range []string{"r1", "r2"} {
			sid := "s" + rid[1:]
			e, err := s.Append(ctx, token(t, sid, rid, "w"+strconv.Itoa(i)), "k"+strconv.Itoa(i))
			if err != nil || e.Seq != uint64(i+1) {
				t.Fatalf("%s append %d: seq %d, %v", rid, i, e.Seq, err)
			}
		}
	}
	check := func(when string) {
		t.Helper()
		for i := range n {
			e, err := s.Append(ctx, token(t, "s1", "r1", "retry"), "k"+strconv.Itoa(i))
			if err != nil || e.Seq != uint64(i+1) || string(e.Payload) != `{"message_id":"m","text":"w`+strconv.Itoa(i)+`"}` {
				t.Fatalf("%s: retry of k%d: seq %d payload %s, %v; want seq %d, the first event", when, i, e.Seq, e.Payload, err, i+1)
			}
		}
		m, err := s.Run(ctx, "r1")
		if err != nil || m.LastSeq != n {
			t.Fatalf("%s: run r1 last seq %d, %v; want %d (no row added by a retry)", when, m.LastSeq, err, n)
		}
	}
	check("open")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = bolt.Open(path, bolt.Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check("reopened")
	e, err := s.Append(ctx, token(t, "s1", "r1", "new"), "k-new")
	if err != nil || e.Seq != n+1 {
		t.Fatalf("a new key after the reopen: seq %d, %v; want %d", e.Seq, err, n+1)
	}
}
