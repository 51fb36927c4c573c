package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
)

// blocking runs until its context ends.
type blocking struct{ started chan struct{} }

func (b blocking) Execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	close(b.started)
	<-ctx.Done()
	return nil, ctx.Err()
}

// The messages of the interrupted runs the executor writes — stopped while
// the run was going, and ended by Recover after a restart — are the ones
// docs/protocol.md quotes.
func TestInterruptedMessagesAsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "journal.db")
	store, err := bolt.Open(path, bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	d := blocking{started: make(chan struct{})}
	rt := executor.New(store, executor.Options{Drivers: map[string]driver.Driver{"block": d}, DefaultDriver: "block"})
	stopped, err := rt.StartRun(ctx, "local", protocol.StartRunRequest{Message: "go"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the driver did not start")
	}
	rt.Close() // the executor stops with the run going

	// A run left open, as by a killed process, ended by the next one.
	left := journal.RunMeta{ID: adapter.NewID("r_"), SessionID: stopped.SessionID, Owner: "local", CreatedAt: 1, Request: []byte(`{"message":"go"}`)}
	if err := store.BeginRun(ctx, left); err != nil {
		t.Fatal(err)
	}
	rt2 := executor.New(store, executor.Options{Drivers: map[string]driver.Driver{"block": d}, DefaultDriver: "block"})
	defer rt2.Close()
	if n, err := rt2.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("Recover: %d, %v", n, err)
	}

	for _, id := range []string{stopped.RunID, left.ID} {
		var last protocol.Envelope
		if err := journal.ReadAll(ctx, store, id, 0, func(e protocol.Envelope) error { last = e; return nil }); err != nil {
			t.Fatal(err)
		}
		p, err := protocol.DecodePayload[protocol.ErrorPayload](&last)
		if err != nil || last.Type != protocol.EventError || p.Code != protocol.ErrorInterrupted {
			t.Fatalf("run %s ends with %s %s", id, last.Type, last.Payload)
		}
		if !strings.Contains(string(doc), strconv.Quote(p.Message)) {
			t.Errorf("docs/protocol.md does not quote the message %q", p.Message)
		}
	}
}
