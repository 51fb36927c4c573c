package journaltest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

var updateTests = []subtest{
	{"Atomic", testUpdateSessionAtomic},
	{"ErrorWritesNothing", testUpdateSessionError},
	{"OnlyRuntimeFields", testUpdateSessionFields},
	{"Durable", testUpdateSessionDurable},
}

// 50 concurrent updates each append one queued message: all 50 land, none
// lost to a race.
func testUpdateSessionAtomic(t *testing.T, b Backend) {
	f := newFixture(t, b)
	u := f.s
	sid := f.session("alice")
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := u.UpdateSession(f.ctx, sid, func(m *journal.SessionMeta) error {
				m.Queue = append(m.Queue, journal.QueuedMessage{ID: fmt.Sprintf("q%d", i), Message: "m"})
				return nil
			})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("UpdateSession: %v", err)
		}
	}
	got := f.sessionMeta(sid)
	seen := map[string]bool{}
	for _, q := range got.Queue {
		seen[q.ID] = true
	}
	if len(got.Queue) != 50 || len(seen) != 50 {
		t.Fatalf("queue has %d items (%d distinct), want 50", len(got.Queue), len(seen))
	}
}

// An error from fn writes nothing and comes back as is; an unknown session
// is ErrNotFound.
func testUpdateSessionError(t *testing.T, b Backend) {
	f := newFixture(t, b)
	u := f.s
	sid := f.session("alice")
	boom := errors.New("boom")
	_, err := u.UpdateSession(f.ctx, sid, func(m *journal.SessionMeta) error {
		m.Goal = &protocol.GoalUpdatedPayload{State: protocol.GoalActive, Text: "x"}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("UpdateSession error = %v, want fn's error", err)
	}
	if got := f.sessionMeta(sid); got.Goal != nil {
		t.Fatalf("a failed update wrote the goal: %+v", got.Goal)
	}
	_, err = u.UpdateSession(f.ctx, "no-such-session", func(*journal.SessionMeta) error { return nil })
	wantErr(t, "UpdateSession of an unknown session", err, journal.ErrNotFound)
}

// fn sees the current active run; changes to registry fields are ignored.
func testUpdateSessionFields(t *testing.T, b Backend) {
	f := newFixture(t, b)
	u := f.s
	sid, rid := f.run()
	var sawActive string
	out, err := u.UpdateSession(f.ctx, sid, func(m *journal.SessionMeta) error {
		sawActive = m.ActiveRun
		m.ActiveRun, m.Owner, m.Runs = "", "mallory", nil
		m.Title = "renamed"
		m.RecentKeys = []string{"k1"}
		m.Goal = &protocol.GoalUpdatedPayload{State: protocol.GoalPaused, Text: "g", Turns: 2}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sawActive != rid {
		t.Fatalf("fn saw active run %q, want %q", sawActive, rid)
	}
	got := f.sessionMeta(sid)
	if got.ActiveRun != rid || got.Owner != "alice" || len(got.Runs) != 1 {
		t.Fatalf("registry fields changed: %+v", got)
	}
	if got.Title != "renamed" || len(got.RecentKeys) != 1 || got.Goal == nil || got.Goal.Turns != 2 || got.Goal.State != protocol.GoalPaused {
		t.Fatalf("runtime fields not written: %+v", got)
	}
	if out.Title != "renamed" || out.Goal == nil {
		t.Fatalf("returned meta %+v", out)
	}
}

// The runtime-owned state survives close and reopen.
func testUpdateSessionDurable(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid := f.session("alice")
	if _, err := f.s.UpdateSession(f.ctx, sid, func(m *journal.SessionMeta) error {
		m.Queue = []journal.QueuedMessage{{ID: "q1", Message: "next", QueuedAt: 1}}
		m.Goal = &protocol.GoalUpdatedPayload{State: protocol.GoalActive, Text: "turns=2"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	f.s = b.Reopen(t, f.s)
	got := f.sessionMeta(sid)
	if len(got.Queue) != 1 || got.Queue[0].Message != "next" || got.Goal == nil || got.Goal.Text != "turns=2" {
		t.Fatalf("after reopen: %+v", got)
	}
}
