package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// testdata/v1.journal.db is a journal of the first layout (events in
// bbolt), written by the store as it was before the segmented log: sessions
// s1 and s2 of alice; r1 (s1) with 40 keyed tokens appended alternately
// with r2's, so that its extents and keys spilled, then done (key r1/done);
// r2 (s2) with 5 keyed tokens and an approval request (key r2/6), active;
// the outbox on (r1's end, r2's approval).
//
// Open migrates it: every event, key, run state, session and outbox entry
// is there, the old buckets are gone, and the journal goes on.
func TestMigrate_FirstLayout(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	copyFile(t, filepath.Join("testdata", "v1.journal.db"), path)
	// Leftovers of a migration that crashed are cleared first.
	if err := os.MkdirAll(EventsDir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(EventsDir(path), segName(0)), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store, what string) {
		t.Helper()
		m1, err := s.Run(ctx, "r1")
		if err != nil || m1.LastSeq != 41 || !m1.Terminal || m1.TerminalType != protocol.EventDone || m1.SessionID != "s1" || string(m1.Request) != `{"message":"hi"}` {
			t.Fatalf("%s: r1 %+v, %v", what, m1, err)
		}
		m2, err := s.Run(ctx, "r2")
		if err != nil || m2.LastSeq < 6 || m2.Terminal {
			t.Fatalf("%s: r2 %+v, %v", what, m2, err)
		}
		for rid, n := range map[string]int{"r1": 40, "r2": 5} {
			got, err := s.Read(ctx, rid, 0, 100)
			if err != nil || len(got) < n {
				t.Fatalf("%s: read %s: %d events, %v", what, rid, len(got), err)
			}
			for i := range n {
				if want := fmt.Sprintf(`{"message_id":"m","text":"t%d"}`, i+1); string(got[i].Payload) != want || got[i].Seq != uint64(i+1) {
					t.Fatalf("%s: %s event %d: %d %s, want %s", what, rid, i+1, got[i].Seq, got[i].Payload, want)
				}
			}
		}
		// Every key, spilled or in the head, returns what it stored.
		for i := 1; i <= 40; i++ {
			e, err := s.Append(ctx, tokenEvent(t, "s1", "r1", "retry"), "r1/"+strconv.Itoa(i))
			if err != nil || e.Seq != uint64(i) {
				t.Fatalf("%s: retry of r1/%d: seq %d, %v", what, i, e.Seq, err)
			}
		}
		if e, err := s.Append(ctx, tokenEvent(t, "s1", "r1", "late"), ""); !errors.Is(err, journal.ErrTerminal) || e.Seq != 41 {
			t.Fatalf("%s: append to the ended r1: seq %d, %v; want ErrTerminal with its end", what, e.Seq, err)
		}
		if e, err := s.Append(ctx, tokenEvent(t, "s2", "r2", "retry"), "r2/6"); err != nil || e.Seq != 6 || e.Type != protocol.EventApprovalReq {
			t.Fatalf("%s: retry of r2/6: %+v, %v", what, e, err)
		}
		active, err := s.ActiveRuns(ctx)
		if err != nil || len(active) != 1 || active[0].ID != "r2" {
			t.Fatalf("%s: active runs %+v, %v", what, active, err)
		}
		list, err := s.Sessions(ctx, "alice")
		if err != nil || len(list) != 2 || list[0].ID != "s1" || list[1].ActiveRun != "r2" || list[0].Title != "t s1" {
			t.Fatalf("%s: sessions %+v, %v", what, list, err)
		}
		en, err := s.OutboxList(ctx, 10)
		if err != nil || len(en) < 2 || en[0].RunID != "r1" || en[0].Seq != 41 || en[1].RunID != "r2" || en[1].Seq != 6 {
			t.Fatalf("%s: outbox %+v, %v", what, en, err)
		}
	}
	s := mustOpen(t, path, Options{Outbox: true})
	check(s, "migrated")
	err := s.db.View(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketLogV1, bucketIndexV1, bucketKeysV1} {
			if tx.Bucket(b) != nil {
				t.Errorf("bucket %s is still there", b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	appendTokens(t, s, "s2", "r2", 7, 9) // seqs 7..9 (keys r2/7.. are new)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, path, Options{Outbox: true})
	defer s.Close()
	check(s, "reopened")
	if m, _ := s.Run(ctx, "r2"); m.LastSeq != 9 {
		t.Fatalf("r2 after reopen: last seq %d, want 9", m.LastSeq)
	}
	done, _ := protocol.NewEvent("r2", "s2", protocol.EventDone, protocol.DonePayload{Status: "completed"})
	if e, err := s.Append(ctx, done, ""); err != nil || e.Seq != 10 {
		t.Fatalf("r2's end: %+v, %v", e, err)
	}
	if m, err := s.Session(ctx, "s2"); err != nil || m.ActiveRun != "" {
		t.Fatalf("s2 after r2's end: %+v, %v", m, err)
	}
}
