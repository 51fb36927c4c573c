package main

import (
	"context"
	"log/slog"
	"time"
)

// defaultShutdownGrace is how long, after SIGTERM, the runs executing in a
// process (hub serve's in-process runs, a runner's) get to finish before
// those still going end interrupted. Two minutes covers a typical agent
// turn: a model's answer of a few thousand tokens at 30-50 tokens/s, or a
// few tool calls, while a restart is not held up for long. A run waiting
// for an approval or an answer still gets it during the drain (the tabs
// stay connected). The orchestrator must allow it: docker stop -t, compose
// stop_grace_period, Kubernetes terminationGracePeriodSeconds (docs/
// operations.md).
const defaultShutdownGrace = "2m"

// maxSocketGrace bounds the time a hub's sockets get to close after the
// goaway that follows the drain (at most the shutdown grace, at least 1s).
const maxSocketGrace = 10 * time.Second

// socketGrace is the time sockets get to close after the drain.
func socketGrace(grace time.Duration) time.Duration {
	return max(min(grace, maxSocketGrace), time.Second)
}

// drainRuns is the first step of `hub serve`'s graceful stop. The
// executor refuses new runs (a start answers 503 "the hub is shutting
// down", with Retry-After) and starts nothing queued (the next start of
// the hub does), /readyz answers 503 draining, and the runs executing here
// get grace to finish while the tabs stay connected, so they watch them
// end and can still answer their prompts. The runs still going after it
// end interrupted, and a Hermes run is left going upstream for the next
// start to re-attach (it is not waited for). Then the hub tells the tabs
// it is restarting (goaway) and closes.
func drainRuns(rt *procRuntime, grace time.Duration, log *slog.Logger) {
	rt.stopping.Store(true)
	rt.exec.StopStarting()
	if n := rt.exec.Interruptible(); n > 0 {
		log.Info("draining: new runs are refused; waiting for the runs executing here to finish (a second signal stops at once)",
			"runs", n, "grace", grace)
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	start := time.Now()
	if err := rt.exec.WaitInterruptible(ctx); err != nil {
		log.Warn("grace period over; ending the remaining runs as interrupted", "runs", rt.exec.Interruptible(), "grace", grace)
	} else if time.Since(start) > 100*time.Millisecond {
		log.Info("drained: the runs executing here finished", "took", time.Since(start).Round(time.Millisecond))
	}
	rt.exec.Close()
}
