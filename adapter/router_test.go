package adapter_test

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/protocol"
)

// countingStore counts the run and session metas read.
type countingStore struct {
	*mem.Store
	runReads atomic.Int64
}

func (s *countingStore) Run(ctx context.Context, id string) (journal.RunMeta, error) {
	s.runReads.Add(1)
	return s.Store.Run(ctx, id)
}

func (s *countingStore) Session(ctx context.Context, id string) (journal.SessionMeta, error) {
	s.runReads.Add(1)
	return s.Store.Session(ctx, id)
}

// fakeLocal executes the runs in executing; it records every control it
// is given.
type fakeLocal struct {
	executing map[string]bool
	controls  []adapter.Control
}

func (l *fakeLocal) StartRun(context.Context, string, protocol.StartRunRequest) (protocol.RunStartResult, error) {
	return protocol.RunStartResult{}, nil
}

func (l *fakeLocal) Control(_ context.Context, run journal.RunMeta, c adapter.Control) (protocol.ControlResult, bool, error) {
	if !c.OfRun() {
		l.controls = append(l.controls, c)
		return adapter.Result(protocol.ResultAccepted, "session", "", c.SessionID, ""), true, nil
	}
	if !l.executing[run.ID] {
		return protocol.ControlResult{}, false, nil
	}
	l.controls = append(l.controls, c)
	return adapter.Result(protocol.ResultAccepted, "local", run.ID, run.SessionID, ""), true, nil
}

// fakeRemote owns the runs in owned; it records every control it is given.
// before, when set, runs before it answers.
type fakeRemote struct {
	owned    map[string]bool
	controls []adapter.Control
	before   func(runID string)
}

func (r *fakeRemote) Control(_ context.Context, run journal.RunMeta, c adapter.Control) (protocol.ControlResult, bool, error) {
	runID := run.ID
	r.controls = append(r.controls, c)
	if r.before != nil {
		r.before(runID)
	}
	if !r.owned[runID] {
		return protocol.ControlResult{}, false, nil
	}
	return adapter.Result(protocol.ResultAccepted, "remote", runID, "", ""), true, nil
}

type routerFixture struct {
	t      *testing.T
	store  *countingStore
	local  *fakeLocal
	remote *fakeRemote
}

func newRouterFixture(t *testing.T) *routerFixture {
	t.Helper()
	s := mem.New(mem.Options{})
	t.Cleanup(func() { s.Close() })
	return &routerFixture{t: t, store: &countingStore{Store: s},
		local: &fakeLocal{executing: map[string]bool{}}, remote: &fakeRemote{owned: map[string]bool{}}}
}

// run registers a run in a new session; started journals its run.started.
func (f *routerFixture) run(started bool) journal.RunMeta {
	f.t.Helper()
	ctx := context.Background()
	sid, rid := adapter.NewID("s_"), adapter.NewID("r_")
	if err := f.store.CreateSession(ctx, journal.SessionMeta{ID: sid, Owner: "o", CreatedAt: 1}); err != nil {
		f.t.Fatal(err)
	}
	meta := journal.RunMeta{ID: rid, SessionID: sid, Owner: "o", CreatedAt: 1}
	if err := f.store.BeginRun(ctx, meta); err != nil {
		f.t.Fatal(err)
	}
	if started {
		e, err := protocol.NewEvent(rid, sid, protocol.EventRunStarted, protocol.RunStartedPayload{Message: "go", Toolsets: []string{}})
		if err != nil {
			f.t.Fatal(err)
		}
		if _, err := f.store.Append(ctx, e, ""); err != nil {
			f.t.Fatal(err)
		}
	}
	return meta
}

// cancel cancels runID through a router with (withRemote) or without a
// Remote and checks the run's meta was read exactly once.
func (f *routerFixture) cancel(runID string, withRemote bool) protocol.ControlResult {
	f.t.Helper()
	return f.cancelReading(runID, withRemote, 1)
}

// cancelReading is cancel, the run's meta read reads times.
func (f *routerFixture) cancelReading(runID string, withRemote bool, reads int64) protocol.ControlResult {
	f.t.Helper()
	var remote adapter.Remote
	if withRemote {
		remote = f.remote
	}
	f.store.runReads.Store(0)
	res, err := adapter.NewRouter(f.store, f.local, remote).Control(context.Background(), control("o", protocol.Control{Op: protocol.OpCancel, RunID: runID}, ""))
	if err != nil {
		f.t.Fatal(err)
	}
	if n := f.store.runReads.Load(); n != reads {
		f.t.Errorf("cancel read the run's meta %d times, want %d", n, reads)
	}
	return res
}

func TestRouter_CancelPicksTheRunsExecutor(t *testing.T) {
	f := newRouterFixture(t)

	// Executing here: the local executor answers; no remote round trip.
	here := f.run(true)
	f.local.executing[here.ID] = true
	if res := f.cancel(here.ID, true); res.Message != "local" || len(f.remote.controls) != 0 {
		t.Fatalf("a run executing here: %+v, remote controls %v", res, f.remote.controls)
	}

	// Executing in another process: the remote answers.
	there := f.run(true)
	f.remote.owned[there.ID] = true
	if res := f.cancel(there.ID, true); res.Message != "remote" {
		t.Fatalf("a run executing elsewhere: %+v", res)
	}

	// Started, its executor gone: left to the reaper. Telling this from a
	// run that ended meanwhile takes a second read.
	gone := f.run(true)
	if res := f.cancelReading(gone.ID, true, 2); res.Status != protocol.ResultNotActive || res.Message != "the run's executor is gone; it will end as interrupted" {
		t.Fatalf("a started run without an executor: %+v", res)
	}
	if m, _ := f.store.Store.Run(context.Background(), gone.ID); m.Terminal {
		t.Fatal("the router ended a started run whose executor is gone; the reaper does")
	}

	// Never started: ended at once with one cancelled event.
	queued := f.run(false)
	res := f.cancel(queued.ID, true)
	m, _ := f.store.Store.Run(context.Background(), queued.ID)
	if !res.Accepted || res.Message != "cancelled" || !m.Terminal || m.TerminalType != protocol.EventCancelled || m.LastSeq != 1 {
		t.Fatalf("a run never started: %+v, meta %+v", res, m)
	}
	// Ended: not active, and nobody is asked.
	before := len(f.remote.controls)
	if res := f.cancel(queued.ID, true); res.Status != protocol.ResultNotActive || res.Message != "the run has already ended" || len(f.remote.controls) != before {
		t.Fatalf("an ended run: %+v", res)
	}

	// No Remote (one process): a started run not executing here ends at once.
	alone := f.run(true)
	if res := f.cancel(alone.ID, false); !res.Accepted || res.Message != "cancelled" {
		t.Fatalf("a started run without executor or remote: %+v", res)
	}
}

func TestRouter_RespondGoesWhereTheRunExecutes(t *testing.T) {
	f := newRouterFixture(t)
	rt := adapter.NewRouter(f.store, f.local, f.remote)
	ctx := context.Background()
	here, there, nowhere := f.run(true), f.run(true), f.run(true)
	f.local.executing[here.ID], f.remote.owned[there.ID] = true, true
	for _, c := range []struct {
		run  string
		want string
	}{{here.ID, "local"}, {there.ID, "remote"}, {nowhere.ID, "the run is not active"}} {
		f.store.runReads.Store(0)
		res, err := rt.Control(ctx, control("o", protocol.Control{Op: protocol.OpApprove, RunID: c.run, ApprovalID: "a1", Choice: "once"}, ""))
		if err != nil || res.Message != c.want {
			t.Errorf("approval of %s: %+v, %v; want %q", c.run, res, err, c.want)
		}
		if n := f.store.runReads.Load(); n != 1 {
			t.Errorf("the approval read the run's meta %d times, want once", n)
		}
	}
	if len(f.local.controls) != 1 || !reflect.DeepEqual(f.local.controls[0], control("o", protocol.Control{Op: protocol.OpApprove, RunID: here.ID, ApprovalID: "a1", Choice: "once"}, "")) {
		t.Errorf("local controls %+v", f.local.controls)
	}
}

// A steer goes to the session's active run's executor; its key is
// remembered before it is routed, here or elsewhere, so a repeat is not
// delivered twice.
func TestRouter_SteerRoutesToTheActiveRun(t *testing.T) {
	f := newRouterFixture(t)
	rt := adapter.NewRouter(f.store, f.local, f.remote)
	ctx := context.Background()
	steer := func(sid, key string) adapter.Control {
		return control("o", protocol.Control{Op: protocol.OpQueue, SessionID: sid, Message: "left", Mode: protocol.ModeSteer}, key)
	}

	there := f.run(true)
	f.remote.owned[there.ID] = true
	if res, err := rt.Control(ctx, steer(there.SessionID, "k1")); err != nil || res.Message != "remote" {
		t.Fatalf("steer elsewhere: %+v, %v", res, err)
	}
	if res, err := rt.Control(ctx, steer(there.SessionID, "k1")); err != nil || res.Status != protocol.ResultNotActive || len(f.remote.controls) != 1 {
		t.Fatalf("repeated steer: %+v, %v; remote controls %+v", res, err, f.remote.controls)
	}
	if c := f.remote.controls[0]; !reflect.DeepEqual(c, steer(there.SessionID, "k1")) {
		t.Errorf("remote control %+v", c)
	}

	here := f.run(true)
	f.local.executing[here.ID] = true
	if res, err := rt.Control(ctx, steer(here.SessionID, "k2")); err != nil || res.Message != "local" {
		t.Fatalf("steer here: %+v, %v", res, err)
	}
	if c := f.local.controls[0]; !reflect.DeepEqual(c, steer(here.SessionID, "k2")) {
		t.Errorf("local control %+v", c)
	}
	if res, err := rt.Control(ctx, steer(here.SessionID, "k2")); err != nil || res.Message != "duplicate request: already delivered" || len(f.local.controls) != 1 {
		t.Fatalf("repeated steer here: %+v, %v; local controls %+v", res, err, f.local.controls)
	}

	idle := f.run(false)
	res, err := rt.Control(ctx, steer(idle.SessionID, ""))
	if err != nil || res.Status != protocol.ResultNotActive || res.Message != "no active run to steer" {
		t.Fatalf("steer a run nobody executes: %+v, %v", res, err)
	}
}

// A run that ends while its cancel is on the way to its executor (which
// then holds no lease) is answered as ended, not as a run whose executor
// is gone.
func TestRouter_CancelRacingTheRunsEnd(t *testing.T) {
	f := newRouterFixture(t)
	run := f.run(true)
	f.remote.before = func(runID string) {
		e, err := protocol.NewEvent(runID, run.SessionID, protocol.EventDone, protocol.DonePayload{Status: string(protocol.StatusCompleted)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.Append(context.Background(), e, ""); err != nil {
			t.Fatal(err)
		}
	}
	res := f.cancelReading(run.ID, true, 2)
	if res.Status != protocol.ResultNotActive || res.Message != "the run has already ended" {
		t.Fatalf("a cancel racing the run's end: %+v", res)
	}
}

// control is m for owner with key.
func control(owner string, m protocol.Control, key string) adapter.Control {
	return adapter.NewControl(&m, owner, key)
}

// A cancel naming only its session reads the session alone: it goes to
// the active run's executor, answers a session whose runs have ended
// without asking anyone, and one without runs with not_active.
func TestRouter_CancelBySession(t *testing.T) {
	f := newRouterFixture(t)
	rt := adapter.NewRouter(f.store, f.local, f.remote)
	ctx := context.Background()
	cancel := func(sid string) (protocol.ControlResult, error) {
		t.Helper()
		f.store.runReads.Store(0)
		res, err := rt.Control(ctx, control("o", protocol.Control{Op: protocol.OpCancel, SessionID: sid}, ""))
		if n := f.store.runReads.Load(); n != 1 {
			t.Errorf("cancel of session %s read %d metas, want 1", sid, n)
		}
		return res, err
	}
	here := f.run(true)
	f.local.executing[here.ID] = true
	if res, err := cancel(here.SessionID); err != nil || res.Message != "local" {
		t.Fatalf("cancel of a session whose run executes here: %+v, %v", res, err)
	}
	ended := f.run(false)
	if res, err := rt.Control(ctx, control("o", protocol.Control{Op: protocol.OpCancel, RunID: ended.ID}, "")); err != nil || !res.Accepted {
		t.Fatalf("cancel of a queued run: %+v, %v", res, err)
	}
	before := len(f.remote.controls)
	if res, err := cancel(ended.SessionID); err != nil || res.Status != protocol.ResultNotActive || res.Message != "the run has already ended" || res.RunID != ended.ID || len(f.remote.controls) != before {
		t.Fatalf("cancel of a session whose runs ended: %+v, %v", res, err)
	}
	sid := adapter.NewID("s_")
	if err := f.store.CreateSession(ctx, journal.SessionMeta{ID: sid, Owner: "o", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := cancel(sid); protocol.CodeOf(err) != protocol.CodeNotActive {
		t.Fatalf("cancel of a session without runs: %v, want not_active", err)
	}
	if _, err := rt.Control(ctx, control("stranger", protocol.Control{Op: protocol.OpCancel, SessionID: here.SessionID}, "")); !errors.Is(err, adapter.ErrNotFound) {
		t.Fatalf("a stranger's cancel: %v, want ErrNotFound", err)
	}
}
