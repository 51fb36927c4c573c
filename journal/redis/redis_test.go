package redis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/journaltest"
)

// srv is the redis-server every test of the package shares; each store gets
// its own key prefix, so stores never see each other's data.
var srv *redistest.Server

func TestMain(m *testing.M) {
	var err error
	srv, err = redistest.New(redistest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left after the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var prefixes atomic.Int64

// openStore opens a Store on the shared server under a fresh prefix (unless
// opts names one) and closes it when the test ends.
func openStore(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.URL == "" && opts.Client == nil {
		opts.URL = srv.URL()
	}
	if opts.Prefix == "" {
		opts.Prefix = fmt.Sprintf("t%d:", prefixes.Add(1))
	}
	s, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, journal.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func backend() journaltest.Backend {
	return journaltest.Backend{
		Open: func(t testing.TB) journal.Store { return openStore(t, Options{}) },
		Reopen: func(t testing.TB, s journal.Store) journal.Store {
			old := s.(*Store)
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return openStore(t, Options{Prefix: old.opts.Prefix})
		},
	}
}

func TestStore(t *testing.T) {
	journaltest.Run(t, backend())
}

func BenchmarkStore(b *testing.B) {
	journaltest.RunBenchmarks(b, func(tb testing.TB) journal.Store { return openStore(tb, Options{}) })
}
