package journaltest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

var queueTests = []subtest{
	{"BeginRunUpdateAtomic", testBeginRunUpdate},
	{"BeginRunUpdateRefusals", testBeginRunUpdateRefusals},
	{"BeginRunUpdateRace", testBeginRunUpdateRace},
	{"IdleQueues", testIdleQueues},
}

// pop is the fn of a queue hand-off: the head must be want, and is popped.
func pop(want string) func(*journal.SessionMeta) error {
	return func(m *journal.SessionMeta) error {
		if len(m.Queue) == 0 || m.Queue[0].ID != want {
			return errMoved
		}
		m.Queue = slices.Clone(m.Queue[1:])
		return nil
	}
}

var errMoved = errors.New("the queue head moved")

func enqueue(t *testing.T, f *fixture, sid string, ids ...string) {
	t.Helper()
	_, err := updater(t, f.s).UpdateSession(f.ctx, sid, func(m *journal.SessionMeta) error {
		for _, id := range ids {
			m.Queue = append(m.Queue, journal.QueuedMessage{ID: id, Message: "message " + id})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The pop and the registration land together; what is returned is the
// session as written; both survive a reopen.
func testBeginRunUpdate(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid := f.session("alice")
	enqueue(t, f, sid, "q1", "q2")
	rid := f.id("r")
	out, err := f.s.BeginRunUpdate(f.ctx, journalRun(rid, sid), pop("q1"))
	if err != nil {
		t.Fatalf("BeginRunUpdate: %v", err)
	}
	if out.ActiveRun != rid || out.LatestRun() != rid || len(out.Queue) != 1 || out.Queue[0].ID != "q2" {
		t.Fatalf("returned session %+v, want run %s active and queue [q2]", out, rid)
	}
	f.s = b.Reopen(t, f.s)
	got := f.sessionMeta(sid)
	if got.ActiveRun != rid || len(got.Queue) != 1 || got.Queue[0].ID != "q2" {
		t.Fatalf("stored session %+v, want run %s active and queue [q2]", got, rid)
	}
	if m := f.runMeta(rid); m.SessionID != sid || m.Owner != "alice" || m.LastSeq != 0 || m.Terminal {
		t.Fatalf("run meta %+v", m)
	}
}

// fn's error writes nothing (no run, queue intact); an active run is
// ErrConflict with the queue intact; an unknown session ErrNotFound.
func testBeginRunUpdateRefusals(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid := f.session("alice")
	enqueue(t, f, sid, "q1")
	rid := f.id("r")
	_, err := f.s.BeginRunUpdate(f.ctx, journalRun(rid, sid), pop("q-other"))
	if !errors.Is(err, errMoved) {
		t.Fatalf("BeginRunUpdate with a refusing fn = %v, want fn's error", err)
	}
	if _, err := f.s.Run(f.ctx, rid); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("a refused BeginRunUpdate registered the run: %v", err)
	}
	if got := f.sessionMeta(sid); got.ActiveRun != "" || len(got.Queue) != 1 || len(got.Runs) != 0 {
		t.Fatalf("a refused BeginRunUpdate wrote: %+v", got)
	}
	// The same run id is still free.
	if _, err := f.s.BeginRunUpdate(f.ctx, journalRun(rid, sid), pop("q1")); err != nil {
		t.Fatalf("BeginRunUpdate after a refusal: %v", err)
	}
	enqueue(t, f, sid, "q2")
	_, err = f.s.BeginRunUpdate(f.ctx, journalRun(f.id("r"), sid), pop("q2"))
	wantErr(t, "BeginRunUpdate on a session with an active run", err, journal.ErrConflict)
	if got := f.sessionMeta(sid); len(got.Queue) != 1 || got.Queue[0].ID != "q2" {
		t.Fatalf("a conflicting BeginRunUpdate changed the queue: %+v", got.Queue)
	}
	_, err = f.s.BeginRunUpdate(f.ctx, journalRun(f.id("r"), "no-such-session"), pop("q1"))
	wantErr(t, "BeginRunUpdate of an unknown session", err, journal.ErrNotFound)
}

// Ten drains race for one session's head: exactly one wins, the head is
// popped once, the others see a conflict or a moved head.
func testBeginRunUpdateRace(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid := f.session("alice")
	enqueue(t, f, sid, "q1", "q2")
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.s.BeginRunUpdate(f.ctx, journalRun(f.id("r"), sid), pop("q1"))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, journal.ErrConflict), errors.Is(err, errMoved):
		default:
			t.Fatalf("BeginRunUpdate: %v", err)
		}
	}
	got := f.sessionMeta(sid)
	if won != 1 || len(got.Runs) != 1 || len(got.Queue) != 1 || got.Queue[0].ID != "q2" {
		t.Fatalf("%d won; session %+v", won, got)
	}
}

// IdleQueues lists the sessions with a queue and no active run, and only
// those.
func testIdleQueues(t *testing.T, b Backend) {
	f := newFixture(t, b)
	idle := f.session("alice")
	enqueue(t, f, idle, "q1")
	busy, _ := f.run()
	enqueue(t, f, busy, "q1")
	empty := f.session("alice")
	emptied := f.session("alice")
	enqueue(t, f, emptied, "q1")
	if _, err := updater(t, f.s).UpdateSession(f.ctx, emptied, func(m *journal.SessionMeta) error {
		m.Queue = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	popped := f.session("alice")
	enqueue(t, f, popped, "q1")
	if _, err := f.s.BeginRunUpdate(f.ctx, journalRun(f.id("r"), popped), pop("q1")); err != nil {
		t.Fatal(err)
	}
	_ = empty
	got, err := f.s.IdleQueues(f.ctx)
	if err != nil {
		t.Fatalf("IdleQueues: %v", err)
	}
	if !slices.Contains(got, idle) || slices.Contains(got, busy) || slices.Contains(got, empty) ||
		slices.Contains(got, emptied) || slices.Contains(got, popped) {
		t.Fatalf("IdleQueues = %v, want %s (and not %s, %s, %s, %s)", got, idle, busy, empty, emptied, popped)
	}
	// The run of busy ends: busy is idle with a queue now.
	rid := f.sessionMeta(busy).ActiveRun
	f.append(mustEvent(t, rid, busy, protocol.EventDone, protocol.DonePayload{Status: "completed"}), "")
	got, err = f.s.IdleQueues(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, busy) {
		t.Fatalf("IdleQueues = %v after %s's run ended, want it listed", got, busy)
	}
	if err := f.s.DeleteSession(f.ctx, idle); err != nil {
		t.Fatal(err)
	}
	if got, _ = f.s.IdleQueues(f.ctx); slices.Contains(got, idle) {
		t.Fatalf("IdleQueues = %v lists the deleted %s", got, idle)
	}
}

func mustEvent(t *testing.T, rid, sid string, typ protocol.EventType, p any) protocol.Envelope {
	t.Helper()
	e, err := protocol.NewEvent(rid, sid, typ, p)
	if err != nil {
		t.Fatal(fmt.Errorf("event: %w", err))
	}
	return e
}
