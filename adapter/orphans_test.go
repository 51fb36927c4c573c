package adapter_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/bolt"
)

// syncBuffer is a bytes.Buffer safe for a logger and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A run left open whose driver the restarted hub no longer has is still
// ended as interrupted, and the hub says (a warning naming the run) that
// it could not stop what the run started upstream.
func TestRecoverWarnsOrphanWithoutDriver(t *testing.T) {
	store, err := bolt.Open(filepath.Join(t.TempDir(), "journal.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	sid := adapter.NewID("s_")
	if err := store.CreateSession(ctx, journal.SessionMeta{ID: sid, Owner: "local", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	left := journal.RunMeta{ID: adapter.NewID("r_"), SessionID: sid, Owner: "local", CreatedAt: 1,
		Request: []byte(`{"message":"go","provider":"removed"}`)}
	if err := store.BeginRun(ctx, left); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	rt := adapter.NewInProcess(store, adapter.Options{Drivers: map[string]adapter.Driver{"block": blocking{started: make(chan struct{})}},
		DefaultDriver: "block", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer rt.Close()
	if n, err := rt.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("Recover: %d, %v; want 1 run", n, err)
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "driver is not configured") || !strings.Contains(out, left.ID) {
		t.Fatalf("no warning naming run %s and its missing driver; logs:\n%s", left.ID, out)
	}
}
