package journaltest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/runhub/runhub/journal"
)

var registryTests = []subtest{
	{"CreateSession", testCreateSession},
	{"SessionsOfOwner", testSessionsOfOwner},
	{"SessionsPage", testSessionsPage},
	{"BeginRun", testBeginRun},
	{"ConcurrentBeginRun", testConcurrentBeginRun},
	{"ConcurrentBeginSameRunID", testConcurrentBeginSameRunID},
	{"ActiveRuns", testActiveRuns},
}

func testCreateSession(t *testing.T, b Backend) {
	f := newFixture(t, b)
	s := journal.SessionMeta{ID: "s1", Owner: "alice", Title: "first"}
	if err := f.s.CreateSession(f.ctx, s); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	got := f.sessionMeta("s1")
	if got.ID != "s1" || got.Owner != "alice" || got.Title != "first" || got.CreatedAt == 0 ||
		len(got.Runs) != 0 || got.ActiveRun != "" {
		t.Fatalf("Session(s1) = %+v, want id s1, owner alice, title first, created_at set, no runs", got)
	}
	err := f.s.CreateSession(f.ctx, journal.SessionMeta{ID: "s1", Owner: "bob"})
	wantErr(t, "duplicate CreateSession", err, journal.ErrExists)
	if again := f.sessionMeta("s1"); again.Owner != "alice" || again.CreatedAt != got.CreatedAt {
		t.Fatalf("duplicate CreateSession changed the session: %+v", again)
	}

	const given = 1764460800.5
	if err := f.s.CreateSession(f.ctx, journal.SessionMeta{ID: "s2", Owner: "alice", CreatedAt: given}); err != nil {
		t.Fatalf("CreateSession(s2): %v", err)
	}
	if got := f.sessionMeta("s2"); got.CreatedAt != given {
		t.Fatalf("created_at = %v, want the given %v", got.CreatedAt, given)
	}
	_, err = f.s.Session(f.ctx, "no-such-session")
	wantErr(t, "Session of an unknown id", err, journal.ErrNotFound)
	if err := f.s.CreateSession(f.ctx, journal.SessionMeta{ID: "", Owner: "alice"}); err == nil {
		t.Fatal("CreateSession with an empty id succeeded")
	}
}

// Sessions lists only the owner's sessions, oldest first.
func testSessionsOfOwner(t *testing.T, b Backend) {
	f := newFixture(t, b)
	const t0 = 1764460800.0
	var alice, bob []string
	for i := range 7 {
		owner := "alice"
		if i%3 == 1 {
			owner = "bob"
		}
		id := fmt.Sprintf("sess-%d", i)
		if err := f.s.CreateSession(f.ctx, journal.SessionMeta{ID: id, Owner: owner, CreatedAt: t0 + float64(i)}); err != nil {
			t.Fatalf("CreateSession(%s): %v", id, err)
		}
		if owner == "alice" {
			alice = append(alice, id)
		} else {
			bob = append(bob, id)
		}
	}
	rid := f.begin("sess-0")
	for owner, want := range map[string][]string{"alice": alice, "bob": bob, "carol": nil} {
		list, err := f.s.Sessions(f.ctx, owner)
		if err != nil {
			t.Fatalf("Sessions(%s): %v", owner, err)
		}
		var ids []string
		for _, s := range list {
			ids = append(ids, s.ID)
			if s.Owner != owner {
				t.Fatalf("Sessions(%s) lists %s of %s", owner, s.ID, s.Owner)
			}
			if s.ID == "sess-0" && (!slices.Equal(s.Runs, []string{rid}) || s.ActiveRun != rid) {
				t.Fatalf("Sessions(%s) lists sess-0 with runs %v active %q, want [%s] %s", owner, s.Runs, s.ActiveRun, rid, rid)
			}
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("Sessions(%s) = %v, want %v", owner, ids, want)
		}
	}
}

// BeginRun: not found, exists, conflict while active, allowed after the
// terminal event; the session lists its runs in order.
func testBeginRun(t *testing.T, b Backend) {
	f := newFixture(t, b)
	err := f.s.BeginRun(f.ctx, journal.RunMeta{ID: "r0", SessionID: "no-such-session"})
	wantErr(t, "BeginRun in an unknown session", err, journal.ErrNotFound)

	sid := f.session("alice")
	const given = 1764460800.25
	r1 := journal.RunMeta{ID: "r1", SessionID: sid, Owner: "alice", CreatedAt: given}
	if err := f.s.BeginRun(f.ctx, r1); err != nil {
		t.Fatalf("BeginRun(r1): %v", err)
	}
	m := f.runMeta("r1")
	if m.ID != "r1" || m.SessionID != sid || m.Owner != "alice" || m.CreatedAt != given || m.LastSeq != 0 || m.Terminal {
		t.Fatalf("Run(r1) = %+v", m)
	}
	if s := f.sessionMeta(sid); s.ActiveRun != "r1" || !slices.Equal(s.Runs, []string{"r1"}) || s.LatestRun() != "r1" {
		t.Fatalf("session after BeginRun(r1): runs %v active %q", s.Runs, s.ActiveRun)
	}

	err = f.s.BeginRun(f.ctx, journal.RunMeta{ID: "r2", SessionID: sid})
	wantErr(t, "BeginRun while r1 is active", err, journal.ErrConflict)
	_, err = f.s.Run(f.ctx, "r2")
	wantErr(t, "Run of the refused run", err, journal.ErrNotFound)

	f.append(doneEvent(t, sid, "r1"), "")
	err = f.s.BeginRun(f.ctx, journal.RunMeta{ID: "r1", SessionID: sid})
	wantErr(t, "BeginRun with a taken id", err, journal.ErrExists)
	other := f.session("bob")
	err = f.s.BeginRun(f.ctx, journal.RunMeta{ID: "r1", SessionID: other})
	wantErr(t, "BeginRun with an id taken in another session", err, journal.ErrExists)

	if err := f.s.BeginRun(f.ctx, journal.RunMeta{ID: "r2", SessionID: sid}); err != nil {
		t.Fatalf("BeginRun(r2) after r1's terminal event: %v", err)
	}
	if m := f.runMeta("r2"); m.CreatedAt == 0 {
		t.Fatal("created_at not set on a run without one")
	}
	f.append(cancelledEvent(t, sid, "r2"), "")
	if err := f.s.BeginRun(f.ctx, journal.RunMeta{ID: "r3", SessionID: sid}); err != nil {
		t.Fatalf("BeginRun(r3): %v", err)
	}
	s := f.sessionMeta(sid)
	if !slices.Equal(s.Runs, []string{"r1", "r2", "r3"}) || s.ActiveRun != "r3" || s.LatestRun() != "r3" {
		t.Fatalf("session runs %v active %q, want [r1 r2 r3] r3", s.Runs, s.ActiveRun)
	}
}

// Many concurrent BeginRun on one session: exactly one wins.
func testConcurrentBeginRun(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid := f.session("alice")
	const n = 30
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = f.s.BeginRun(f.ctx, journal.RunMeta{ID: fmt.Sprintf("run-%d", i), SessionID: sid})
		})
	}
	wg.Wait()
	winner := ""
	for i, err := range errs {
		id := fmt.Sprintf("run-%d", i)
		switch {
		case err == nil:
			if winner != "" {
				t.Fatalf("both %s and %s began in one session", winner, id)
			}
			winner = id
		case errors.Is(err, journal.ErrConflict):
			_, err := f.s.Run(f.ctx, id)
			wantErr(t, "Run of a losing run", err, journal.ErrNotFound)
		default:
			t.Fatalf("BeginRun(%s): %v, want nil or ErrConflict", id, err)
		}
	}
	if winner == "" {
		t.Fatal("no BeginRun won")
	}
	if s := f.sessionMeta(sid); s.ActiveRun != winner || !slices.Equal(s.Runs, []string{winner}) {
		t.Fatalf("session runs %v active %q, want [%s]", s.Runs, s.ActiveRun, winner)
	}
	if active, err := f.s.ActiveRuns(f.ctx); err != nil || len(active) != 1 || active[0].ID != winner {
		t.Fatalf("ActiveRuns = %v, %v; want just %s", active, err, winner)
	}
}

// Concurrent BeginRun of one run id in many sessions: exactly one wins.
func testConcurrentBeginSameRunID(t *testing.T, b Backend) {
	f := newFixture(t, b)
	const n = 10
	sids := make([]string, n)
	for i := range sids {
		sids[i] = f.session("alice")
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f.s.BeginRun(f.ctx, journal.RunMeta{ID: "shared", SessionID: sids[i]}) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if won >= 0 {
				t.Fatalf("run id shared began in %s and %s", sids[won], sids[i])
			}
			won = i
		case !errors.Is(err, journal.ErrExists):
			t.Fatalf("BeginRun(shared in %s): %v, want nil or ErrExists", sids[i], err)
		}
	}
	if won < 0 {
		t.Fatal("no BeginRun won")
	}
	for i, sid := range sids {
		s := f.sessionMeta(sid)
		if i == won && s.ActiveRun != "shared" || i != won && (s.ActiveRun != "" || len(s.Runs) != 0) {
			t.Fatalf("session %s: runs %v active %q (winner %s)", sid, s.Runs, s.ActiveRun, sids[won])
		}
	}
	if m := f.runMeta("shared"); m.SessionID != sids[won] {
		t.Fatalf("run shared belongs to %s, want %s", m.SessionID, sids[won])
	}
}

// ActiveRuns lists exactly the runs without a terminal event.
func testActiveRuns(t *testing.T, b Backend) {
	f := newFixture(t, b)
	if active, err := f.s.ActiveRuns(f.ctx); err != nil || len(active) != 0 {
		t.Fatalf("ActiveRuns of an empty store = %v, %v", active, err)
	}
	want := map[string]string{} // run → session
	for i := range 6 {
		sid, rid := f.run()
		f.appendTokens(sid, rid, 2)
		switch i % 3 {
		case 0:
			f.append(doneEvent(t, sid, rid), "")
			rid = f.begin(sid) // the session's next run is active
			want[rid] = sid
		case 1:
			f.append(errorEvent(t, sid, rid, true), "")
		default:
			f.append(errorEvent(t, sid, rid, false), "")
			want[rid] = sid
		}
	}
	active, err := f.s.ActiveRuns(f.ctx)
	if err != nil {
		t.Fatalf("ActiveRuns: %v", err)
	}
	got := map[string]string{}
	for _, m := range active {
		if m.Terminal {
			t.Fatalf("ActiveRuns lists terminal run %s", m.ID)
		}
		if _, dup := got[m.ID]; dup {
			t.Fatalf("ActiveRuns lists %s twice", m.ID)
		}
		got[m.ID] = m.SessionID
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ActiveRuns = %v, want %v", got, want)
	}
}
