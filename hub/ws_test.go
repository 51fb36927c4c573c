package hub_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/protocol"
)

// Three sessions run, all watched, one focused: only the focused run's
// events arrive, complete and in order, and every status ends completed.
func TestWS_WatchAllFocusOne(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	ctl := th.Dial(t)
	tab := th.Dial(t)
	ctx := ctxT(t, 30*time.Second)
	if err := tab.Watch(ctx, true); err != nil {
		t.Fatal(err)
	}
	const tokens = 30
	var runs [3]protocol.ControlResult
	for i := range runs {
		runs[i] = startRun(t, ctl, simStart("", tokens, 5, ""))
	}
	focused := runs[1]
	if err := tab.Focus(ctx, focused.SessionID, ""); err != nil {
		t.Fatal(err)
	}
	col := newCollector()
	col.Until(t, tab, 20*time.Second, "all three completed", func() bool {
		if !col.TerminalOf(focused.RunID) {
			return false
		}
		for _, r := range runs {
			if st, ok := col.Statuses[r.SessionID]; !ok || st.Status != protocol.StatusCompleted {
				return false
			}
		}
		return true
	})
	for _, e := range col.Events {
		if e.SessionID != focused.SessionID {
			t.Fatalf("event of unfocused session %s: %+v", e.SessionID, e)
		}
	}
	if got, want := checkRun(t, col.Events, focused.RunID), sim.Text(tokens); got != want {
		t.Fatalf("token text:\n got %q\nwant %q", got, want)
	}
	if len(col.Replayed) != 1 || col.Replayed[0].SessionID != focused.SessionID {
		t.Fatalf("want one replayed marker for the focus, got %+v", col.Replayed)
	}
	for _, r := range runs {
		st := col.Statuses[r.SessionID]
		if st.RunID != r.RunID || !st.Terminal || st.TerminalState != protocol.StatusCompleted || st.Tokens != tokens {
			t.Fatalf("status of %s: %+v", r.SessionID, st)
		}
	}
}

// A tab that disconnects mid-run reconnects, focuses with its cursor and
// gets the rest: nothing twice, nothing missing.
func TestWS_ReconnectWithCursor(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	ctl := th.Dial(t)
	const tokens = 80
	run := startRun(t, ctl, simStart("", tokens, 10, ""))

	ctx := ctxT(t, 30*time.Second)
	tab1, err := client.Dial(ctx, th.WSURL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tab1.Focus(ctx, run.SessionID, "")
	first := newCollector()
	first.Until(t, tab1, 10*time.Second, "some tokens", func() bool { return len(first.Events) >= 20 })
	tab1.Close() // mid-run
	last := first.Events[len(first.Events)-1]
	if last.Terminal {
		t.Fatal("run ended before the disconnect; make it longer")
	}

	tab2 := th.Dial(t)
	tab2.Focus(ctx, run.SessionID, last.EventID)
	rest := newCollector()
	rest.Until(t, tab2, 20*time.Second, "terminal", func() bool { return rest.TerminalOf(run.RunID) })
	if rest.Events[0].Seq != last.Seq+1 {
		t.Fatalf("resumed at seq %d, want %d", rest.Events[0].Seq, last.Seq+1)
	}
	all := append(append([]protocol.Envelope{}, first.Events...), rest.Events...)
	if got := checkRun(t, all, run.RunID); got != sim.Text(tokens) {
		t.Fatalf("token text after reconnect: %q", got)
	}
}

// Switching focus back and forth replays each session's run in full.
func TestWS_SwitchFocusReplays(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	ctl := th.Dial(t)
	a := startRun(t, ctl, simStart("", 40, 5, ""))
	b := startRun(t, ctl, simStart("", 60, 5, ""))
	tab := th.Dial(t)
	ctx := ctxT(t, 60*time.Second)
	for i, target := range []protocol.ControlResult{a, b, a, b, a} {
		tab.Focus(ctx, target.SessionID, "")
		col := newCollector()
		// Skip what the previous focus left in flight: everything up to and
		// including this focus's replayed marker belongs to this focus only
		// if it names this session.
		col.Until(t, tab, 20*time.Second, "terminal", func() bool {
			// drop events of other sessions that were in flight
			kept := col.Events[:0]
			for _, e := range col.Events {
				if e.SessionID == target.SessionID {
					kept = append(kept, e)
				}
			}
			col.Events = kept
			return col.TerminalOf(target.RunID)
		})
		want := map[string]int{a.RunID: 40, b.RunID: 60}[target.RunID]
		if got := checkRun(t, col.Events, target.RunID); got != sim.Text(want) {
			t.Fatalf("switch %d: text %q", i, got)
		}
	}
}

// A cursor from the first run of a session replays the rest of it and the
// whole of the later run; a bad cursor is answered bad_cursor and the
// latest run replays from seq 1.
func TestWS_CursorAcrossRunsAndBadCursor(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	ctl := th.Dial(t)
	r1 := startRun(t, ctl, simStart("", 10, 0, ""))
	waitTerminal(t, th, r1.RunID)
	r2 := startRun(t, ctl, simStart(r1.SessionID, 12, 0, ""))
	waitTerminal(t, th, r2.RunID)

	tab := th.Dial(t)
	ctx := ctxT(t, 20*time.Second)
	tab.Focus(ctx, r1.SessionID, protocol.EventID(r1.RunID, 3))
	col := newCollector()
	col.Until(t, tab, 10*time.Second, "replayed", func() bool { return len(col.Replayed) == 1 })
	if col.Events[0].RunID != r1.RunID || col.Events[0].Seq != 4 {
		t.Fatalf("first replayed event %s, want %s:4", col.Events[0].EventID, r1.RunID)
	}
	var r1Events, r2Events []protocol.Envelope
	for _, e := range col.Events {
		if e.RunID == r1.RunID {
			r1Events = append(r1Events, e)
		} else {
			r2Events = append(r2Events, e)
		}
	}
	if !r1Events[len(r1Events)-1].Terminal {
		t.Fatal("run 1 replay did not reach its terminal event")
	}
	if got := checkRun(t, r2Events, r2.RunID); got != sim.Text(12) {
		t.Fatalf("run 2 text %q", got)
	}
	if want := r2Events[len(r2Events)-1].EventID; col.Replayed[0].Cursor != want || col.Replayed[0].Count != len(col.Events) {
		t.Fatalf("replayed marker %+v, want cursor %s count %d", col.Replayed[0], want, len(col.Events))
	}

	for _, bad := range []string{"garbage", protocol.EventID("r_unknown", 1), protocol.EventID(r2.RunID, 9999)} {
		tab.Focus(ctx, r1.SessionID, bad)
		col := newCollector()
		col.Until(t, tab, 10*time.Second, "replayed after bad cursor", func() bool { return len(col.Replayed) == 1 })
		if len(col.Errors) == 0 || col.Errors[0].Code != protocol.CodeBadCursor {
			t.Fatalf("cursor %q: want bad_cursor error, got %+v", bad, col.Errors)
		}
		if got := checkRun(t, col.Events, r2.RunID); got != sim.Text(12) {
			t.Fatalf("fallback replay text %q", got)
		}
	}
	// A cursor of another session is bad too.
	other := startRun(t, ctl, simStart("", 2, 0, ""))
	waitTerminal(t, th, other.RunID)
	tab.Focus(ctx, r1.SessionID, protocol.EventID(other.RunID, 1))
	col = newCollector()
	col.Until(t, tab, 10*time.Second, "replayed", func() bool { return len(col.Replayed) == 1 })
	if len(col.Errors) == 0 || col.Errors[0].Code != protocol.CodeBadCursor {
		t.Fatalf("foreign cursor: want bad_cursor, got %+v", col.Errors)
	}
}

// A completed, a failed and a cancelled run each replay to a new tab
// their own terminal event (done, error, cancelled) exactly once and last;
// a cursor just before the terminal replays the terminal alone, and a
// cursor at it replays nothing of the run.
func TestWS_TerminalReplayEveryEnd(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	ctl := th.Dial(t)
	ctx := ctxT(t, 60*time.Second)
	completed := startRun(t, ctl, simStart("", 5, 0, ""))
	failed := startRun(t, ctl, simStart("", 4, 0, `,"fail":"error"`))
	cancelled := startRun(t, ctl, simStart("", 5000, 5, `,"tools":0`))
	waitEvent(t, th, cancelled.RunID, "a token", isType(protocol.EventTokenDelta))
	if res, err := ctl.Control(ctx, protocol.Control{Op: protocol.OpCancel, RunID: cancelled.RunID}); err != nil || res.Status != protocol.ResultAccepted {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	runs := []struct {
		run protocol.ControlResult
		end protocol.EventType
	}{{completed, protocol.EventDone}, {failed, protocol.EventError}, {cancelled, protocol.EventCancelled}}
	for _, r := range runs {
		waitTerminal(t, th, r.run.RunID)
	}

	tab := th.Dial(t)
	replay := func(sid, cursor string) []protocol.Envelope {
		t.Helper()
		if err := tab.Focus(ctx, sid, cursor); err != nil {
			t.Fatal(err)
		}
		col := newCollector()
		col.Until(t, tab, 10*time.Second, "replayed", func() bool { return len(col.Replayed) == 1 })
		if len(col.Errors) != 0 {
			t.Fatalf("focus %s at %q: errors %+v", sid, cursor, col.Errors)
		}
		return col.Events
	}
	for _, r := range runs {
		evs := replay(r.run.SessionID, "")
		checkRun(t, evs, r.run.RunID) // seq 1..N, one terminal, last
		last := evs[len(evs)-1]
		if last.RunID != r.run.RunID || last.Type != r.end {
			t.Fatalf("run ending %s replayed %s %s last", r.end, last.Type, last.EventID)
		}
		tail := replay(r.run.SessionID, protocol.EventID(r.run.RunID, last.Seq-1))
		if len(tail) != 1 || tail[0].EventID != last.EventID || tail[0].Type != r.end {
			t.Fatalf("run ending %s: replay after seq %d gave %d events, want its terminal alone", r.end, last.Seq-1, len(tail))
		}
		for _, e := range replay(r.run.SessionID, last.EventID) {
			if e.RunID == r.run.RunID {
				t.Fatalf("run ending %s: replay after its terminal gave %s %s", r.end, e.Type, e.EventID)
			}
		}
	}
}

// Bad input gets error frames and the socket keeps working; a frame over
// the size limit closes it with 1009.
func TestWS_BadInput(t *testing.T) {
	th := newTestHub(t, hub.Config{MaxFrameBytes: 4096})
	tab := th.Dial(t)
	ctx := ctxT(t, 20*time.Second)
	cases := []struct {
		frame string
		code  protocol.Code
	}{
		{`{not json`, protocol.CodeBadRequest},
		{`{"type":"teleport"}`, protocol.CodeBadRequest},
		{`{"type":"focus"}`, protocol.CodeBadRequest},
		{`{"type":"control","id":"c1","op":"start"}`, protocol.CodeBadRequest},
		{`{"type":"watch","sessions":"s1"}`, protocol.CodeBadRequest},
		{`{"type":"control","id":"c2","op":"cancel","run_id":"r_nope"}`, protocol.CodeNotFound},
		{`[1,2,3]`, protocol.CodeBadRequest},
	}
	for _, tc := range cases {
		if err := tab.SendRaw(ctx, []byte(tc.frame)); err != nil {
			t.Fatal(err)
		}
		col := newCollector()
		col.Until(t, tab, 5*time.Second, "error for "+tc.frame, func() bool { return len(col.Errors) > 0 })
		if col.Errors[0].Code != tc.code {
			t.Fatalf("%s: code %s (%s), want %s", tc.frame, col.Errors[0].Code, col.Errors[0].Message, tc.code)
		}
	}
	// Still alive.
	tab.Send(ctx, protocol.Ping{Type: protocol.MsgPing, ID: "p1"})
	col := newCollector()
	col.Until(t, tab, 5*time.Second, "pong", func() bool { return len(col.Other) > 0 })
	if p, ok := col.Other[0].(*protocol.Pong); !ok || p.ID != "p1" {
		t.Fatalf("want pong p1, got %+v", col.Other[0])
	}
	// Too big: 1009.
	big := `{"type":"ping","id":"` + strings.Repeat("x", 8000) + `"}`
	tab.SendRaw(ctx, []byte(big))
	select {
	case <-tab.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("socket not closed after an oversized frame")
	}
	if got := client.CloseStatus(tab.Err()); got != int(websocket.StatusMessageTooBig) {
		t.Fatalf("close status %d, want 1009 (err %v)", got, tab.Err())
	}
}

// The first message must be hello.
func TestWS_HelloFirst(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	ctx := ctxT(t, 10*time.Second)
	ws, _, err := websocket.Dial(ctx, th.WSURL, &websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.Write(ctx, websocket.MessageText, []byte(`{"type":"ping","id":"x"}`))
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var em protocol.ErrorMessage
	json.Unmarshal(data, &em)
	if em.Type != protocol.MsgError || em.Code != protocol.CodeProtocol {
		t.Fatalf("want protocol_error, got %s", data)
	}
	_, _, err = ws.Read(ctx)
	if websocket.CloseStatus(err) != protocol.CloseProtocol {
		t.Fatalf("want close %d, got %v", protocol.CloseProtocol, err)
	}
}

// A socket that sends no valid hello within HelloTimeout gets
// protocol_error and close 4400, junk meanwhile or not; one that said hello
// in time outlives the bound.
func TestWS_HelloTimeout(t *testing.T) {
	const bound = 300 * time.Millisecond
	th := newTestHub(t, hub.Config{HelloTimeout: bound})
	ctx := ctxT(t, 20*time.Second)
	for _, junk := range []string{"", `{not json`, `{"type":"hello"}`} {
		ws, _, err := websocket.Dial(ctx, th.WSURL, &websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if junk != "" {
			ws.Write(ctx, websocket.MessageText, []byte(junk))
		}
		var em protocol.ErrorMessage
		for em.Code != protocol.CodeProtocol {
			_, data, err := ws.Read(ctx)
			if err != nil {
				t.Fatalf("junk %q: no protocol_error before %v", junk, err)
			}
			json.Unmarshal(data, &em)
		}
		if em.Ref != protocol.MsgHello {
			t.Fatalf("junk %q: ref %q, want hello", junk, em.Ref)
		}
		_, _, err = ws.Read(ctx)
		if websocket.CloseStatus(err) != protocol.CloseProtocol {
			t.Fatalf("junk %q: want close %d, got %v", junk, protocol.CloseProtocol, err)
		}
		// The hub's clock starts at its accept, a little before the
		// dial returns here: allow that much early.
		if el := time.Since(start); el < bound-50*time.Millisecond || el > bound+5*time.Second {
			t.Fatalf("junk %q: closed after %v, bound %v", junk, el, bound)
		}
		ws.CloseNow()
	}
	tab := th.Dial(t) // says hello
	time.Sleep(3 * bound)
	tab.Send(ctx, protocol.Ping{Type: protocol.MsgPing, ID: "p1"})
	col := newCollector()
	col.Until(t, tab, 5*time.Second, "pong", func() bool { return len(col.Other) > 0 })
	if p, ok := col.Other[0].(*protocol.Pong); !ok || p.ID != "p1" {
		t.Fatalf("want pong p1, got %+v", col.Other[0])
	}
	waitFor(t, 5*time.Second, "one socket left", func() bool { return th.Hub.Conns() == 1 })
}

// Shutdown sends goaway and closes with 1012.
func TestWS_ShutdownGoaway(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	tab := th.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go th.Hub.Shutdown(ctx)
	col := newCollector()
	col.Until(t, tab, 5*time.Second, "goaway", func() bool { return len(col.Other) > 0 })
	if g, ok := col.Other[0].(*protocol.Goaway); !ok || g.ReconnectAfterMS <= 0 {
		t.Fatalf("want goaway, got %+v", col.Other[0])
	}
	<-tab.Done()
	if got := client.CloseStatus(tab.Err()); got != protocol.CloseServiceRestart {
		t.Fatalf("close %d, want 1012", got)
	}
}

// heldBus is a journal whose run tails can be held: events are journaled
// but not delivered live, as when the bus is a moment behind the journal.
type heldBus struct {
	journal.Store
	held atomic.Bool
}

func (b *heldBus) SubscribeRun(runID string, fn func(protocol.Envelope)) func() {
	return b.Store.SubscribeRun(runID, func(e protocol.Envelope) {
		if !b.held.Load() {
			fn(e)
		}
	})
}

// The events journaled just before a shutdown (the drain's interrupted
// terminals) reach the focused tab before the goaway, even when their live
// delivery has not come: the hub reads each focus to the journal's end
// before it closes the sockets.
func TestWS_ShutdownDeliversWhatTheJournalHolds(t *testing.T) {
	store := &heldBus{Store: mem.New(mem.Options{})}
	t.Cleanup(func() { store.Store.Close() })
	th := newTestHubRuntime(t, hub.Config{}, runtimeOpts{Shared: store})
	tab := th.Dial(t)
	ctx := ctxT(t, 20*time.Second)
	res := startRun(t, tab, simStart("", 100000, 20, ""))
	if err := tab.Focus(ctx, res.SessionID, ""); err != nil {
		t.Fatal(err)
	}
	col := newCollector()
	col.Until(t, tab, 10*time.Second, "5 events", func() bool { return len(col.Events) >= 5 })
	store.held.Store(true)
	th.RT.Close() // the run ends interrupted, in the journal only
	last := terminal(t, th, res.RunID)
	go th.Hub.Shutdown(ctx)
	for {
		m, err := tab.Next(ctx)
		if err != nil {
			break
		}
		if _, ok := m.(*protocol.Goaway); ok && !col.TerminalOf(res.RunID) {
			t.Fatalf("goaway before the run's terminal event (tab has %d events, the journal %d)", len(col.Events), last[len(last)-1].Seq)
		}
		col.Add(m)
	}
	if client.CloseStatus(tab.Err()) != protocol.CloseServiceRestart {
		t.Fatalf("close %v, want 1012", tab.Err())
	}
	checkRun(t, col.Events, res.RunID)
	if n := len(col.Events); uint64(n) != last[len(last)-1].Seq {
		t.Fatalf("the tab has %d events, the journal %d", n, last[len(last)-1].Seq)
	}
}
