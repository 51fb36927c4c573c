package hub_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/memshare"
	"github.com/runhub/runhub/protocol"
)

// Two hubs sharing one memshare.Space count a subject's sockets over both:
// the socket past MaxSocketsPerSubject is refused on the other hub too.
func TestMemShare_SocketsAcrossHubs(t *testing.T) {
	space := memshare.New()
	a := newTestHub(t, withAuth(t, hub.Config{MaxSocketsPerSubject: 1, SocketCounter: space.Counter()}))
	b := newTestHubRuntime(t, withAuth(t, hub.Config{MaxSocketsPerSubject: 1, SocketCounter: space.Counter()}), runtimeOpts{Shared: a.Store})
	alice := token(t, "alice", time.Hour, "")
	first := a.DialToken(t, alice)
	ws := rawSocket(t, b, nil)
	sendRaw(t, ws, `{"type":"hello","client":"t","token":"`+alice+`"}`)
	if got, code := readToClose(t, ws, 5*time.Second); code != protocol.ClosePolicy || len(got) != 1 || got[0] != "error:limit_exceeded" {
		t.Fatalf("alice's second socket, on the other hub: %v close %d", got, code)
	}
	b.DialToken(t, token(t, "bob", time.Hour, ""))
	first.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := client.Dial(ctxT(t, 5*time.Second), b.WSURL, client.Options{Token: alice})
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's slot was not freed on the other hub: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two hubs sharing one memshare.Space show a session's presence over both.
func TestMemShare_PresenceAcrossHubs(t *testing.T) {
	space := memshare.New()
	a := newTestHub(t, withAuth(t, hub.Config{PresenceStore: space.Presence()}))
	b := newTestHubRuntime(t, withAuth(t, hub.Config{PresenceStore: space.Presence()}), runtimeOpts{Shared: a.Store})
	ctx := ctxT(t, 30*time.Second)
	alice := a.DialToken(t, token(t, "alice", time.Hour, ""))
	sid := startRun(t, alice, simStart("", 2, 0, "")).SessionID
	if err := alice.Watch(ctx, true); err != nil {
		t.Fatal(err)
	}
	there := b.DialToken(t, token(t, "alice", time.Hour, ""))
	if err := there.Watch(ctx, false, sid); err != nil {
		t.Fatal(err)
	}
	if err := there.Focus(ctx, sid, ""); err != nil {
		t.Fatal(err)
	}
	want := protocol.Presence{Watching: 2, Focused: 1, Subjects: []protocol.PresenceSubject{{Subject: "alice", Watching: 2, Focused: 1}}}
	col := newCollector()
	col.Until(t, alice, 20*time.Second, "alice's tabs on both hubs", func() bool {
		st, ok := col.Statuses[sid]
		return ok && reflect.DeepEqual(presenceOf(st), want)
	})
}

// With presence shared over two hubs, a watch still sends each status
// once: the tab on the second hub gets one status per session that already
// counts the first hub's tab and its own (or, when the shared presence
// reaches its hub after the snapshot, a second one that counts them: a
// change, never a repeat), and the first hub's tab one status per session
// (its count grew by one tab).
func TestMemShare_WatchSendsEachStatusOnce(t *testing.T) {
	space := memshare.New()
	a := newTestHub(t, withAuth(t, hub.Config{PresenceStore: space.Presence(), StatusInterval: 50 * time.Millisecond}))
	b := newTestHubRuntime(t, withAuth(t, hub.Config{PresenceStore: space.Presence(), StatusInterval: 50 * time.Millisecond}), runtimeOpts{Shared: a.Store})
	ctl := a.DialToken(t, token(t, "alice", time.Hour, ""))
	var sids []string
	for range 10 {
		sids = append(sids, startRun(t, ctl, simStart("", 2, 0, `,"tools":0`)).SessionID)
	}
	for _, sid := range sids {
		m := sessionMeta(t, a, sid)
		waitTerminal(t, a, m.LatestRun())
	}
	once := func(what string, got map[string]int) {
		t.Helper()
		for _, sid := range sids {
			if got[sid] != 1 {
				t.Errorf("%s: statuses per session %v, want 1 each of %d", what, got, len(sids))
				return
			}
		}
	}
	here := a.DialToken(t, token(t, "alice", time.Hour, ""))
	if err := here.Watch(ctxT(t, 10*time.Second), false, sids...); err != nil {
		t.Fatal(err)
	}
	once("the first hub's tab", statusesFor(t, here, time.Second))
	there := b.DialToken(t, token(t, "alice", time.Hour, ""))
	if err := there.Watch(ctxT(t, 10*time.Second), false, sids...); err != nil {
		t.Fatal(err)
	}
	done := make(chan map[string]int)
	go func() { done <- statusesFor(t, here, 1500*time.Millisecond) }()
	// The second hub's tab: a status per session, and a second one only
	// when the shared presence reached its hub after the snapshot (its
	// own tab counted late: a change, never the same status again).
	var last protocol.StatusMessage
	got := map[string]int{}
	prev := map[string]protocol.Presence{}
	ctx := ctxT(t, 1500*time.Millisecond)
	for {
		m, err := there.Next(ctx)
		if err != nil {
			break
		}
		if s, ok := m.(*protocol.StatusMessage); ok {
			sid, p := s.Session.SessionID, presenceOf(*s.Session)
			if q, seen := prev[sid]; !seen || !reflect.DeepEqual(p, q) {
				got[sid]++ // a status that changed what the tab knew
			} else {
				t.Errorf("the second hub's tab: session %s sent again unchanged: %+v", sid, p)
			}
			prev[sid] = p
			last = *s
		}
	}
	for _, sid := range sids {
		if got[sid] < 1 || got[sid] > 2 {
			t.Errorf("the second hub's tab: statuses per session %v, want 1 each of %d (2 where presence changed after the snapshot)", got, len(sids))
			break
		}
	}
	if last.Session == nil || presenceOf(*last.Session).Watching != 2 {
		t.Errorf("the second hub's tab saw presence %+v, want 2 watching", last.Session)
	}
	once("the first hub's tab, when the second watched", <-done)
}
