package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/protocol"
)

// A graceful stop: after StopStarting a start is refused with ErrClosed and
// journals nothing, a queue control behind the running run is still taken,
// the running run finishes (done, not interrupted) and starts nothing
// after it; the next executor's Recover starts what was queued.
func TestStopStarting_RunsFinishNothingStarts(t *testing.T) {
	h := drivertest.New(t, drivertest.Config{})
	ctx := context.Background()
	run := h.Start(protocol.StartRunRequest{Message: "finish me", Provider: "sim",
		Metadata: json.RawMessage(`{"sim":{"tokens":20,"token_ms":40,"tools":0,"approval":false,"clarify":false}}`)})
	h.WaitFor(run.RunID, 10*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventTokenDelta })

	h.Exec.StopStarting()
	before, err := h.Store.Sessions(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.RT.StartRun(ctx, "local", protocol.StartRunRequest{Message: "new session", Provider: "sim"}); !errors.Is(err, adapter.ErrClosed) {
		t.Fatalf("start of a new session while stopping: %v, want adapter.ErrClosed", err)
	}
	after, err := h.Store.Sessions(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("a refused start created a session: %d sessions, then %d", len(before), len(after))
	}
	res, err := h.Control(ctx, protocol.Control{Op: protocol.OpQueue, SessionID: run.SessionID, Message: "after the stop"})
	if err != nil || !res.Accepted {
		t.Fatalf("queue behind the running run: %+v, %v", res, err)
	}
	if n := h.Exec.Interruptible(); n != 1 {
		t.Fatalf("Interruptible %d, want 1", n)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := h.Exec.WaitInterruptible(wctx); err != nil {
		t.Fatalf("WaitInterruptible: %v", err)
	}
	evs := h.Events(run.RunID, 5*time.Second)
	drivertest.Terminal(t, evs, protocol.EventDone)
	meta, err := h.Store.Session(ctx, run.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if meta.ActiveRun != "" || len(meta.Queue) != 1 {
		t.Fatalf("after the run: active run %q, queue %+v; want none started and the message still queued", meta.ActiveRun, meta.Queue)
	}
	h.Exec.Close()

	next := executor.New(h.Store, executor.Options{Drivers: map[string]driver.Driver{"sim": &sim.Driver{}}, Logger: h.Log})
	defer next.Close()
	if _, err := next.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	meta, err = h.Store.Session(ctx, run.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if meta.ActiveRun == "" || len(meta.Queue) != 0 {
		t.Fatalf("after Recover: active run %q, queue %+v; want the queued message started", meta.ActiveRun, meta.Queue)
	}
}

// WaitInterruptible does not wait for a run Close would leave going
// upstream (Detach and a driver.Reattacher); without Detach it does.
func TestWaitInterruptible_SkipsDetachableRuns(t *testing.T) {
	ctx := context.Background()
	for _, detach := range []bool{true, false} {
		store := mem.New(mem.Options{})
		f := newFollower()
		rt := newFollowerExec(store, f, detach)
		if _, err := rt.StartRun(ctx, "local", protocol.StartRunRequest{Message: "go"}); err != nil {
			t.Fatal(err)
		}
		f.waitStarted(t)
		rt.StopStarting()
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := rt.WaitInterruptible(wctx)
		cancel()
		switch {
		case detach && (err != nil || rt.Interruptible() != 0):
			t.Errorf("with Detach: WaitInterruptible %v, Interruptible %d; want no wait", err, rt.Interruptible())
		case !detach && (!errors.Is(err, context.DeadlineExceeded) || rt.Interruptible() != 1):
			t.Errorf("without Detach: WaitInterruptible %v, Interruptible %d; want it to wait for the run", err, rt.Interruptible())
		}
		rt.Close()
		store.Close()
	}
}
