package hub_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// The replay/live seam: a run starts while a socket catches up from a
// cursor (or resolves the session's latest run), 1,000 times with random
// sizes, cursors and timing, through small replay pages and a small event
// queue (so catch-up, lagging and the verifying read all happen). The new
// run is started by a control while the socket focuses on the ended run,
// or is a message queued behind a run still streaming, started by the
// executor when that run ends while the socket catches up on it. Every
// iteration the socket gets the rest of the earlier run after its cursor
// and the whole new run, each event exactly once and in order.
//
// Over both journals: bbolt's slower appends and journal/mem's quicker
// ones interleave the run, the control and the catch-up differently. The
// control socket sends two controls an iteration, over 50 a second over
// journal/mem: the socket's rate limit is off, so no control is dropped
// (TestLimits_RateLimitedControlAnswered covers that).
func TestWS_RunStartsDuringCatchUp(t *testing.T) {
	for _, store := range []struct {
		name string
		bolt bool
	}{{"mem", false}, {"bolt", true}} {
		t.Run(store.name, func(t *testing.T) { runStartsDuringCatchUp(t, store.bolt) })
	}
}

func runStartsDuringCatchUp(t *testing.T, bolt bool) {
	iterations := 1000
	if testing.Short() {
		iterations = 100
	}
	th := newTestHubWith(t, hub.Config{ReplayPage: 4, QueueEvents: 8, MessagesPerSecond: -1}, nil, runtimeOpts{Bolt: bolt})
	ctl := th.Dial(t)
	tab := th.Dial(t)
	ctx := ctxT(t, 10*time.Minute)
	rng := rand.New(rand.NewPCG(28, 4))
	for i := range iterations {
		queued := i%2 == 1
		tokenMS := 0
		if queued {
			tokenMS = 1
		}
		first := startRun(t, ctl, simStart("", 1+rng.IntN(30), tokenMS, `,"tools":0`))
		sid := first.SessionID
		delay := time.Duration(rng.IntN(3000)) * time.Microsecond
		tokens := 1 + rng.IntN(20)
		done := make(chan struct{})
		if queued {
			// Queued behind the streaming run: the executor starts it at
			// the run's end, while the socket catches up on the run.
			res, err := ctl.Control(ctx, protocol.Control{Op: protocol.OpQueue, SessionID: sid, Message: "next"})
			if err != nil || !res.Accepted {
				t.Fatalf("iteration %d: queue: %v %+v", i, err, res)
			}
			close(done)
		} else {
			waitTerminal(t, th, first.RunID)
			go func() {
				defer close(done)
				time.Sleep(delay)
				res, err := ctl.Control(ctx, simStart(sid, tokens, 0, `,"tools":0`))
				if err != nil || !res.Accepted {
					t.Errorf("iteration %d: start: %v %+v", i, err, res)
				}
			}()
		}
		// The cursor: none (the latest run from seq 1), or a journaled
		// event of the first run (sometimes its terminal).
		meta, err := th.Store.Run(ctx, first.RunID)
		if err != nil {
			t.Fatal(err)
		}
		cursor, from := "", uint64(0)
		if meta.LastSeq > 0 && rng.IntN(4) > 0 {
			from = 1 + rng.Uint64N(meta.LastSeq)
			cursor = protocol.EventID(first.RunID, from)
		}
		if err := tab.Focus(ctx, sid, cursor); err != nil {
			t.Fatal(err)
		}
		<-done
		if t.Failed() {
			return
		}
		var second string
		waitFor(t, 20*time.Second, "the second run", func() bool {
			s, err := th.Store.Session(ctx, sid)
			if err == nil && len(s.Runs) == 2 {
				second = s.Runs[1]
			}
			return second != ""
		})
		col := newCollector()
		col.Until(t, tab, time.Minute, "the second run's terminal event", func() bool { return col.TerminalOf(second) })
		if meta, err = th.Store.Run(ctx, first.RunID); err != nil || !meta.Terminal {
			t.Fatalf("iteration %d: the first run did not end first: %+v %v", i, meta, err)
		}
		next := map[string]uint64{first.RunID: from + 1, second: 1}
		if cursor == "" {
			next[first.RunID] = 0 // either not replayed (the second run was the latest) or from seq 1
		}
		for _, e := range col.Events {
			want, ok := next[e.RunID]
			switch {
			case !ok:
				t.Fatalf("iteration %d: an event of another run: %s seq %d", i, e.RunID, e.Seq)
			case want == 0 && e.Seq == 1:
				want = 1
			}
			if e.Seq != want {
				t.Fatalf("iteration %d (queued %v, cursor %q, start after %v): run %s: got seq %d, want %d (a duplicate or a gap)",
					i, queued, cursor, delay, e.RunID, e.Seq, want)
			}
			next[e.RunID] = want + 1
		}
		if (cursor != "" || next[first.RunID] != 0) && next[first.RunID] != meta.LastSeq+1 {
			t.Fatalf("iteration %d: the first run's rest ends at seq %d, want %d", i, next[first.RunID]-1, meta.LastSeq)
		}
		if len(col.Errors) > 0 {
			t.Fatalf("iteration %d: errors %v", i, col.Errors)
		}
	}
}
