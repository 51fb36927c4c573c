package journaltest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

var busTests = []subtest{
	{"SubscribeRunWhileAppending", testSubscribeRunWhileAppending},
	{"SubscribeFeedWhileAppending", testSubscribeFeedWhileAppending},
	{"ReplayThenLive", testReplayThenLive},
	{"SubscribeBeforeBeginRun", testSubscribeBeforeBeginRun},
	{"Cancel", testCancel},
	{"SessionChangedOnFeed", testSessionChangedOnFeed},
}

// Every change of a session that journals no event — its creation, a run
// registered but not started, an UpdateSession — puts one SessionChanged
// record for it on the feed (what lets every node show a queued run or a
// new goal at once). Refused writes put none, run subscribers and the run's
// log never see them, and the records carry no run, seq or payload.
func testSessionChangedOnFeed(t *testing.T, b Backend) {
	f := newFixture(t, b)
	var feed, run collector
	cancel := f.s.SubscribeFeed(feed.add)
	defer cancel()
	other := f.session("bob")
	sid := f.session("alice")
	waitFor(t, "the record of CreateSession", func() bool { return feed.changed(sid) == 1 })
	rid := f.begin(sid)
	waitFor(t, "the record of BeginRun", func() bool { return feed.changed(sid) == 2 })
	cancelRun := f.s.SubscribeRun(rid, run.add)
	defer cancelRun()
	if _, err := f.s.UpdateSession(f.ctx, sid, func(m *journal.SessionMeta) error {
		m.Queue = append(m.Queue, journal.QueuedMessage{ID: "q1", Message: "next"})
		return nil
	}); err != nil {
		t.Fatalf("UpdateSession: %v", err)
	}
	waitFor(t, "the record of UpdateSession", func() bool { return feed.changed(sid) == 3 })

	// Refused: a second active run, an existing session id, a failing update.
	err := f.s.BeginRun(f.ctx, journal.RunMeta{ID: f.id("run"), SessionID: sid})
	wantErr(t, "BeginRun while active", err, journal.ErrConflict)
	err = f.s.CreateSession(f.ctx, journal.SessionMeta{ID: sid, Owner: "alice"})
	wantErr(t, "CreateSession of an existing id", err, journal.ErrExists)
	_, err = f.s.UpdateSession(f.ctx, sid, func(*journal.SessionMeta) error { return journal.ErrConflict })
	wantErr(t, "UpdateSession whose fn fails", err, journal.ErrConflict)
	f.appendTokens(sid, rid, 2) // a marker: what was fed before it has arrived
	waitFor(t, "the marker events", func() bool { return feed.len() == 2 && run.len() == 2 })
	if n := feed.changed(sid); n != 3 {
		t.Fatalf("%d SessionChanged records for %s, want 3 (refused writes must add none)", n, sid)
	}
	if n := feed.changed(other); n != 1 {
		t.Fatalf("%d SessionChanged records for %s, want 1", n, other)
	}
	feed.mu.Lock()
	for _, e := range feed.changes {
		if e.RunID != "" || e.Seq != 0 || len(e.Payload) != 0 {
			t.Errorf("a SessionChanged record carries more than its session: %+v", e)
		}
	}
	feed.mu.Unlock()
	if run.len() != 2 || len(run.changes) != 0 {
		t.Fatalf("the run subscriber got %d events and %d change records, want 2 and 0", run.len(), len(run.changes))
	}
	for _, e := range f.readAll(rid, 10) {
		if e.Type == journal.SessionChanged {
			t.Fatalf("a SessionChanged record is in the run's log: %+v", e)
		}
	}
}

// appendConcurrently appends each tokens to every run from writers
// goroutines per run, then a terminal event per run, and returns the
// count of events per run.
func appendConcurrently(t *testing.T, f *fixture, runs [][2]string, writers, each int) int {
	t.Helper()
	var wg sync.WaitGroup
	for _, r := range runs {
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					e := tokenEvent(t, r[0], r[1], fmt.Sprintf("w%d-%d", w, i))
					if i%10 == 9 {
						e = statusEvent(t, r[0], r[1])
					}
					if _, err := f.s.Append(f.ctx, e, ""); err != nil {
						t.Errorf("append to %s: %v", r[1], err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	for _, r := range runs {
		f.append(doneEvent(t, r[0], r[1]), "")
	}
	return writers*each + 1
}

// checkDelivered fails unless the delivered events of run rid are exactly
// what Read returns, in seq order, each once. Delta payloads may be "{}"
// when feed is set.
func checkDelivered(t *testing.T, f *fixture, what, rid string, got []protocol.Envelope, n int, feed bool) {
	t.Helper()
	checkSeqs(t, what, rid, got, n)
	stored := f.readAll(rid, 1000)
	for i, e := range got {
		w := stored[i]
		if e.Type != w.Type || e.Terminal != w.Terminal || e.CreatedAt != w.CreatedAt || e.SessionID != w.SessionID {
			t.Fatalf("%s: delivered %+v, stored %+v", what, e, w)
		}
		if feed && e.Type.IsDelta() && string(e.Payload) == "{}" {
			continue
		}
		if !jsonEqual(e.Payload, w.Payload) {
			t.Fatalf("%s: event %d delivered with payload %s, stored %s", what, e.Seq, e.Payload, w.Payload)
		}
	}
}

// A run subscriber sees every event of its run once, in order, and no other.
func testSubscribeRunWhileAppending(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	osid, orid := f.run()
	var c collector
	cancel := f.s.SubscribeRun(rid, c.add)
	defer cancel()
	n := appendConcurrently(t, f, [][2]string{{sid, rid}, {osid, orid}}, 5, 40)
	waitFor(t, "run delivery", func() bool { return c.len() >= n })
	time.Sleep(20 * time.Millisecond) // room for stray deliveries
	checkDelivered(t, f, "run subscriber", rid, c.snapshot(), n, false)
}

// A feed subscriber sees every event of every run once, in order per run.
func testSubscribeFeedWhileAppending(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sa := f.session("alice")
	ra := f.begin(sa)
	sb := f.session("bob")
	rb := f.begin(sb)
	sc, rc := f.run()
	var c collector
	cancel := f.s.SubscribeFeed(c.add)
	defer cancel()
	runs := [][2]string{{sa, ra}, {sb, rb}, {sc, rc}}
	n := appendConcurrently(t, f, runs, 3, 30)
	waitFor(t, "feed delivery", func() bool { return c.len() >= n*len(runs) })
	time.Sleep(20 * time.Millisecond)
	got := byRun(c.snapshot())
	if len(got) != len(runs) {
		t.Fatalf("feed carried %d runs, want %d", len(got), len(runs))
	}
	for _, r := range runs {
		checkDelivered(t, f, "feed of "+r[1], r[1], got[r[1]], n, true)
	}
}

// Subscribe, replay with Read, then drain live events past the replay: the
// result is the whole run, whatever the appends do meanwhile.
func testReplayThenLive(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	f.appendTokens(sid, rid, 30)
	var wg sync.WaitGroup
	const writers, each = 4, 50
	for range writers {
		wg.Go(func() {
			for range each {
				if _, err := f.s.Append(f.ctx, tokenEvent(t, sid, rid, "live"), ""); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		})
	}
	var live collector
	cancel := f.s.SubscribeRun(rid, live.add)
	defer cancel()
	replay := f.readAll(rid, 7)
	wg.Wait()
	total := 30 + writers*each
	last := replay[len(replay)-1].Seq
	waitFor(t, "live events past the replay", func() bool {
		ev := live.snapshot()
		return uint64(total) == last || len(ev) > 0 && ev[len(ev)-1].Seq == uint64(total)
	})
	stream := append([]protocol.Envelope(nil), replay...)
	var prev uint64
	for _, e := range live.snapshot() {
		if e.Seq <= prev {
			t.Fatalf("live events out of order: %d after %d", e.Seq, prev)
		}
		prev = e.Seq
		if e.Seq > last {
			stream = append(stream, e)
		}
	}
	checkSeqs(t, "replay then live", rid, stream, total)
}

// A subscription to a run that has not begun yet receives its events.
func testSubscribeBeforeBeginRun(t *testing.T, b Backend) {
	f := newFixture(t, b)
	var c collector
	cancel := f.s.SubscribeRun("later", c.add)
	defer cancel()
	sid := f.session("alice")
	if err := f.s.BeginRun(f.ctx, journalRun("later", sid)); err != nil {
		t.Fatalf("BeginRun: %v", err)
	}
	f.appendTokens(sid, "later", 3)
	waitFor(t, "delivery to an early subscriber", func() bool { return c.len() >= 3 })
	checkDelivered(t, f, "early subscriber", "later", c.snapshot(), 3, false)
}

// After cancel returns, the callback is not called again; other
// subscribers keep receiving.
func testCancel(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	var run, feed, control collector
	cancelRun := f.s.SubscribeRun(rid, run.add)
	cancelFeed := f.s.SubscribeFeed(feed.add)
	cancelControl := f.s.SubscribeRun(rid, control.add)
	defer cancelControl()
	f.appendTokens(sid, rid, 5)
	waitFor(t, "first five events", func() bool { return run.len() == 5 && feed.len() == 5 && control.len() == 5 })
	cancelRun()
	cancelFeed()
	cancelRun() // cancel twice is harmless
	atRun, atFeed := run.len(), feed.len()
	f.appendTokens(sid, rid, 5)
	f.append(doneEvent(t, sid, rid), "")
	waitFor(t, "the control subscriber", func() bool { return control.len() == 11 })
	time.Sleep(50 * time.Millisecond)
	if run.len() != atRun || feed.len() != atFeed {
		t.Fatalf("cancelled subscribers got %d and %d more events", run.len()-atRun, feed.len()-atFeed)
	}
	checkDelivered(t, f, "control subscriber", rid, control.snapshot(), 11, false)
}
