package journaltest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Benchmark shapes.
const (
	benchRuns       = 100    // concurrent runs in Append100Runs
	benchReplay     = 10_000 // events in the replayed run
	benchReplayPage = 1000   // Read limit while replaying
	benchFillers    = 50     // writers filling the replayed run, and other runs meanwhile
)

// RunBenchmarks measures a backend on the journal's hot paths:
//
//   - AppendOneRun: one writer appending token deltas to one run, each
//     append waiting for its durability (the latency of a lone append);
//   - Append100Runs: 100 runs with one writer each appending at once (the
//     aggregate throughput; reported as events/s);
//   - Replay10k: reading a 10,000-event run in pages of 1000 (the catch-up
//     cost of a focusing tab; ns/op is one whole replay).
//
// Besides ns/op each reports events/s (or ms per replay) and the process
// CPU time per operation (cpu-µs/event, cpu-ms/replay), which stays
// meaningful on a machine busy with other work. open must return a fresh,
// empty store and close it on cleanup.
func RunBenchmarks(b *testing.B, open func(testing.TB) journal.Store) {
	b.Run("AppendOneRun", func(b *testing.B) {
		s := open(b)
		sid, rid := benchRun(b, s, "one")
		e := benchEvent(sid, rid)
		ctx := context.Background()
		b.ReportAllocs()
		m := startMeter()
		for b.Loop() {
			if _, err := s.Append(ctx, e, ""); err != nil {
				b.Fatal(err)
			}
		}
		m.report(b, "event")
	})

	b.Run("Append100Runs", func(b *testing.B) { append100Runs(b, open(b), false) })
	// The executor's appends: each with its idempotency key.
	b.Run("Append100RunsKeyed", func(b *testing.B) { append100Runs(b, open(b), true) })

	// The replayed run is filled once, outside the measured function.
	s := open(b)
	sid, rid := benchRun(b, s, "replay")
	fillRun(b, s, sid, rid, benchReplay)
	b.Run("Replay10k", func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		m := startMeter()
		for b.Loop() {
			var after uint64
			n := 0
			for {
				page, err := s.Read(ctx, rid, after, benchReplayPage)
				if err != nil {
					b.Fatal(err)
				}
				if len(page) == 0 {
					break
				}
				n += len(page)
				after = page[len(page)-1].Seq
			}
			if n != benchReplay {
				b.Fatalf("replayed %d events, want %d", n, benchReplay)
			}
		}
		m.report(b, "replay")
	})
}

// benchRun creates a session with one active run.
func benchRun(b *testing.B, s journal.Store, name string) (string, string) {
	b.Helper()
	ctx := context.Background()
	sid, rid := "bench-sess-"+name, "bench-run-"+name
	if err := s.CreateSession(ctx, journal.SessionMeta{ID: sid, Owner: "bench"}); err != nil {
		b.Fatal(err)
	}
	if err := s.BeginRun(ctx, journal.RunMeta{ID: rid, SessionID: sid}); err != nil {
		b.Fatal(err)
	}
	return sid, rid
}

// benchEvent is a typical token delta.
func benchEvent(sid, rid string) protocol.Envelope {
	return rawEvent(sid, rid, protocol.EventTokenDelta, `{"message_id":"msg-1","text":" the quick brown fox jumps"}`)
}

// fillRun appends n token deltas to a run from benchFillers writers while
// as many other runs append at the same time, so the run's events are
// interleaved with others' in the store, as in a busy hub.
func fillRun(b *testing.B, s journal.Store, sid, rid string, n int) {
	b.Helper()
	ctx := context.Background()
	var done atomic.Bool
	var noise sync.WaitGroup
	for i := range benchFillers {
		nsid, nrid := benchRun(b, s, fmt.Sprint("noise-", i))
		e := benchEvent(nsid, nrid)
		noise.Go(func() {
			for !done.Load() {
				if _, err := s.Append(ctx, e, ""); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	e := benchEvent(sid, rid)
	var wg sync.WaitGroup
	for w := range benchFillers {
		count := n / benchFillers
		if w < n%benchFillers {
			count++
		}
		wg.Go(func() {
			for range count {
				if _, err := s.Append(ctx, e, ""); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	done.Store(true)
	noise.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// meter measures the wall and process CPU time of a benchmark loop. CPU
// time per operation stays meaningful on a busy machine, where wall time
// also counts other processes' turns.
type meter struct {
	wall time.Time
	cpu  time.Duration
	ok   bool
}

func startMeter() meter {
	cpu, ok := processCPU()
	return meter{wall: time.Now(), cpu: cpu, ok: ok}
}

// report adds per-op metrics: ops/s and CPU µs per op for events; wall and
// CPU ms per op for replays.
func (m meter) report(b *testing.B, op string) {
	wall := time.Since(m.wall)
	cpu, ok := processCPU()
	perOp := func(d time.Duration, unit time.Duration) float64 {
		return float64(d) / float64(unit) / float64(b.N)
	}
	switch op {
	case "event":
		b.ReportMetric(float64(b.N)/wall.Seconds(), "events/s")
		if ok && m.ok {
			b.ReportMetric(perOp(cpu-m.cpu, time.Microsecond), "cpu-µs/event")
		}
	default:
		b.ReportMetric(perOp(wall, time.Millisecond), "ms/"+op)
		if ok && m.ok {
			b.ReportMetric(perOp(cpu-m.cpu, time.Millisecond), "cpu-ms/"+op)
		}
	}
}

// append100Runs appends token deltas to benchRuns runs at once, one writer
// per run; keyed gives every append an idempotency key, as the executor
// does.
func append100Runs(b *testing.B, s journal.Store, keyed bool) {
	events := make([]protocol.Envelope, benchRuns)
	for i := range events {
		sid, rid := benchRun(b, s, fmt.Sprint(i))
		events[i] = benchEvent(sid, rid)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	m := startMeter()
	var wg sync.WaitGroup
	for i, e := range events {
		n := b.N / benchRuns
		if i < b.N%benchRuns {
			n++
		}
		wg.Go(func() {
			for k := range n {
				key := ""
				if keyed {
					key = e.RunID + "/" + strconv.Itoa(k)
				}
				if _, err := s.Append(ctx, e, key); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	m.report(b, "event")
}
