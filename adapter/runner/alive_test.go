package runner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/adapter/runner"
)

// Liveness sees a runner from its start (its first heartbeat is at once)
// and not after it stops (it removes its heartbeat); a node that only
// dispatches (a hub) is no runner.
func TestLiveness(t *testing.T) {
	prefix := fmt.Sprintf("alive%d:", prefixes.Add(1))
	log, _ := drivertest.Logger()
	ctx := context.Background()
	hub := openProcess(t, prefix)
	defer hub.close(t)
	hubNode := runner.NewNode(hub.store, runner.NodeOptions{Config: hub.cfg, Logger: log})
	hubExec := executor.New(hub.store, executor.Options{Dispatch: runner.NewQueue(hub.cfg).Dispatch, Logger: log})
	hubNode.Start(hubExec)
	defer func() { hubExec.Close(); hubNode.Stop() }()

	// A new Liveness each time: its answer is cached for a second.
	alive := func() bool {
		t.Helper()
		ok, err := runner.NewLiveness(hub.cfg, time.Minute).Alive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if alive() {
		t.Fatal("a runner is alive with only a hub's node")
	}
	run := openProcess(t, prefix)
	defer run.close(t)
	runNode := runner.NewNode(run.store, runner.NodeOptions{Config: run.cfg, Consume: true, Logger: log})
	runExec := executor.New(run.store, executor.Options{Claim: runNode.Claim, Release: runNode.Release, Logger: log})
	runNode.Start(runExec)
	for deadline := time.Now().Add(10 * time.Second); !alive(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the runner's heartbeat never came")
		}
	}
	runExec.Close()
	runNode.Stop()
	if alive() {
		t.Fatal("a stopped runner is still alive")
	}
}
