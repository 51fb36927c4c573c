package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/runhub/runhub/adapter/runner"
)

// noRunner is hub.Config.NoRunner for a hub that dispatches its runs to
// runner processes (Redis, runtime=runners): it reports when no runner's
// heartbeat is recent, and logs a warning saying what to do, at most once
// a minute. Nil for a hub that executes its runs itself.
func (rt *procRuntime) noRunner(log *slog.Logger) func(context.Context) (bool, string) {
	if rt.rdb == nil || rt.mode != RuntimeRunners || !rt.exec.Dispatching() {
		return nil
	}
	live := runner.NewLiveness(runner.Config{Client: rt.rdb, LeaseTTL: rt.leaseTTL}, 0)
	msg := fmt.Sprintf("waiting for a runner: no runner process has been alive for %v (runtime=runners); "+
		"start one with `hub runner` on the same RUNHUB_REDIS_URL, or run the runs in the hub with RUNHUB_RUNTIME=inprocess",
		live.Window())
	var mu sync.Mutex
	var warned time.Time
	return func(ctx context.Context) (bool, string) {
		alive, err := live.Alive(ctx)
		if err != nil || alive {
			return false, ""
		}
		mu.Lock()
		defer mu.Unlock()
		if time.Since(warned) >= time.Minute {
			warned = time.Now()
			log.Warn("runs wait in the run queue: no runner process has been alive for "+live.Window().String()+
				"; start one with `hub runner` (same RUNHUB_REDIS_URL), or set RUNHUB_RUNTIME=inprocess to run them in the hub",
				"runtime", rt.mode)
		}
		return true, msg
	}
}
