package mem_test

import (
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/journaltest"
	"github.com/runhub/runhub/journal/mem"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// open opens an empty journal and closes it on cleanup.
func open(t testing.TB) journal.Store {
	s := mem.New(mem.Options{})
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, journal.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// backend is the in-memory journal for the conformance suites.
var backend = journaltest.Backend{
	Open: open,
	Reopen: func(t testing.TB, s journal.Store) journal.Store {
		if err := s.Close(); err != nil {
			t.Fatalf("Close before reopen: %v", err)
		}
		again, err := mem.Reopen(s.(*mem.Store))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { again.Close() })
		return again
	},
}

func TestStore(t *testing.T) {
	journaltest.Run(t, backend)
}

// Reopening a store still open is refused: two stores must not share
// what one holds.
func TestReopenOpen(t *testing.T) {
	s := mem.New(mem.Options{})
	defer s.Close()
	if _, err := mem.Reopen(s); err == nil {
		t.Fatal("Reopen of an open store succeeded")
	}
}

func TestStreams(t *testing.T) {
	journaltest.RunStreams(t, backend)
}
