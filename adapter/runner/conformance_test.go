package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/adaptertest"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/adapter/runner"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/redis"
)

// srv is the redis-server the package's tests share; each test gets its
// own key prefix.
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

// process is one process's view of the shared Redis: its client, its
// journal store and the runner package's config, as cmd/hub builds them.
type process struct {
	rdb   goredis.UniversalClient
	store *redis.Store
	cfg   runner.Config
}

func openProcess(t *testing.T, prefix string) process {
	t.Helper()
	rdb, err := redis.NewClient(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	store, err := redis.Open(context.Background(), redis.Options{Client: rdb, Prefix: prefix})
	if err != nil {
		rdb.Close()
		t.Fatal(err)
	}
	return process{rdb: rdb, store: store, cfg: runner.Config{Client: rdb, Prefix: prefix}}
}

func (p process) close(t *testing.T) {
	if err := p.store.Close(); err != nil && !errors.Is(err, journal.ErrClosed) {
		t.Errorf("close store: %v", err)
	}
	p.rdb.Close()
}

// TestConformance runs the RuntimeAdapter conformance suite in runners
// mode: the adapter under test is a hub's executor that dispatches every
// run to the run queue and routes controls through runner.Controls; a
// runner (an executor with a consuming Node) takes the runs and answers
// the controls. Each is a process of its own as far as Redis goes (its
// own client and journal store); both journals count the metas read.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, func(t *testing.T, s adaptertest.Setup) adaptertest.Harness {
		prefix := fmt.Sprintf("conf%d:", prefixes.Add(1))
		log, _ := drivertest.Logger()

		hub := openProcess(t, prefix)
		metas := &adaptertest.MetaCounter{}
		hubStore := metas.Wrap(hub.store)
		hubNode := runner.NewNode(hubStore, runner.NodeOptions{Config: hub.cfg, Logger: log})
		hubExec := executor.New(hubStore, executor.Options{Drivers: s.Drivers, DefaultDriver: s.DefaultDriver, Capabilities: s.Capabilities,
			Dispatch: runner.NewQueue(hub.cfg).Dispatch, Logger: log})
		hubNode.Start(hubExec)

		run := openProcess(t, prefix)
		runStore := metas.Wrap(run.store)
		runNode := runner.NewNode(runStore, runner.NodeOptions{Config: run.cfg, Consume: true, Logger: log})
		runExec := executor.New(runStore, executor.Options{Drivers: s.Drivers, DefaultDriver: s.DefaultDriver, Capabilities: s.Capabilities,
			Claim: runNode.Claim, Release: runNode.Release, Logger: log})
		runNode.Start(runExec)

		t.Cleanup(func() {
			runExec.Close()
			runNode.Stop()
			hubExec.Close()
			hubNode.Stop()
			run.close(t)
			hub.close(t)
		})
		return adaptertest.Harness{Adapter: adapter.NewRouter(hubStore, hubExec, runner.NewControls(hub.cfg)), Dispatched: true,
			Metas: metas}
	})
}
