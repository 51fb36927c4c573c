package journaltest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

var readTests = []subtest{
	{"Paging", testReadPaging},
	{"RoundTrip", testReadRoundTrip},
	{"UnknownRun", testReadUnknownRun},
	{"WhileAppending", testReadWhileAppending},
}

// Pages of any limit concatenate to the whole run, never skipping.
func testReadPaging(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	const n = 57
	f.appendTokens(sid, rid, n)
	for _, limit := range []int{1, 2, 3, 7, 10, 56, 57, 58, 1000} {
		checkSeqs(t, fmt.Sprintf("pages of %d", limit), rid, f.readAll(rid, limit), n)
	}
	windows := []struct {
		after uint64
		limit int
		first uint64
		count int
	}{
		{0, 1, 1, 1},
		{10, 5, 11, 5},
		{50, 10, 51, 7},
		{56, 3, 57, 1},
		{57, 10, 0, 0},
		{1000, 10, 0, 0},
	}
	for _, w := range windows {
		page, err := f.s.Read(f.ctx, rid, w.after, w.limit)
		if err != nil {
			t.Fatalf("Read(after %d, limit %d): %v", w.after, w.limit, err)
		}
		if len(page) != w.count {
			t.Fatalf("Read(after %d, limit %d): %d events, want %d", w.after, w.limit, len(page), w.count)
		}
		for i, e := range page {
			if e.Seq != w.first+uint64(i) {
				t.Fatalf("Read(after %d, limit %d): event %d has seq %d, want %d", w.after, w.limit, i, e.Seq, w.first+uint64(i))
			}
		}
	}
}

// Read returns exactly what Append returned.
func testReadRoundTrip(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	var stored []protocol.Envelope
	for _, e := range []protocol.Envelope{
		event(t, sid, rid, protocol.EventRunStarted, protocol.RunStartedPayload{Message: "hi", Profile: "p", Model: "m",
			Provider: "pr", Workspace: "/w", Toolsets: []string{"fs"}, Source: "web"}),
		statusEvent(t, sid, rid),
		tokenEvent(t, sid, rid, "héllo \"wörld\" \u2028 <tag>"),
		event(t, sid, rid, protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: "c1", Name: "sh", Args: []byte(`{"cmd":["ls","-l"],"n":1.5e3}`)}),
		event(t, sid, rid, protocol.EventUsageUpdated, protocol.Usage{InputTokens: 10, OutputTokens: 20, Model: "m", Provider: "p"}),
		doneEvent(t, sid, rid),
	} {
		stored = append(stored, f.append(e, ""))
	}
	got := f.readAll(rid, 4)
	checkSeqs(t, "round trip", rid, got, len(stored))
	for i, e := range got {
		w := stored[i]
		if e.EventID != w.EventID || e.SessionID != w.SessionID || e.Type != w.Type ||
			e.CreatedAt != w.CreatedAt || e.Terminal != w.Terminal || !jsonEqual(e.Payload, w.Payload) {
			t.Fatalf("event %d read back as\n%+v\nwant\n%+v", i, e, w)
		}
	}
}

func testReadUnknownRun(t *testing.T, b Backend) {
	f := newFixture(t, b)
	_, err := f.s.Read(f.ctx, "no-such-run", 0, 10)
	wantErr(t, "Read of an unknown run", err, journal.ErrNotFound)
	_, err = f.s.Run(f.ctx, "no-such-run")
	wantErr(t, "Run of an unknown run", err, journal.ErrNotFound)
	_, rid := f.run()
	page, err := f.s.Read(f.ctx, rid, 0, 10)
	if err != nil || len(page) != 0 {
		t.Fatalf("Read of a run without events: %d events, %v; want none", len(page), err)
	}
}

// Readers paging while writers append see contiguous pages.
func testReadWhileAppending(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	const writers, each = 4, 100
	var done atomic.Bool
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				if _, err := f.s.Append(f.ctx, tokenEvent(t, sid, rid, "x"), ""); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		})
	}
	var readers sync.WaitGroup
	for r := range 3 {
		readers.Go(func() {
			limit := 3 + r*5
			var after uint64
			for {
				last := done.Load()
				page, err := f.s.Read(f.ctx, rid, after, limit)
				if err != nil {
					t.Errorf("read: %v", err)
					return
				}
				for i, e := range page {
					if e.Seq != after+uint64(i)+1 {
						t.Errorf("reader %d: page after %d has seq %d at %d", r, after, e.Seq, i)
						return
					}
				}
				if len(page) > 0 {
					after = page[len(page)-1].Seq
				} else if last {
					break
				} else {
					time.Sleep(100 * time.Microsecond)
				}
			}
			if after != writers*each {
				t.Errorf("reader %d ended at seq %d, want %d", r, after, writers*each)
			}
		})
	}
	wg.Wait()
	done.Store(true)
	readers.Wait()
}
