package journaltest

import (
	"slices"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

var trimTests = []subtest{
	{"OnlyOldTerminalRuns", testTrimOnlyOldTerminalRuns},
	{"NeverActive", testTrimNeverActive},
}

// Trim removes terminal runs whose terminal event is older than the cutoff:
// their events, meta, keys and place in the session; nothing else.
func testTrimOnlyOldTerminalRuns(t *testing.T, b Backend) {
	f := newFixture(t, b)
	now := time.Now()
	old := protocol.Timestamp(now.Add(-48 * time.Hour))
	cutoff := now.Add(-24 * time.Hour)

	// Session A: an old terminal run, a recent terminal run, an active run.
	sa := f.session("alice")
	ra1 := f.begin(sa)
	f.appendTokens(sa, ra1, 3)
	f.append(tokenEvent(t, sa, ra1, "keyed"), "key-a1")
	end := doneEvent(t, sa, ra1)
	end.CreatedAt = old
	f.append(end, "")
	ra2 := f.begin(sa)
	f.appendTokens(sa, ra2, 2)
	f.append(doneEvent(t, sa, ra2), "")
	ra3 := f.begin(sa)
	f.appendTokens(sa, ra3, 2)

	// Session C: one old terminal run (an error).
	sc := f.session("carol")
	rc1 := f.begin(sc)
	f.append(tokenEvent(t, sc, rc1, "keyed"), "key-c1")
	fail := errorEvent(t, sc, rc1, true)
	fail.CreatedAt = old
	f.append(fail, "")

	n, err := f.s.Trim(f.ctx, cutoff)
	if err != nil || n != 2 {
		t.Fatalf("Trim(-24h) = %d, %v; want 2", n, err)
	}
	for _, rid := range []string{ra1, rc1} {
		_, err := f.s.Run(f.ctx, rid)
		wantErr(t, "Run of a trimmed run", err, journal.ErrNotFound)
		_, err = f.s.Read(f.ctx, rid, 0, 10)
		wantErr(t, "Read of a trimmed run", err, journal.ErrNotFound)
	}
	if s := f.sessionMeta(sa); !slices.Equal(s.Runs, []string{ra2, ra3}) || s.ActiveRun != ra3 {
		t.Fatalf("session A after Trim: runs %v active %q, want [%s %s] %s", s.Runs, s.ActiveRun, ra2, ra3, ra3)
	}
	if s := f.sessionMeta(sc); len(s.Runs) != 0 || s.ActiveRun != "" {
		t.Fatalf("session C after Trim: runs %v active %q, want none", s.Runs, s.ActiveRun)
	}
	checkSeqs(t, "recent terminal run", ra2, f.readAll(ra2, 10), 3)
	checkSeqs(t, "active run", ra3, f.readAll(ra3, 10), 2)
	if n, err := f.s.Trim(f.ctx, cutoff); err != nil || n != 0 {
		t.Fatalf("second Trim(-24h) = %d, %v; want 0", n, err)
	}

	// The trimmed run's id and idempotency keys are gone with it.
	if err := f.s.BeginRun(f.ctx, journal.RunMeta{ID: rc1, SessionID: sc}); err != nil {
		t.Fatalf("BeginRun reusing a trimmed run id: %v", err)
	}
	e := f.append(progressEvent(t, sc, rc1, "fresh"), "key-c1")
	if e.Seq != 1 || e.Type != protocol.EventProgress {
		t.Fatalf("append with a trimmed run's key returned %s seq %d, want a new progress event at seq 1", e.Type, e.Seq)
	}

	// A cutoff in the future trims the recent terminal run, not the active ones.
	if n, err := f.s.Trim(f.ctx, now.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("Trim(+1h) = %d, %v; want 1", n, err)
	}
	_, err = f.s.Run(f.ctx, ra2)
	wantErr(t, "Run of the recent run after Trim(+1h)", err, journal.ErrNotFound)
	if s := f.sessionMeta(sa); !slices.Equal(s.Runs, []string{ra3}) || s.ActiveRun != ra3 {
		t.Fatalf("session A after Trim(+1h): runs %v active %q", s.Runs, s.ActiveRun)
	}
	checkSeqs(t, "active run after Trim(+1h)", ra3, f.readAll(ra3, 10), 2)
	checkSeqs(t, "reused run after Trim(+1h)", rc1, f.readAll(rc1, 10), 1)
}

// Active runs survive any cutoff, however old their events.
func testTrimNeverActive(t *testing.T, b Backend) {
	f := newFixture(t, b)
	old := protocol.Timestamp(time.Now().Add(-30 * 24 * time.Hour))
	sid := f.session("alice")
	rid := "ancient"
	if err := f.s.BeginRun(f.ctx, journal.RunMeta{ID: rid, SessionID: sid, CreatedAt: old}); err != nil {
		t.Fatalf("BeginRun: %v", err)
	}
	for range 3 {
		e := tokenEvent(t, sid, rid, "x")
		e.CreatedAt = old
		f.append(e, "")
	}
	f.append(errorEvent(t, sid, rid, false), "")
	if n, err := f.s.Trim(f.ctx, time.Now().Add(24*time.Hour)); err != nil || n != 0 {
		t.Fatalf("Trim = %d, %v; want 0 with only an active run", n, err)
	}
	checkSeqs(t, "active run after Trim", rid, f.readAll(rid, 10), 4)
	if s := f.sessionMeta(sid); s.ActiveRun != rid || !slices.Equal(s.Runs, []string{rid}) {
		t.Fatalf("session after Trim: runs %v active %q", s.Runs, s.ActiveRun)
	}
	if active, err := f.s.ActiveRuns(f.ctx); err != nil || len(active) != 1 || active[0].ID != rid {
		t.Fatalf("ActiveRuns after Trim = %v, %v", active, err)
	}
}
