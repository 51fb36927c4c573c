package bolt_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/journal/journaltest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// open opens a store in a fresh temporary file and closes it on cleanup.
func open(t testing.TB, opts bolt.Options) *bolt.Store {
	t.Helper()
	return openPath(t, filepath.Join(t.TempDir(), "journal.db"), opts)
}

func openPath(t testing.TB, path string, opts bolt.Options) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, journal.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func backend(opts bolt.Options) journaltest.Backend {
	return journaltest.Backend{
		Open: func(t testing.TB) journal.Store { return open(t, opts) },
		Reopen: func(t testing.TB, s journal.Store) journal.Store {
			path := s.(*bolt.Store).Path()
			if err := s.Close(); err != nil {
				t.Fatalf("Close before reopen: %v", err)
			}
			return openPath(t, path, opts)
		},
	}
}

func TestStore(t *testing.T) {
	journaltest.Run(t, backend(bolt.Options{}))
}

// A committer that waits for fuller batches keeps every guarantee.
func TestStore_BatchingWait(t *testing.T) {
	journaltest.Run(t, backend(bolt.Options{GroupCommit: bolt.GroupCommit{MaxBatch: 7, MaxWait: 200 * time.Microsecond}}))
}

// A journal that syncs its event log lazily (SyncEvery) keeps every
// guarantee of the contract.
func TestStore_SyncEvery(t *testing.T) {
	journaltest.Run(t, backend(bolt.Options{SyncEvery: 5 * time.Millisecond}))
}

func BenchmarkStore(b *testing.B) {
	journaltest.RunBenchmarks(b, func(t testing.TB) journal.Store { return open(t, bolt.Options{}) })
}

// BenchmarkStoreNoSync shows the CPU cost alone, without fsync.
func BenchmarkStoreNoSync(b *testing.B) {
	journaltest.RunBenchmarks(b, func(t testing.TB) journal.Store { return open(t, bolt.Options{NoSync: true}) })
}

func TestStreams(t *testing.T) {
	journaltest.RunStreams(t, backend(bolt.Options{}))
}
