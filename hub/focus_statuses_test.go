package hub_test

import (
	"context"
	"testing"
	"time"

	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// statusesFor reads tab's messages for d and counts the statuses of each
// session it was sent.
func statusesFor(t *testing.T, tab *client.Conn, d time.Duration) map[string]int {
	t.Helper()
	got := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		m, err := tab.Next(ctx)
		if err != nil {
			return got
		}
		if s, ok := m.(*protocol.StatusMessage); ok {
			got[s.Session.SessionID]++
		}
	}
}

// A focus switch sends the replay and the statuses of the two sessions
// whose presence it changed (the one left, the one focused), none of the
// other watched sessions' (their statuses did not change).
func TestFocusSwitch_SendsOnlyChangedStatuses(t *testing.T) {
	th := newTestHub(t, hub.Config{StatusInterval: 50 * time.Millisecond})
	ctl := th.Dial(t)
	var sids []string
	var last protocol.ControlResult
	for range 30 {
		last = startRun(t, ctl, simStart("", 3, 0, `,"tools":0`))
		sids = append(sids, last.SessionID)
	}
	for _, sid := range sids {
		m := sessionMeta(t, th, sid)
		waitTerminal(t, th, m.LatestRun())
	}
	tab := th.Dial(t)
	if err := tab.Watch(ctxT(t, 10*time.Second), false, sids...); err != nil {
		t.Fatal(err)
	}
	if got := statusesFor(t, tab, time.Second); len(got) != len(sids) {
		t.Fatalf("the watch sent statuses of %d sessions, want %d", len(got), len(sids))
	}
	for i, sid := range sids[:3] {
		if err := tab.Focus(ctxT(t, 10*time.Second), sid, ""); err != nil {
			t.Fatal(err)
		}
		got := statusesFor(t, tab, 600*time.Millisecond)
		for s := range got {
			if s != sid && (i == 0 || s != sids[i-1]) {
				t.Errorf("focus %d on %s sent the status of %s, whose presence did not change (statuses %v)", i, sid, s, got)
			}
		}
		if got[sid] == 0 {
			t.Errorf("focus %d: no status of the focused session %s (its presence changed): %v", i, sid, got)
		}
	}
}

// The initial watch sends each watched session's status exactly once, to
// the new tab (its snapshot already counts the tab in presence) and to a
// tab that watched them before (whose presence view changed by one tab);
// by id and with watch all alike.
func TestWatch_SendsEachStatusOnce(t *testing.T) {
	th := newTestHub(t, hub.Config{StatusInterval: 50 * time.Millisecond})
	ctl := th.Dial(t)
	var sids []string
	for range 20 {
		res := startRun(t, ctl, simStart("", 3, 0, `,"tools":0`))
		sids = append(sids, res.SessionID)
	}
	for _, sid := range sids {
		m := sessionMeta(t, th, sid)
		waitTerminal(t, th, m.LatestRun())
	}
	check := func(what string, got map[string]int) {
		t.Helper()
		var bad []int
		for _, sid := range sids {
			if got[sid] != 1 {
				bad = append(bad, got[sid])
			}
		}
		if len(bad) > 0 || len(got) != len(sids) {
			t.Errorf("%s: %d of %d sessions' statuses were not sent once (their counts %v; %d sessions in all)", what, len(bad), len(sids), bad, len(got))
		}
	}
	first := th.Dial(t)
	if err := first.Watch(ctxT(t, 10*time.Second), false, sids...); err != nil {
		t.Fatal(err)
	}
	check("the first tab's watch", statusesFor(t, first, time.Second))

	second := th.Dial(t)
	if err := second.Watch(ctxT(t, 10*time.Second), false, sids...); err != nil {
		t.Fatal(err)
	}
	done := make(chan map[string]int)
	go func() { done <- statusesFor(t, first, time.Second) }()
	check("the second tab's watch", statusesFor(t, second, time.Second))
	check("the first tab, when the second watched", <-done)

	third := th.Dial(t)
	if err := third.Watch(ctxT(t, 10*time.Second), true); err != nil {
		t.Fatal(err)
	}
	check("a watch all", statusesFor(t, third, time.Second))
}
