package hub_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

func presenceOf(st protocol.SessionStatus) protocol.Presence {
	if st.Presence == nil {
		return protocol.Presence{}
	}
	return *st.Presence
}

// A session's status counts the tabs that watch it (by id or with watch
// all, a tab once) and focus it, by subject, and follows them as they
// unwatch, unfocus and close.
func TestPresence_CountsTabs(t *testing.T) {
	th := newTestHub(t, withAuth(t, hub.Config{}))
	ctx := ctxT(t, 60*time.Second)
	alice := th.DialToken(t, token(t, "alice", time.Hour, ""))
	sid := startRun(t, alice, simStart("", 2, 0, "")).SessionID
	other := startRun(t, alice, simStart("", 2, 0, "")).SessionID
	if err := alice.Watch(ctx, true); err != nil {
		t.Fatal(err)
	}
	col := newCollector()
	waitOf := func(sid, what string, want protocol.Presence) {
		t.Helper()
		col.Until(t, alice, 20*time.Second, what, func() bool {
			st, ok := col.Statuses[sid]
			return ok && reflect.DeepEqual(presenceOf(st), want)
		})
	}
	wait := func(what string, want protocol.Presence) { t.Helper(); waitOf(sid, what, want) }
	wait("alice's own watch-all tab", protocol.Presence{Watching: 1, Subjects: []protocol.PresenceSubject{{Subject: "alice", Watching: 1}}})

	// A second tab of alice watches all, watches by id too (counted once)
	// and focuses the session.
	alice2 := th.DialToken(t, token(t, "alice", time.Hour, ""))
	alice2.Watch(ctx, true)
	alice2.Watch(ctx, false, sid)
	alice2.Focus(ctx, sid, "")
	// An admin watches it by id and focuses it, and watches the other by
	// id too and all of its own (root's) sessions: alice's, which it
	// watches by id, still count it.
	admin := th.DialToken(t, token(t, "root", time.Hour, "admin"))
	admin.Watch(ctx, false, sid)
	admin.Focus(ctx, sid, "")
	admin.Watch(ctx, true)
	admin.Watch(ctx, false, other)
	wait("two tabs of alice and an admin", protocol.Presence{Watching: 3, Focused: 2, Subjects: []protocol.PresenceSubject{
		{Subject: "alice", Watching: 2, Focused: 1}, {Subject: "root", Watching: 1, Focused: 1}}})
	waitOf(other, "the other session watched by alice's two watch-all tabs and the admin",
		protocol.Presence{Watching: 3, Subjects: []protocol.PresenceSubject{{Subject: "alice", Watching: 2}, {Subject: "root", Watching: 1}}})

	// The admin moves its focus away, then alice2 unwatches all (its by-id
	// watch goes with it) but keeps its focus.
	// The admin unwatches the other by id (still watching all of its own).
	admin.Focus(ctx, other, "")
	admin.Unwatch(ctx, false, other)
	alice2.Unwatch(ctx, true)
	wait("the admin focused elsewhere, alice2 only focusing", protocol.Presence{Watching: 2, Focused: 1, Subjects: []protocol.PresenceSubject{
		{Subject: "alice", Watching: 1, Focused: 1}, {Subject: "root", Watching: 1}}})
	waitOf(other, "the other: alice's first tab, the admin's focus", protocol.Presence{Watching: 1, Focused: 1, Subjects: []protocol.PresenceSubject{
		{Subject: "alice", Watching: 1}, {Subject: "root", Focused: 1}}})

	// Closed tabs leave.
	alice2.Close()
	admin.Close()
	wait("only alice's first tab", protocol.Presence{Watching: 1, Subjects: []protocol.PresenceSubject{{Subject: "alice", Watching: 1}}})

	// HTTP answers carry the presence, also of a session no tab watches
	// (bob's, which a tab of bob only focuses).
	var st protocol.SessionStatus
	do(t, "GET", th.URL+"/v1/sessions/"+sid, "", bearerOf(token(t, "alice", time.Hour, "")), &st)
	if p := presenceOf(st); p.Watching != 1 {
		t.Errorf("GET session presence %+v", p)
	}
	bobTok := token(t, "bob", time.Hour, "")
	bob := th.DialToken(t, bobTok)
	bsid := startRun(t, bob, simStart("", 2, 0, "")).SessionID
	bob.Focus(ctx, bsid, "")
	bob.Send(ctx, protocol.Ping{Type: protocol.MsgPing, ID: "sync"})
	want := protocol.Presence{Focused: 1, Subjects: []protocol.PresenceSubject{{Subject: "bob", Focused: 1}}}
	waitFor(t, 10*time.Second, "bob's focus in GET /v1/sessions/{sid}", func() bool {
		var st protocol.SessionStatus
		do(t, "GET", th.URL+"/v1/sessions/"+bsid, "", bearerOf(bobTok), &st)
		return reflect.DeepEqual(presenceOf(st), want)
	})
	var list protocol.SessionList
	do(t, "GET", th.URL+"/v1/sessions", "", bearerOf(bobTok), &list)
	if len(list.Sessions) != 1 || !reflect.DeepEqual(presenceOf(list.Sessions[0]), want) {
		t.Errorf("GET /v1/sessions: %+v", list.Sessions)
	}
}
