package executor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/mem"
)

// A run left open whose driver the restarted hub no longer has is still
// ended as interrupted, and the hub says (a warning naming the run) that
// it could not stop what the run started upstream.
func TestRecoverWarnsOrphanWithoutDriver(t *testing.T) {
	store := mem.New(mem.Options{})
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
	log, logs := drivertest.Logger()
	rt := executor.New(store, executor.Options{Drivers: map[string]driver.Driver{"block": blocking{started: make(chan struct{})}},
		DefaultDriver: "block", Logger: log})
	defer rt.Close()
	if n, err := rt.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("Recover: %d, %v; want 1 run", n, err)
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "driver is not configured") || !strings.Contains(out, left.ID) {
		t.Fatalf("no warning naming run %s and its missing driver; logs:\n%s", left.ID, out)
	}
}
