package executor_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/protocol"
)

// upstreamNote is the progress text by which follower journals the id of
// its upstream work, as the Hermes driver does.
const upstreamNote = "upstream work u1"

// follower is a driver whose runs are external work it can follow again
// after a restart (a driver.Reattacher): Execute streams "Hello wor",
// journals upstreamNote and waits; Reattach waits too. Closing release
// ends the run that waits with "ld" (Execute) or "ld, again" (Reattach).
type follower struct {
	started  chan struct{}      // receives once Execute or Reattach waits
	release  chan struct{}      // closed: the run that waits ends
	causes   chan error         // the cause of a run's context that ended it
	reattach atomic.Int32       // Reattach calls
	stops    atomic.Int32       // StopOrphan calls
	orphans  chan driver.Orphan // each orphan given to Reattach
}

func newFollower() *follower {
	return &follower{started: make(chan struct{}, 4), release: make(chan struct{}), causes: make(chan error, 4),
		orphans: make(chan driver.Orphan, 4)}
}

func (f *follower) Execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	if _, err := x.Emit(ctx, protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: "Hello wor"}); err != nil {
		return nil, err
	}
	if _, err := x.Emit(ctx, protocol.EventProgress, protocol.ProgressPayload{Text: upstreamNote}); err != nil {
		return nil, err
	}
	return f.wait(ctx, x, "ld")
}

func (f *follower) wait(ctx context.Context, x *driver.Execution, rest string) (*protocol.Usage, error) {
	f.started <- struct{}{}
	select {
	case <-ctx.Done():
		f.causes <- context.Cause(ctx)
		return nil, ctx.Err()
	case <-f.release:
	}
	if _, err := x.Emit(ctx, protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: rest}); err != nil {
		return nil, err
	}
	return &protocol.Usage{Provider: "follower"}, nil
}

func (f *follower) Reattachable(ctx context.Context, o driver.Orphan) (bool, error) {
	found := false
	err := o.Events(ctx, func(e protocol.Envelope) error {
		found = found || e.Type == protocol.EventProgress && strings.Contains(string(e.Payload), upstreamNote)
		return nil
	})
	return found, err
}

func (f *follower) Reattach(ctx context.Context, x *driver.Execution, o driver.Orphan) (*protocol.Usage, error) {
	f.reattach.Add(1)
	f.orphans <- o
	return f.wait(ctx, x, "ld, again")
}

func (f *follower) StopOrphan(ctx context.Context, o driver.Orphan) error {
	f.stops.Add(1)
	return nil
}

func (f *follower) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-f.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the driver did not start")
	}
}

func newFollowerExec(store journal.Store, f *follower, detach bool) *executor.InProcess {
	log, _ := drivertest.Logger()
	return executor.New(store, executor.Options{Drivers: map[string]driver.Driver{"follow": f}, DefaultDriver: "follow",
		Detach: detach, Logger: log})
}

// leftOpen journals a run as a killed process leaves it: run.started, the
// message's beginning, and (when upstream) the note of its upstream work;
// with cancelling, the user's cancel that had not ended it yet.
func leftOpen(t *testing.T, store journal.Store, upstream, cancelling bool) journal.RunMeta {
	t.Helper()
	ctx := context.Background()
	sid := adapter.NewID("s_")
	if err := store.CreateSession(ctx, journal.SessionMeta{ID: sid, Owner: "local", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	r := journal.RunMeta{ID: adapter.NewID("r_"), SessionID: sid, Owner: "local", CreatedAt: 1, Request: []byte(`{"message":"go"}`)}
	if err := store.BeginRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	evs := []struct {
		typ protocol.EventType
		p   any
	}{
		{protocol.EventRunStarted, protocol.RunStartedPayload{Message: "go", Provider: "follow", Toolsets: []string{}}},
		{protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: "Hello wor"}},
	}
	if upstream {
		evs = append(evs, struct {
			typ protocol.EventType
			p   any
		}{protocol.EventProgress, protocol.ProgressPayload{Text: upstreamNote}})
	}
	if cancelling {
		evs = append(evs, struct {
			typ protocol.EventType
			p   any
		}{protocol.EventStatus, protocol.StatusPayload{Status: protocol.StatusCancelling, Controls: []string{}}})
	}
	// The keys are the ones the first execution used: the re-attached
	// one must not collide with them.
	for i, ev := range evs {
		e, err := protocol.NewEvent(r.ID, sid, ev.typ, ev.p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Append(ctx, e, r.ID+"/"+string(rune('1'+i))); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := store.Run(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

// endOf waits for the run's terminal event and returns all its events,
// checking there is exactly one terminal event and it is the last.
func endOf(t *testing.T, store journal.Store, runID string) []protocol.Envelope {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		meta, err := store.Run(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		if meta.Terminal {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run did not end")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var evs []protocol.Envelope
	if err := journal.ReadAll(ctx, store, runID, 0, func(e protocol.Envelope) error { evs = append(evs, e); return nil }); err != nil {
		t.Fatal(err)
	}
	terminals := 0
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if e.Terminal {
			terminals++
		}
	}
	if terminals != 1 || !evs[len(evs)-1].Terminal {
		t.Fatalf("%d terminal events: %s", terminals, drivertest.Types(evs))
	}
	return evs
}

// A started run a previous process left open, whose driver can re-attach
// it, is not interrupted by Recover: its driver follows it again, its
// events follow the journaled ones (their idempotency keys apart from the
// first execution's) and it ends done, its result the whole message —
// the text journaled before the restart and after. Nothing is stopped.
func TestRecoverReattachesRun(t *testing.T) {
	store := mem.New(mem.Options{})
	defer store.Close()
	f := newFollower()
	left := leftOpen(t, store, true, false)
	rt := newFollowerExec(store, f, false)
	defer rt.Close()
	if n, err := rt.Recover(context.Background()); err != nil || n != 0 {
		t.Fatalf("Recover: %d, %v; want no run interrupted", n, err)
	}
	f.waitStarted(t)
	if o := <-f.orphans; o.RunID != left.ID || o.Request.Message != "go" {
		t.Errorf("Reattach got orphan %+v", o)
	}
	close(f.release)
	evs := endOf(t, store, left.ID)
	if got := drivertest.Types(evs); !strings.HasPrefix(got, "run.started token.delta progress token.delta") || strings.Contains(got, "error") {
		t.Fatalf("events %s", got)
	}
	if text := drivertest.StreamText(t, evs, protocol.EventTokenDelta); text != "Hello world, again" {
		t.Errorf("text %q, want the journaled text and the re-attached run's, once each", text)
	}
	done := drivertest.Terminal(t, evs, protocol.EventDone)
	p, _ := protocol.DecodePayload[protocol.DonePayload](&done)
	if p.Result != "Hello world, again" || p.LastSeq != done.Seq-1 {
		t.Errorf("done %+v, want the whole message and last_seq %d", p, done.Seq-1)
	}
	if f.reattach.Load() != 1 || f.stops.Load() != 0 {
		t.Errorf("reattached %d times, stopped %d times; want 1, 0", f.reattach.Load(), f.stops.Load())
	}
}

// A run its driver cannot re-attach (nothing upstream journaled) still
// ends interrupted, once, and its upstream work goes to StopOrphan.
func TestRecoverInterruptsWhatCannotReattach(t *testing.T) {
	store := mem.New(mem.Options{})
	defer store.Close()
	f := newFollower()
	left := leftOpen(t, store, false, false)
	rt := newFollowerExec(store, f, false)
	if n, err := rt.Recover(context.Background()); err != nil || n != 1 {
		t.Fatalf("Recover: %d, %v; want 1 run interrupted", n, err)
	}
	evs := endOf(t, store, left.ID)
	if p := drivertest.ErrorOf(t, evs[len(evs)-1]); p.Code != protocol.ErrorInterrupted {
		t.Fatalf("terminal %+v", p)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.stops.Load() == 0 && time.Now().Before(deadline) { // the stop runs in the background
		time.Sleep(5 * time.Millisecond)
	}
	rt.Close()
	if f.reattach.Load() != 0 || f.stops.Load() != 1 {
		t.Errorf("reattached %d times, stopped %d times; want 0, 1", f.reattach.Load(), f.stops.Load())
	}
}

// A run whose user was cancelling it when the process died is re-attached
// cancelled: the driver's context ends with the user's cancel at once and
// the run ends cancelled, not interrupted nor done.
func TestRecoverReattachedCancellingRunEndsCancelled(t *testing.T) {
	store := mem.New(mem.Options{})
	defer store.Close()
	f := newFollower()
	left := leftOpen(t, store, true, true)
	rt := newFollowerExec(store, f, false)
	defer rt.Close()
	if _, err := rt.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.waitStarted(t)
	evs := endOf(t, store, left.ID)
	last := evs[len(evs)-1]
	p, _ := protocol.DecodePayload[protocol.CancelledPayload](&last)
	if last.Type != protocol.EventCancelled || !p.Partial {
		t.Fatalf("terminal %s %s, want cancelled with partial output", last.Type, last.Payload)
	}
}

// With Detach, Close leaves a run its driver can re-attach without a
// terminal event (its driver's context ends with driver.ErrDetached), and
// the next executor's Recover re-attaches it; it ends done, once. Without
// Detach, Close ends it interrupted as before.
func TestCloseDetachesReattachableRun(t *testing.T) {
	ctx := context.Background()
	for _, detach := range []bool{true, false} {
		store := mem.New(mem.Options{})
		f := newFollower()
		rt := newFollowerExec(store, f, detach)
		res, err := rt.StartRun(ctx, "local", protocol.StartRunRequest{Message: "go"})
		if err != nil {
			t.Fatal(err)
		}
		f.waitStarted(t)
		rt.Close()
		cause := <-f.causes
		meta, err := store.Run(ctx, res.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if !detach {
			if errors.Is(cause, driver.ErrDetached) || !meta.Terminal {
				t.Fatalf("without Detach: cause %v, terminal %v; want the run interrupted", cause, meta.Terminal)
			}
			evs := endOf(t, store, res.RunID)
			if p := drivertest.ErrorOf(t, evs[len(evs)-1]); p.Code != protocol.ErrorInterrupted {
				t.Fatalf("terminal %+v", p)
			}
			store.Close()
			continue
		}
		if !errors.Is(cause, driver.ErrDetached) || meta.Terminal {
			t.Fatalf("with Detach: cause %v, terminal %v; want the run left open", cause, meta.Terminal)
		}
		rt2 := newFollowerExec(store, f, true)
		if n, err := rt2.Recover(ctx); err != nil || n != 0 {
			t.Fatalf("Recover: %d, %v", n, err)
		}
		f.waitStarted(t)
		close(f.release)
		evs := endOf(t, store, res.RunID)
		done := drivertest.Terminal(t, evs, protocol.EventDone)
		p, _ := protocol.DecodePayload[protocol.DonePayload](&done)
		if p.Result != "Hello world, again" {
			t.Errorf("done result %q", p.Result)
		}
		rt2.Close()
		store.Close()
	}
}
