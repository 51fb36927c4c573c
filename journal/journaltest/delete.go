package journaltest

import (
	"slices"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
)

var deleteTests = []subtest{
	{"DeleteSession", testDeleteSession},
	{"DeleteSessionRacesBeginRun", testDeleteSessionRacesBeginRun},
}

// DeleteSession removes a session without an active run with every run of
// it, announces it on the feed, and touches nothing else; with an active
// run it is ErrConflict and removes nothing; an unknown session is
// ErrNotFound.
func testDeleteSession(t *testing.T, b Backend) {
	f := newFixture(t, b)
	var feed collector
	cancel := f.s.SubscribeFeed(feed.add)
	defer cancel()

	keep := f.session("alice")
	rk := f.begin(keep)
	f.appendTokens(keep, rk, 2)
	f.append(doneEvent(t, keep, rk), "")

	sid := f.session("alice")
	r1 := f.begin(sid)
	f.appendTokens(sid, r1, 3)
	f.append(tokenEvent(t, sid, r1, "keyed"), "key-1")
	f.append(doneEvent(t, sid, r1), "")
	r2 := f.begin(sid)
	f.appendTokens(sid, r2, 2)

	err := f.s.DeleteSession(f.ctx, sid)
	wantErr(t, "DeleteSession with an active run", err, journal.ErrConflict)
	if m := f.sessionMeta(sid); !slices.Equal(m.Runs, []string{r1, r2}) || m.ActiveRun != r2 {
		t.Fatalf("a refused delete changed the session: %+v", m)
	}
	checkSeqs(t, "run 1 after a refused delete", r1, f.readAll(r1, 100), 5)

	f.append(cancelledEvent(t, sid, r2), "")
	waitFor(t, "the changes so far on the feed", func() bool { return feed.changed(sid) == 3 })
	if err := f.s.DeleteSession(f.ctx, sid); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	_, err = f.s.Session(f.ctx, sid)
	wantErr(t, "Session after DeleteSession", err, journal.ErrNotFound)
	for _, rid := range []string{r1, r2} {
		_, err := f.s.Run(f.ctx, rid)
		wantErr(t, "Run "+rid+" after DeleteSession", err, journal.ErrNotFound)
		if page, err := f.s.Read(f.ctx, rid, 0, 100); err == nil && len(page) > 0 {
			t.Fatalf("Read %s after DeleteSession: %d events", rid, len(page))
		}
	}
	list, err := f.s.Sessions(f.ctx, "alice")
	if err != nil || len(list) != 1 || list[0].ID != keep {
		t.Fatalf("Sessions(alice) after the delete = %+v, %v; want only %s", list, err, keep)
	}
	active, err := f.s.ActiveRuns(f.ctx)
	if err != nil || len(active) != 0 {
		t.Fatalf("ActiveRuns after the delete = %+v, %v", active, err)
	}
	waitFor(t, "the record of DeleteSession on the feed", func() bool { return feed.changed(sid) == 4 })
	checkSeqs(t, "the other session's run", rk, f.readAll(rk, 100), 3)
	if n, err := f.s.Trim(f.ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("Trim after the delete = %d, %v; want only the other session's run", n, err)
	}

	err = f.s.DeleteSession(f.ctx, sid)
	wantErr(t, "a second DeleteSession", err, journal.ErrNotFound)
	err = f.s.DeleteSession(f.ctx, "no-such-session")
	wantErr(t, "DeleteSession of an unknown id", err, journal.ErrNotFound)
	err = f.s.BeginRun(f.ctx, journal.RunMeta{ID: f.id("run"), SessionID: sid})
	wantErr(t, "BeginRun in a deleted session", err, journal.ErrNotFound)

	// The id is free again, and the reopened store agrees.
	if err := f.s.CreateSession(f.ctx, journal.SessionMeta{ID: sid, Owner: "bob"}); err != nil {
		t.Fatalf("CreateSession with a deleted id: %v", err)
	}
	f.s = b.Reopen(t, f.s)
	if m := f.sessionMeta(sid); m.Owner != "bob" || len(m.Runs) != 0 {
		t.Fatalf("the re-created session after a reopen: %+v", m)
	}
	if list, err := f.s.Sessions(f.ctx, "alice"); err != nil || len(list) != 1 {
		t.Fatalf("Sessions(alice) after a reopen = %+v, %v", list, err)
	}
}

// A delete racing BeginRun: exactly one wins. Either the run began (and
// the delete is ErrConflict) or the session is gone (and BeginRun is
// ErrNotFound).
func testDeleteSessionRacesBeginRun(t *testing.T, b Backend) {
	f := newFixture(t, b)
	for range 20 {
		sid := f.session("alice")
		rid := f.id("run")
		begun := make(chan error, 1)
		go func() { begun <- f.s.BeginRun(f.ctx, journal.RunMeta{ID: rid, SessionID: sid}) }()
		delErr := f.s.DeleteSession(f.ctx, sid)
		beginErr := <-begun
		switch {
		case beginErr == nil:
			wantErr(t, "DeleteSession racing a BeginRun that won", delErr, journal.ErrConflict)
			if m := f.sessionMeta(sid); m.ActiveRun != rid {
				t.Fatalf("session after the race: %+v", m)
			}
		case delErr == nil:
			wantErr(t, "BeginRun racing a DeleteSession that won", beginErr, journal.ErrNotFound)
			_, err := f.s.Session(f.ctx, sid)
			wantErr(t, "Session after the race", err, journal.ErrNotFound)
		default:
			t.Fatalf("both lost: DeleteSession %v, BeginRun %v", delErr, beginErr)
		}
	}
}
