package executor_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
)

// streaming emits an event every few milliseconds until an emit fails.
type streaming struct{ started chan struct{} }

func (s streaming) Execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	close(s.started)
	for i := 0; ; i++ {
		p := protocol.ToolStartedPayload{ToolCallID: "t" + strconv.Itoa(i), Name: "noop", Args: []byte("{}")}
		if _, err := x.Emit(ctx, protocol.EventToolStarted, p); err != nil {
			return nil, err
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// refusals counts the appends the journal refused as ErrTerminal.
type refusals struct {
	journal.Store
	n atomic.Int64
}

func (r *refusals) Append(ctx context.Context, e protocol.Envelope, key string) (protocol.Envelope, error) {
	out, err := r.Store.Append(ctx, e, key)
	if errors.Is(err, journal.ErrTerminal) {
		r.n.Add(1)
	}
	return out, err
}

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *syncLog) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// A run another process ended while it executed here (its lease lapsed
// during a partition and a reaper journaled interrupted): the driver's
// next event is refused, and the executor stops the run without trying a
// terminal event of its own (it would be refused too) and without calling
// it a failure. One refused append in all: the fenced write.
func TestExecute_RunEndedElsewhereStops(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "journal.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := &refusals{Store: db}
	var logs syncLog
	d := streaming{started: make(chan struct{})}
	rt := executor.New(store, executor.Options{Drivers: map[string]driver.Driver{"s": d}, DefaultDriver: "s",
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer rt.Close()
	ctx := context.Background()
	res, err := rt.StartRun(ctx, "local", protocol.StartRunRequest{Message: "go"})
	if err != nil {
		t.Fatal(err)
	}
	<-d.started
	// The reaper of another process ends the run.
	meta, err := db.Run(ctx, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := protocol.NewEvent(res.RunID, res.SessionID, protocol.EventError, protocol.ErrorPayload{Code: protocol.ErrorInterrupted,
		Message: "the run's executor stopped renewing its lease", Terminal: true, LastSeq: meta.LastSeq})
	if _, err := db.Append(ctx, e, res.RunID+"/interrupted"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for rt.Live() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the run still executes here")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // nothing more is tried
	if n := store.n.Load(); n != 1 {
		t.Fatalf("%d appends refused, want 1 (the driver's next event; no terminal event tried)", n)
	}
	if out := logs.String(); strings.Contains(out, "run failed") || !strings.Contains(out, "run ended elsewhere") {
		t.Fatalf("the executor's log:\n%s", out)
	}
}
