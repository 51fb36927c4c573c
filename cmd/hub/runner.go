package main

import (
	"context"
	"errors"
	"os"
	"sync/atomic"

	"github.com/runhub/runhub/hub/metrics"
)

// RunRunner runs `hub runner`: it takes runs from the Redis run queue and
// executes them until ctx ends; then it stops taking runs, lets the running
// ones finish within the shutdown grace, and ends the rest as interrupted,
// so no run is left without a terminal event.
func RunRunner(ctx context.Context, cfg RuntimeConfig) error {
	log := newLogger(cfg.LogFormat, cfg.LogLevel)
	warnUnknownEnv(log, os.Environ())
	m := metrics.New(version)
	if cfg.RedisURL != "" {
		if err := waitRedis(ctx, cfg.RedisURL, log, nil); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while waiting: a clean exit
			}
			return err
		}
	}
	rt, err := openRuntime(ctx, cfg, log, "", true, m)
	if err != nil {
		return err
	}
	defer rt.close()
	var stopping atomic.Bool
	if cfg.MetricsAddr != "" {
		stop, err := serveMetrics(cfg, rt, stopping.Load, log, m)
		if err != nil {
			return err
		}
		defer stop()
	}
	log.Info("runhub runner started", "node_id", rt.node.ID(), "max_runs", cfg.MaxRuns, "version", version)
	<-ctx.Done()
	stopping.Store(true)
	rt.node.StopConsuming()
	gctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	if err := rt.exec.Wait(gctx); errors.Is(err, context.DeadlineExceeded) {
		log.Warn("runner: grace period over; ending the remaining runs as interrupted", "runs", rt.exec.Live())
	}
	log.Info("runhub runner stopped", "node_id", rt.node.ID())
	return nil
}
