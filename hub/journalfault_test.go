package hub_test

import (
	"context"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// A journal that refuses writes for longer than an append is retried (a
// full disk) fails the run, and refuses its terminal event too: the run
// stays unended in the journal while the fault lasts, and its terminal
// lands, once, when the journal takes writes again — without a restart.
// (The process-level version is TestFault_DiskFull in cmd/hub, make fault.)
func TestJournalFault_TerminalLandsWhenWritesReturn(t *testing.T) {
	th := newTestHubRuntime(t, hub.Config{}, runtimeOpts{Faults: true})
	tab := th.Dial(t)
	res := startRun(t, tab, simStart("", 100000, 1, ""))
	ctx := ctxT(t, 60*time.Second)
	lastSeq := func() (uint64, bool) {
		meta, err := th.Store.Run(ctx, res.RunID) // the store itself, past the fault
		if err != nil {
			t.Fatal(err)
		}
		return meta.LastSeq, meta.Terminal
	}
	waitFor(t, 10*time.Second, "a few events", func() bool { n, _ := lastSeq(); return n >= 10 })
	th.Fault.Failing.Store(true)
	// The driver's append gives up after DefaultAppendRetry (1.6 s), then
	// the terminal append does too; give both time to fail.
	time.Sleep(4 * time.Second)
	stuck, ended := lastSeq()
	if ended {
		t.Fatal("the run ended while the journal refused writes")
	}
	time.Sleep(500 * time.Millisecond)
	if n, _ := lastSeq(); n != stuck {
		t.Fatalf("the journal moved from seq %d to %d while it refused writes", stuck, n)
	}
	th.Fault.Failing.Store(false)
	waitFor(t, 20*time.Second, "the terminal event once writes return", func() bool { _, ended := lastSeq(); return ended })
	events, err := th.Store.Read(context.Background(), res.RunID, 0, 200000)
	if err != nil {
		t.Fatal(err)
	}
	terminals := 0
	for i, e := range events {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if e.Terminal {
			terminals++
		}
	}
	last := events[len(events)-1]
	ep, _ := protocol.DecodePayload[protocol.ErrorPayload](&last)
	if terminals != 1 || last.Type != protocol.EventError || ep.Code != protocol.ErrorInternal || last.Seq != stuck+1 {
		t.Fatalf("%d terminal events; the last %s %s at seq %d (the fault began after seq %d)", terminals, last.Type, last.Payload, last.Seq, stuck)
	}
}

// A session's status load that the journal fails (Redis away, say) is
// tried again until it succeeds: the status of a watched session must not
// stay frozen after the journal comes back. The change here is made on the
// store directly (it announces SessionChanged), so that the hub's reload is
// what meets the fault.
func TestJournalFault_StatusLoadRetried(t *testing.T) {
	th := newTestHubRuntime(t, hub.Config{}, runtimeOpts{Faults: true})
	ctl := th.Dial(t)
	res := startRun(t, ctl, simStart("", 3, 0, ""))
	tab := th.Dial(t)
	ctx := ctxT(t, 30*time.Second)
	if err := tab.Watch(ctx, false, res.SessionID); err != nil {
		t.Fatal(err)
	}
	col := newCollector()
	col.Until(t, tab, 10*time.Second, "the completed status", func() bool {
		return col.Statuses[res.SessionID].Status == protocol.StatusCompleted
	})
	th.Fault.Failing.Store(true)
	if _, err := th.Store.UpdateSession(ctx, res.SessionID, func(m *journal.SessionMeta) error {
		m.Goal = &protocol.GoalUpdatedPayload{Text: "ship it", State: protocol.GoalPaused}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The reload and a retry fail meanwhile: read what comes for 1.5 s.
	rctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	for {
		m, err := tab.Next(rctx)
		if err != nil {
			break
		}
		col.Add(m)
	}
	cancel()
	if g := col.Statuses[res.SessionID].Goal; g != nil {
		t.Fatalf("a status with the goal came while the journal failed: %+v", g)
	}
	th.Fault.Failing.Store(false)
	col.Until(t, tab, 10*time.Second, "the status with the goal once the journal reads again", func() bool {
		g := col.Statuses[res.SessionID].Goal
		return g != nil && g.Text == "ship it"
	})
}
