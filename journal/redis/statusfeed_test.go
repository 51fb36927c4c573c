package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// foldFeed folds feed records as the hub's status tracker does.
func foldFeed(t *testing.T, st *session.Session, l []protocol.Envelope) {
	t.Helper()
	for i := range l {
		e := &l[i]
		var err error
		if e.Type == journal.DeltasSkipped {
			var p journal.SkippedDeltas
			if err = json.Unmarshal(e.Payload, &p); err == nil {
				err = st.Skip(e.RunID, p.Count, p.Tokens, p.Last, e.Seq, e.CreatedAt)
			}
		} else {
			err = st.Apply(e)
		}
		if err != nil {
			t.Fatalf("folding feed record %d (%s seq %d): %v", i, e.Type, e.Seq, err)
		}
	}
}

// With a FeedInterval the feed carries a run's deltas at most once per
// interval, counted in the record that follows; every other event goes
// at once; and the status folded from the feed is the status folded from
// the run's whole log.
func TestFeed_StatusRate(t *testing.T) {
	s := openStore(t, Options{Shards: 3, FeedInterval: time.Hour})
	var feed events
	defer s.SubscribeFeed(feed.add)()
	ctx := context.Background()
	sid, rid := "s-rate", "r-rate"
	mkRun(t, s, sid, rid)
	started, err := protocol.NewEvent(rid, sid, protocol.EventRunStarted, protocol.RunStartedPayload{Message: "go"})
	if err != nil {
		t.Fatal(err)
	}
	reasoning, err := protocol.NewEvent(rid, sid, protocol.EventReasoningDelta, protocol.ReasoningPayload{BlockID: "b", Text: "hmm"})
	if err != nil {
		t.Fatal(err)
	}
	var all []protocol.Envelope
	all = append(all, started)
	for range 9 {
		all = append(all, token(sid, rid, "x"))
	}
	all = append(all, reasoning, status(sid, rid))
	for range 5 {
		all = append(all, token(sid, rid, "y"))
	}
	all = append(all, done(sid, rid))
	for _, e := range all {
		if _, err := s.Append(ctx, e, ""); err != nil {
			t.Fatal(err)
		}
	}
	// started(1) goes and starts the interval: tokens 2-10 and the
	// reasoning 11 are counted into status 12; tokens 13-17 into done 18.
	waitFor(t, 5*time.Second, "the feed", func() bool {
		feed.mu.Lock()
		defer feed.mu.Unlock()
		return len(feed.l) > 0 && feed.l[len(feed.l)-1].Terminal
	})
	feed.mu.Lock()
	got := append([]protocol.Envelope(nil), feed.l...)
	feed.mu.Unlock()
	type rec struct {
		typ protocol.EventType
		seq uint64
	}
	var recs []rec
	for _, e := range got {
		recs = append(recs, rec{e.Type, e.Seq})
	}
	want := []rec{{protocol.EventRunStarted, 1}, {journal.DeltasSkipped, 11},
		{protocol.EventStatus, 12}, {journal.DeltasSkipped, 17}, {protocol.EventDone, 18}}
	if !reflect.DeepEqual(recs, want) {
		t.Fatalf("feed records %v, want %v", recs, want)
	}
	var p journal.SkippedDeltas
	if err := json.Unmarshal(got[1].Payload, &p); err != nil || p != (journal.SkippedDeltas{Count: 10, Tokens: 9, Last: protocol.EventReasoningDelta}) {
		t.Fatalf("first skip record %s (%v)", got[1].Payload, err)
	}
	logged, err := s.Read(ctx, rid, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	fromLog, fromFeed := session.NewSession(sid, ""), session.NewSession(sid, "")
	foldFeed(t, &fromLog, logged)
	foldFeed(t, &fromFeed, got)
	if !reflect.DeepEqual(fromFeed.Status(), fromLog.Status()) {
		t.Fatalf("status from the feed\n%+v\nfrom the log\n%+v", fromFeed.Status(), fromLog.Status())
	}
	// Half way too: the status after the status event.
	fromLog, fromFeed = session.NewSession(sid, ""), session.NewSession(sid, "")
	foldFeed(t, &fromLog, logged[:12])
	foldFeed(t, &fromFeed, got[:3])
	if !reflect.DeepEqual(fromFeed.Status(), fromLog.Status()) {
		t.Fatalf("status from the feed\n%+v\nfrom the log\n%+v", fromFeed.Status(), fromLog.Status())
	}
}

// Deltas left out of the feed that no later event carries (the run went
// quiet) reach it in one mark once the run has been quiet an interval.
func TestFeed_MarkWhenQuiet(t *testing.T) {
	s := openStore(t, Options{Shards: 3, FeedInterval: 50 * time.Millisecond})
	var feed events
	defer s.SubscribeFeed(feed.add)()
	sid, rid := "s-quiet", "r-quiet"
	mkRun(t, s, sid, rid)
	ctx := context.Background()
	for _, e := range []protocol.Envelope{token(sid, rid, "a"), token(sid, rid, "b"), token(sid, rid, "c")} {
		e.CreatedAt = 1e9 // the same instant: the second and third are left out
		if _, err := s.Append(ctx, e, ""); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the mark", func() bool { return feed.len() == 2 })
	feed.mu.Lock()
	defer feed.mu.Unlock()
	m := feed.l[1]
	var p journal.SkippedDeltas
	if err := json.Unmarshal(m.Payload, &p); err != nil || m.Type != journal.DeltasSkipped || m.Seq != 3 || m.SessionID != sid ||
		p != (journal.SkippedDeltas{Count: 2, Tokens: 2, Last: protocol.EventTokenDelta}) {
		t.Fatalf("mark %+v %s (%v)", m, m.Payload, err)
	}
	if feed.l[0].Seq != 1 || feed.l[0].Type != protocol.EventTokenDelta {
		t.Fatalf("first record %+v", feed.l[0])
	}
}

// Whatever the mix of deltas and other events, and however the interval
// falls, the feed carries every event that is not a delta, in order, and
// the status folded from it is the status folded from the run's log.
func TestFeed_StatusRateAnyMix(t *testing.T) {
	s := openStore(t, Options{Shards: 3, FeedInterval: 30 * time.Millisecond})
	var feed events
	defer s.SubscribeFeed(feed.add)()
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(49, 1))
	mk := func(sid, rid string, typ protocol.EventType, p any) protocol.Envelope {
		e, err := protocol.NewEvent(rid, sid, typ, p)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for run := range 4 {
		sid, rid := fmt.Sprint("s-mix-", run), fmt.Sprint("r-mix-", run)
		mkRun(t, s, sid, rid)
		all := []protocol.Envelope{mk(sid, rid, protocol.EventRunStarted, protocol.RunStartedPayload{Message: "go"})}
		for range 80 {
			switch rnd.IntN(6) {
			case 0, 1:
				all = append(all, token(sid, rid, "x"))
			case 2:
				all = append(all, mk(sid, rid, protocol.EventReasoningDelta, protocol.ReasoningPayload{BlockID: "b", Text: "hm"}))
			case 3:
				all = append(all, mk(sid, rid, protocol.EventToolUpdated, protocol.ToolUpdatedPayload{ToolCallID: "t", Stream: "stdout", Text: "o"}))
			case 4:
				all = append(all, mk(sid, rid, protocol.EventProgress, protocol.ProgressPayload{Text: fmt.Sprint("step ", rnd.IntN(9))}))
			default:
				all = append(all, status(sid, rid))
			}
		}
		all = append(all, done(sid, rid))
		for _, e := range all {
			if rnd.IntN(8) == 0 {
				time.Sleep(time.Duration(rnd.IntN(50)) * time.Millisecond) // now and then past the interval
			}
			if _, err := s.Append(ctx, e, ""); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 10*time.Second, "the run's terminal record", func() bool {
			feed.mu.Lock()
			defer feed.mu.Unlock()
			for _, e := range feed.l {
				if e.RunID == rid && e.Terminal {
					return true
				}
			}
			return false
		})
		feed.mu.Lock()
		var got []protocol.Envelope
		for _, e := range feed.l {
			if e.RunID == rid {
				got = append(got, e)
			}
		}
		feed.mu.Unlock()
		logged, err := s.Read(ctx, rid, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var want, fed []uint64
		for _, e := range logged {
			if !e.Type.IsDelta() {
				want = append(want, e.Seq)
			}
		}
		for _, e := range got {
			if e.Type != journal.DeltasSkipped && !e.Type.IsDelta() {
				fed = append(fed, e.Seq)
			}
		}
		if !reflect.DeepEqual(fed, want) {
			t.Fatalf("run %d: the feed's events that are not deltas %v, the log's %v", run, fed, want)
		}
		fromLog, fromFeed := session.NewSession(sid, ""), session.NewSession(sid, "")
		foldFeed(t, &fromLog, logged)
		foldFeed(t, &fromFeed, got)
		if !reflect.DeepEqual(fromFeed.Status(), fromLog.Status()) {
			t.Fatalf("run %d: status from the feed\n%+v\nfrom the log\n%+v", run, fromFeed.Status(), fromLog.Status())
		}
		if len(got) >= len(logged) {
			t.Logf("run %d: %d feed records for %d events", run, len(got), len(logged))
		}
	}
}
