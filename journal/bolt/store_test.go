package bolt_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
)

func token(t testing.TB, sid, rid, text string) protocol.Envelope {
	e, err := protocol.NewEvent(rid, sid, protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m", Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func begin(t testing.TB, s journal.Store, sid, rid string) {
	t.Helper()
	ctx := context.Background()
	if err := s.CreateSession(ctx, journal.SessionMeta{ID: sid, Owner: "o"}); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginRun(ctx, journal.RunMeta{ID: rid, SessionID: sid}); err != nil {
		t.Fatal(err)
	}
}

// An event must name its run's session.
func TestStore_AppendWrongSession(t *testing.T) {
	s := open(t, bolt.Options{NoSync: true})
	begin(t, s, "s1", "r1")
	begin(t, s, "s2", "r2")
	_, err := s.Append(context.Background(), token(t, "s2", "r1", "x"), "")
	if protocol.CodeOf(err) != protocol.CodeBadRequest {
		t.Fatalf("append naming another session: %v, want bad_request", err)
	}
	if m, _ := s.Run(context.Background(), "r1"); m.LastSeq != 0 {
		t.Fatalf("last_seq = %d after a refused append", m.LastSeq)
	}
}

func TestStore_BoundedInputs(t *testing.T) {
	s := open(t, bolt.Options{NoSync: true})
	begin(t, s, "s1", "r1")
	ctx := context.Background()
	_, err := s.Append(ctx, token(t, "s1", "r1", "x"), strings.Repeat("k", bolt.MaxKeyLen+1))
	if protocol.CodeOf(err) != protocol.CodeTooLarge {
		t.Fatalf("oversized key: %v, want too_large", err)
	}
	err = s.CreateSession(ctx, journal.SessionMeta{ID: "s2", Owner: strings.Repeat("o", bolt.MaxOwnerLen+1)})
	if protocol.CodeOf(err) != protocol.CodeTooLarge {
		t.Fatalf("oversized owner: %v, want too_large", err)
	}
	err = s.BeginRun(ctx, journal.RunMeta{ID: "r9", SessionID: "s1", Request: []byte(`{"a":`)})
	if protocol.CodeOf(err) != protocol.CodeBadRequest {
		t.Fatalf("invalid request JSON: %v, want bad_request", err)
	}
}

// A context that ends first returns its error.
func TestStore_ContextDone(t *testing.T) {
	s := open(t, bolt.Options{NoSync: true})
	begin(t, s, "s1", "r1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Append(ctx, token(t, "s1", "r1", "x"), ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with a cancelled context: %v", err)
	}
	if _, err := s.Read(ctx, "r1", 0, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read with a cancelled context: %v", err)
	}
}

// Close while writers append: each append either succeeds, and is in the
// file afterwards, or fails with ErrClosed.
func TestStore_CloseWhileAppending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	s := openPath(t, path, bolt.Options{})
	begin(t, s, "s1", "r1")
	var mu sync.Mutex
	acked := map[uint64]bool{}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for {
				e, err := s.Append(context.Background(), token(t, "s1", "r1", "x"), "")
				if errors.Is(err, journal.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				mu.Lock()
				acked[e.Seq] = true
				mu.Unlock()
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s = openPath(t, path, bolt.Options{})
	m, err := s.Run(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	for seq := range acked {
		if seq > m.LastSeq {
			t.Fatalf("acknowledged seq %d is not in the file (last_seq %d)", seq, m.LastSeq)
		}
	}
	if len(acked) == 0 {
		t.Fatal("no append succeeded before Close")
	}
}

// A second store cannot open a file that one holds.
func TestOpen_Locked(t *testing.T) {
	s := open(t, bolt.Options{NoSync: true})
	if _, err := bolt.Open(s.Path(), bolt.Options{LockTimeout: 50 * time.Millisecond}); err == nil {
		t.Fatal("a second Open of a held file succeeded")
	}
}

// A run registered without an event yet reads as empty, as in the other
// journals: a tab catching up on a session that just began a run must not
// see "not found" (and retry) for it. A run never registered is not found.
func TestStore_ReadRegisteredRunWithoutEvents(t *testing.T) {
	s := open(t, bolt.Options{NoSync: true})
	begin(t, s, "s1", "r1")
	evs, err := s.Read(context.Background(), "r1", 0, 100)
	if err != nil || len(evs) != 0 {
		t.Fatalf("read of a registered run without events: %d events, %v; want none, no error", len(evs), err)
	}
	if _, err := s.Read(context.Background(), "nope", 0, 100); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("read of an unknown run: %v, want not found", err)
	}
}
