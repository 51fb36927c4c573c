package main

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// Presence over two hub processes sharing Redis: a session's status on
// either hub counts the tabs of both (a watch-all tab on hub A, a
// watching and focusing tab and a focusing tab on hub B), and when hub B
// dies without a word its tabs lapse from the count on hub A.
func TestScaleOut_PresenceAcrossHubs(t *testing.T) {
	s := newScaled(t, redistest.Options{}, 2*time.Second)
	a := s.hub("ha")
	b := s.hub("hb")
	var sess protocol.CreateSessionResult
	if code := call(t, "POST", a.URL()+"/v1/sessions", map[string]string{"title": "presence"}, &sess); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	sid := sess.SessionID

	ta := dialTab(t, a)
	if err := ta.c.Watch(ta.ctx(), true); err != nil {
		t.Fatal(err)
	}
	tb := dialTab(t, b)
	tb.c.Watch(tb.ctx(), false, sid)
	tb.c.Focus(tb.ctx(), sid, "")
	tb2 := dialTab(t, b)
	tb2.c.Focus(tb2.ctx(), sid, "")

	is := func(tab *tab, want protocol.Presence) func() bool {
		return func() bool {
			st, ok := tab.status[sid]
			return ok && st.Presence != nil && reflect.DeepEqual(*st.Presence, want)
		}
	}
	both := protocol.Presence{Watching: 2, Focused: 2, Subjects: []protocol.PresenceSubject{{Subject: "local", Watching: 2, Focused: 2}}}
	ta.until(20*time.Second, "hub A's status to count the tabs of both hubs", is(ta, both))
	tb.until(20*time.Second, "hub B's status to count the tabs of both hubs", is(tb, both))
	var st protocol.SessionStatus
	if code := call(t, "GET", a.URL()+"/v1/sessions/"+sid, nil, &st); code != 200 || st.Presence == nil || !reflect.DeepEqual(*st.Presence, both) {
		t.Fatalf("GET on hub A: %d %+v", code, st.Presence)
	}

	b.kill()
	onlyA := protocol.Presence{Watching: 1, Subjects: []protocol.PresenceSubject{{Subject: "local", Watching: 1}}}
	ta.until(60*time.Second, "hub B's tabs to lapse from hub A's status", is(ta, onlyA))
}

// The workbench shows how many tabs view a session, compactly (an eye and
// the count, once more than this tab views it) with who focuses it in the
// tooltip: a second tab (a Go client) that watches and focuses the session
// the workbench shows makes its row read "2" beside the eye, and its leaving takes the
// count away again.
func TestBrowser_PresenceBadge(t *testing.T) {
	w := openWorkbench(t)
	sid, _ := w.startRun("presence", simOpts{tokens: 3, tokenMS: 0})
	waitJS[bool](w, "the run completed", jsBadge(sid)+` === "completed"`, runTimeout)
	sel := jsq(itemSel(w.checkID("session", sid)) + " " + tid("session-presence"))
	waitJS[bool](w, "the workbench's own focus in the tooltip, no count", `(() => { const e = document.querySelector(`+sel+`); return e && e.hidden && e.title === "1 tab viewing · focused: local"; })()`, stateTimeout)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	other, err := client.Dial(ctx, "ws://"+w.hub.addr+"/v1/ws", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	other.Watch(ctx, false, sid)
	other.Focus(ctx, sid, "")
	waitJS[bool](w, `the row to show the eye and 2`,
		`(() => { const e = document.querySelector(`+sel+`); return e && !e.hidden && e.textContent === "2" && e.title === "2 tabs viewing · focused: local"; })()`, stateTimeout)
	other.Close()
	waitJS[bool](w, "the second tab to leave the count",
		`document.querySelector(`+sel+`)?.hidden === true`, stateTimeout)
}
