package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/adapter/runner"
	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/journal/redis"
	"github.com/runhub/runhub/webhook"
)

// Runtime modes: where runs execute.
const (
	RuntimeInProcess = "inprocess"
	RuntimeRunners   = "runners"
)

// procRuntime is a process's journal and executor, wired for its mode.
type procRuntime struct {
	mode  string
	store journal.Store
	exec  *executor.InProcess
	// router is the RuntimeAdapter the hub serves: controls go to exec,
	// or, in Redis mode, to the node that executes the run.
	router *adapter.Router
	node   *runner.Node            // Redis mode: leases, controls, reaper (and the queue in a runner)
	rdb    goredis.UniversalClient // Redis mode: one server or a Cluster
	// writes watches the journal's writes for /readyz.
	writes *writeHealth
	// stopping: a graceful stop has begun (drainRuns); /readyz says draining.
	stopping atomic.Bool
	log      *slog.Logger

	profiles *profile.Config // the runtime profiles (RUNHUB_PROFILES)
	outbox   webhook.Outbox  // the journal's outbox (the backend itself, not its decorators)
	leaseTTL time.Duration   // Redis mode: the runners' lease TTL, their heartbeats' window
}

// openRuntime opens the journal and builds the executor:
//
//   - embedded journal: runs execute here; runs a previous process left
//     unfinished are ended as interrupted at start-up, but for those whose
//     work goes on upstream (Hermes), which are left going on shutdown and
//     re-attached at start-up;
//   - Redis, inprocess: runs execute here under leases, so other replicas
//     route controls to them and reap them if this process dies;
//   - Redis, runners: starts are dispatched to the run queue; a runner
//     process executes them (consume=true builds that runner).
//
// m (nil: none) measures the journal, Redis and the executor.
func openRuntime(ctx context.Context, cfg RuntimeConfig, log *slog.Logger, mode string, consume bool, m *metrics.Metrics) (*procRuntime, error) {
	loaded, err := loadProfiles(cfg, log)
	if err != nil {
		return nil, err
	}
	profiles := loaded.config
	opts := executor.Options{Drivers: loaded.providers, ClarifyTimeout: cfg.ClarifyTimeout, ApprovalTimeout: cfg.ApprovalTimeout, Logger: log, MaxRuns: cfg.MaxRuns,
		Profiles: loaded.drivers, DefaultProfile: profiles.Default, Capabilities: profiles.Capabilities}
	rt := &procRuntime{log: log, profiles: profiles}
	if cfg.RedisURL == "" {
		if consume {
			return nil, errors.New("a runner needs RUNHUB_REDIS_URL")
		}
		if mode == RuntimeRunners {
			return nil, errors.New("RUNHUB_RUNTIME=runners needs RUNHUB_REDIS_URL")
		}
		if err := os.MkdirAll(cfg.Data, 0o750); err != nil {
			return nil, dataDirError(cfg.Data, orDefault(cfg.dataFrom, "RUNHUB_DATA"), err)
		}
		store, err := bolt.Open(filepath.Join(cfg.Data, "journal.db"), bolt.Options{Outbox: cfg.outbox, SyncEvery: cfg.SyncEvery,
			GroupCommit: bolt.GroupCommit{Interval: cfg.CommitInterval}})
		if err != nil {
			return nil, dataDirError(cfg.Data, orDefault(cfg.dataFrom, "RUNHUB_DATA"), err)
		}
		rt.outbox = store
		rt.writes = watchWrites(observe(store, m))
		rt.mode, rt.store = RuntimeInProcess, withTestHook(rt.writes)
		// The next start recovers this journal's runs: a run whose work
		// goes on upstream (Hermes) is left going on shutdown and
		// re-attached then.
		opts.Detach = true
		rt.exec = executor.New(rt.store, opts)
		rt.router = adapter.NewRouter(rt.store, rt.exec, nil).WithCapabilities(profiles.Capabilities)
		rt.gauges(m)
		n, err := rt.exec.Recover(ctx)
		if err != nil {
			rt.close()
			return nil, fmt.Errorf("recover interrupted runs: %w", err)
		}
		if n > 0 {
			log.Info("ended runs a previous process left unfinished as interrupted", "runs", n)
		}
		return rt, nil
	}
	rdb, err := redis.NewClient(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("RUNHUB_REDIS_URL: %w", err)
	}
	rt.rdb = rdb
	if m != nil {
		hook := &redisHook{m: m}
		if c, ok := rt.rdb.(*goredis.ClusterClient); ok {
			// On a Cluster, dials and commands happen in the clients of its
			// nodes (those of the tails' blocking reads too): hook each
			// one, not the cluster client, so each is counted once.
			c.OnNewNode(func(n *goredis.Client) { n.AddHook(hook) })
		} else {
			rt.rdb.AddHook(hook)
		}
	}
	store, err := redis.Open(ctx, redis.Options{Client: rt.rdb, Logger: log,
		WaitReplicas: cfg.WaitReplicas, WaitTimeout: cfg.WaitTimeout, FeedInterval: cfg.FeedInterval, Shards: cfg.Shards})
	if err != nil {
		rt.rdb.Close()
		return nil, err
	}
	if cfg.outbox {
		if err := store.EnableOutbox(ctx); err != nil {
			store.Close()
			rt.rdb.Close()
			return nil, err
		}
	}
	rt.outbox = store
	rt.writes = watchWrites(observe(store, m))
	rt.store = withTestHook(rt.writes)
	if mode == "" {
		mode = RuntimeRunners
	}
	rt.mode = mode
	rcfg := runner.Config{Client: rt.rdb, LeaseTTL: cfg.LeaseTTL, StartTimeout: cfg.RunStartTimeout}
	rt.leaseTTL = cfg.LeaseTTL
	// A run rides out a Redis outage (a restart) as long as its lease could.
	opts.AppendRetry = cfg.LeaseTTL
	var reaper journal.Store = rt.store
	if m != nil {
		reaper = reaped(rt.store, m)
	}
	rt.node = runner.NewNode(reaper, runner.NodeOptions{Config: rcfg, ID: cfg.NodeID, Consume: consume, MaxRuns: cfg.MaxRuns, Logger: log})
	switch {
	case consume || mode == RuntimeInProcess:
		opts.Claim, opts.Release = rt.node.Claim, rt.node.Release
	case mode == RuntimeRunners:
		opts.Dispatch = runner.NewQueue(rcfg).Dispatch
	default:
		rt.close()
		return nil, fmt.Errorf("RUNHUB_RUNTIME %q: want inprocess or runners", mode)
	}
	rt.exec = executor.New(rt.store, opts)
	rt.router = adapter.NewRouter(rt.store, rt.exec, runner.NewControls(rcfg)).WithCapabilities(rt.profiles.Capabilities)
	rt.node.Start(rt.exec)
	rt.gauges(m)
	return rt, nil
}

// testStoreHook is nil in the hub. The process tests, whose binary doubles
// as the hub, set it at init (crashpoint_test.go) to wrap the journal with
// injected crash points; nothing else writes it.
var testStoreHook func(journal.Store) journal.Store

func withTestHook(s journal.Store) journal.Store {
	if testStoreHook == nil {
		return s
	}
	return testStoreHook(s)
}

// gauges registers the executor's and the Redis pool's gauges.
func (rt *procRuntime) gauges(m *metrics.Metrics) {
	m.GaugeFunc("runs_executing", "Runs executing in this process.", func() float64 { return float64(rt.exec.Live()) })
	if rt.rdb != nil {
		m.GaugeFunc("redis_pool_connections", "Connections in this process's Redis pool.", func() float64 { return float64(rt.rdb.PoolStats().TotalConns) })
		m.GaugeFunc("redis_pool_idle_connections", "Idle connections in this process's Redis pool.", func() float64 { return float64(rt.rdb.PoolStats().IdleConns) })
	}
	if r, ok := rt.outbox.(*redis.Store); ok {
		for _, c := range []struct {
			name, help string
			v          func(redis.ReadStats) uint64
		}{
			{"redis_feed_read_records_total", "Status feed records this process read from Redis (the partitions its tabs' sessions are in).", func(s redis.ReadStats) uint64 { return s.FeedRecords }},
			{"redis_feed_read_bytes_total", "Bytes of the status feed records this process read from Redis.", func(s redis.ReadStats) uint64 { return s.FeedBytes }},
			{"redis_run_read_records_total", "Run events this process read from Redis (the runs its tabs focus, replays and catch-ups).", func(s redis.ReadStats) uint64 { return s.RunRecords }},
			{"redis_run_read_bytes_total", "Bytes of the run events this process read from Redis.", func(s redis.ReadStats) uint64 { return s.RunBytes }},
			{"redis_notify_read_messages_total", "Durable streams' change notices this process received from Redis.", func(s redis.ReadStats) uint64 { return s.NotifyMessages }},
			{"redis_notify_read_bytes_total", "Bytes of the durable streams' change notices this process received.", func(s redis.ReadStats) uint64 { return s.NotifyBytes }},
		} {
			m.CounterFunc(c.name, c.help, func() float64 { return float64(c.v(r.ReadStats())) })
		}
	}
}

// nodeID is the process's lease owner id ("" with the embedded journal).
func (rt *procRuntime) nodeID() string {
	if rt.node == nil {
		return ""
	}
	return rt.node.ID()
}

// close stops the executor (its runs end as interrupted), the node and the
// journal, in that order.
func (rt *procRuntime) close() {
	if rt.exec != nil {
		rt.exec.Close()
	}
	if rt.node != nil {
		rt.node.Stop()
	}
	if rt.store != nil {
		rt.store.Close()
	}
	if rt.rdb != nil {
		rt.rdb.Close()
	}
}

// dataDirError says what is wrong with the embedded journal's directory:
// not writable (read-only, permissions), full, or err as it is.
func dataDirError(dir, src string, err error) error {
	switch {
	case errors.Is(err, bolt.ErrLocked):
		return fmt.Errorf("the data directory %s (%s) is in use by another hub process (it holds the lock of journal.db); stop that process or give this one another data directory: %w", dir, src, err)
	case errors.Is(err, syscall.EROFS), errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("the data directory %s (%s) is not writable; the embedded journal keeps journal.db there: %w", dir, src, err)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("the data directory %s (%s) is full; the embedded journal cannot open journal.db: %w", dir, src, err)
	}
	return fmt.Errorf("the embedded journal in %s (%s): %w", dir, src, err)
}

func journalName(cfg RuntimeConfig) string {
	if cfg.RedisURL != "" {
		return "redis"
	}
	return "embedded:" + cfg.Data
}
