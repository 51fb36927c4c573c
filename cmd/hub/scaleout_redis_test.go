package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// Restart redis-server (AOF on) mid-run, down for longer than a run's
// journal appends used to be retried: nothing journaled is lost or
// duplicated, the run completes, the focused tab keeps receiving, and
// /readyz is 503 while Redis is down and 200 after. The fault suite
// (TestFault_RedisKilledMidRun) kills it instead.
func TestScaleOut_RedisRestartAOF(t *testing.T) {
	redisOutageMidRun(t, (*redistest.Server).Stop)
}

// redisOutageMidRun takes Redis (AOF on, fsync always) away with stop in
// the middle of a run focused by a tab, for 6 s, and starts it again.
func redisOutageMidRun(t *testing.T, stop func(*redistest.Server)) {
	// The outage must stay under the lease TTL less one renewal period, and
	// some slack for reconnecting (a lease lives on in the AOF with its
	// absolute expiry): 15 s leases are renewed every 5 s, so one lives at
	// least 10 s past the stop, and a 6 s outage never lapses it. Before
	// appends were retried for up to the lease TTL, a run failed after
	// ~4.7 s of outage.
	const outage = 6 * time.Second
	s := newScaled(t, redistest.Options{AOF: true}, 15*time.Second)
	a := s.hub("hubA")
	s.runner("r1")
	const n = 200
	ta := dialTab(t, a)
	res := ta.start(fmt.Sprintf(`{"tokens":%d,"token_ms":10,"tools":0}`, n))
	ta.c.Focus(ta.ctx(), res.SessionID, "")
	ta.until(20*time.Second, "50 tokens", func() bool { return count(ta.run(res.RunID), protocol.EventTokenDelta) >= 50 })
	before := append([]protocol.Envelope{}, ta.run(res.RunID)...)
	if code := readyz(a); code != 200 {
		t.Fatalf("/readyz before the restart: %d", code)
	}

	down := time.Now()
	stop(s.rs)
	waitFor(t, 10*time.Second, "/readyz 503 while Redis is down", func() bool { return readyz(a) == 503 })
	time.Sleep(time.Until(down.Add(outage))) // the fault's length, not a wait for a condition
	s.rs.Restart(t)
	waitFor(t, 20*time.Second, "/readyz 200 after Redis is back", func() bool { return readyz(a) == 200 })
	if st := runStatus(t, a, res.RunID); st.Terminal {
		t.Fatalf("the run ended during the outage: %+v", st)
	}

	// The tab keeps receiving; should its socket drop, it reconnects with
	// its cursor as a browser would.
	deadline := time.Now().Add(40 * time.Second)
	for !ta.terminal(res.RunID) {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end; the tab has %d events", len(ta.run(res.RunID)))
		}
		if ta.closed != nil {
			seen := ta.run(res.RunID)
			next := dialTab(t, a)
			next.events = seen
			next.c.Focus(next.ctx(), res.SessionID, seen[len(seen)-1].EventID)
			ta = next
			t.Logf("the tab reconnected")
		}
		func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Until(deadline))
			defer cancel()
			m, err := ta.c.Next(ctx)
			if err != nil {
				ta.closed = err
				return
			}
			ta.record(m)
		}()
	}
	journal := allEvents(t, a.URL(), res.RunID)
	checkDone(t, "journal after the restart", journal, n)
	sameEvents(t, "events seen before the restart vs. the journal", before, journal[:len(before)])
	sameEvents(t, "the tab vs. the journal", ta.run(res.RunID), journal)
}
