// Package drivertest runs drivers for tests the way the hub does: a real
// InProcess executor over a real bolt journal, runs selected by profile,
// logs captured so a test can search them.
package drivertest

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
)

// Harness is an executor with a journal and captured logs.
type Harness struct {
	t     testing.TB
	Store *bolt.Store
	RT    *adapter.InProcess
	Path  string // the journal file
	Logs  *Buffer
	Log   *slog.Logger
}

// Buffer is a goroutine-safe bytes.Buffer.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Logger returns a debug-level logger writing to a new Buffer.
func Logger() (*slog.Logger, *Buffer) {
	b := &Buffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// Config configures a Harness.
type Config struct {
	Profiles       map[string]adapter.ProfileDriver
	ClarifyTimeout time.Duration // default 5s
	Log            *slog.Logger  // with Logs; default: Logger()
	Logs           *Buffer
}

// New starts an executor whose profiles are the given drivers (plus the
// simulator as provider "sim").
func New(t testing.TB, cfg Config) *Harness {
	t.Helper()
	if cfg.ClarifyTimeout == 0 {
		cfg.ClarifyTimeout = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log, cfg.Logs = Logger()
	}
	path := filepath.Join(t.TempDir(), "journal.db")
	store, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt := adapter.NewInProcess(store, adapter.Options{
		Drivers:        map[string]adapter.Driver{"sim": &sim.Driver{}},
		Profiles:       cfg.Profiles,
		ClarifyTimeout: cfg.ClarifyTimeout,
		Logger:         cfg.Log,
	})
	h := &Harness{t: t, Store: store, RT: rt, Path: path, Logs: cfg.Logs, Log: cfg.Log}
	t.Cleanup(func() {
		rt.Close()
		store.Close()
	})
	return h
}

// Start starts a run and fails the test if the start is refused.
func (h *Harness) Start(req protocol.StartRunRequest) protocol.RunStartResult {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := h.RT.StartRun(ctx, "local", req)
	if err != nil {
		h.t.Fatalf("start: %v", err)
	}
	return r
}

// Events waits (at most within) for the run's terminal event and returns
// every event of the run.
func (h *Harness) Events(runID string, within time.Duration) []protocol.Envelope {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var out []protocol.Envelope
	for e, err := range h.RT.ObserveRun(ctx, runID, 0) {
		if err != nil {
			h.t.Fatalf("observe %s: %v (events so far: %s)", runID, err, Types(out))
		}
		out = append(out, e)
	}
	if len(out) == 0 || !out[len(out)-1].Terminal {
		h.t.Fatalf("run %s did not end within %s; events: %s", runID, within, Types(out))
	}
	return out
}

// WaitFor waits until the run has an event for which match is true and
// returns it.
func (h *Harness) WaitFor(runID string, within time.Duration, match func(protocol.Envelope) bool) protocol.Envelope {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var seen []protocol.Envelope
	for e, err := range h.RT.ObserveRun(ctx, runID, 0) {
		if err != nil {
			break
		}
		seen = append(seen, e)
		if match(e) {
			return e
		}
	}
	h.t.Fatalf("run %s: no matching event within %s; events: %s", runID, within, Types(seen))
	return protocol.Envelope{}
}

// Cancel cancels a run and fails the test unless the cancel is accepted.
func (h *Harness) Cancel(runID string) {
	h.t.Helper()
	res, err := h.RT.CancelRun(context.Background(), runID)
	if err != nil || !res.Accepted {
		h.t.Fatalf("cancel: %+v, %v", res, err)
	}
}

// JournalBytes returns the journal file's bytes.
func (h *Harness) JournalBytes() []byte {
	h.t.Helper()
	b, err := os.ReadFile(h.Path)
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// Types lists event types, for messages.
func Types(events []protocol.Envelope) string {
	s := make([]string, len(events))
	for i, e := range events {
		s[i] = string(e.Type)
	}
	return strings.Join(s, " ")
}

// Terminal checks the run ended with exactly one terminal event, the last,
// of type typ, and returns it.
func Terminal(t testing.TB, events []protocol.Envelope, typ protocol.EventType) protocol.Envelope {
	t.Helper()
	n := 0
	for _, e := range events {
		if e.Terminal {
			n++
		}
	}
	last := events[len(events)-1]
	if n != 1 || !last.Terminal || last.Type != typ {
		t.Fatalf("want exactly one terminal event, %s, last; got %d terminal, events: %s", typ, n, Types(events))
	}
	for i, e := range events {
		if e.Seq != uint64(i+1) {
			t.Fatalf("seq %d at %d: not contiguous", e.Seq, i)
		}
	}
	return last
}

// ErrorOf decodes a terminal error event's payload.
func ErrorOf(t testing.TB, e protocol.Envelope) protocol.ErrorPayload {
	t.Helper()
	p, err := protocol.DecodePayload[protocol.ErrorPayload](&e)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
