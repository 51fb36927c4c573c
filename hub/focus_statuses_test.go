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
