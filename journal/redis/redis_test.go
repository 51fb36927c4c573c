package redis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
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

// cluster is the Redis Cluster (3 masters, 3 replicas) the cluster tests
// share, started by the first of them (clusterURL).
var (
	clusterOnce sync.Once
	cluster     *redistest.Cluster
	clusterErr  error
)

// clusterURL returns the shared cluster's address, starting it first.
func clusterURL(t testing.TB) string {
	t.Helper()
	clusterOnce.Do(func() { cluster, clusterErr = redistest.NewCluster(redistest.ClusterOptions{}) })
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	return cluster.URL()
}

func TestMain(m *testing.M) {
	var err error
	srv, err = redistest.New(redistest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Close()
	if cluster != nil {
		cluster.Close()
	}
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

func backend(url func(testing.TB) string) journaltest.Backend {
	return journaltest.Backend{
		Open: func(t testing.TB) journal.Store { return openStore(t, Options{URL: url(t)}) },
		Reopen: func(t testing.TB, s journal.Store) journal.Store {
			old := s.(*Store)
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return openStore(t, Options{URL: url(t), Prefix: old.opts.Prefix})
		},
	}
}

func single(testing.TB) string { return srv.URL() }

func TestStore(t *testing.T) {
	journaltest.Run(t, backend(single))
}

// The conformance suite on a Redis Cluster of 3 masters and 3 replicas:
// every script and transaction stays in one slot (else CROSSSLOT), the
// blocking reads are issued per slot.
func TestStore_Cluster(t *testing.T) {
	journaltest.Run(t, backend(clusterURL))
}

func BenchmarkStore(b *testing.B) {
	journaltest.RunBenchmarks(b, func(tb testing.TB) journal.Store { return openStore(tb, Options{}) })
}

func TestStreams(t *testing.T) {
	journaltest.RunStreams(t, backend(single))
}

// The streams on a Cluster: each stream's keys in its name's slot.
func TestStreams_Cluster(t *testing.T) {
	journaltest.RunStreams(t, backend(clusterURL))
}
