package main

import (
	"testing"
	"time"

	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// Two hubs on one Redis, runs in a runner: a session created with a title
// on hub A keeps it through a titled run; a rename on A reaches a tab on
// hub B; a delete on A is refused while a run is active, then removes the
// session and its runs for both hubs, and B's tab gets the last status.
func TestScaleOut_RenameAndDeleteAcrossHubs(t *testing.T) {
	s := newScaled(t, redistest.Options{}, 2*time.Second)
	a, b := s.hub("hub-a"), s.hub("hub-b")
	s.runner("runner-1")
	tab := dialTab(t, b)
	if err := tab.c.Watch(tab.ctx(), true); err != nil {
		t.Fatal(err)
	}

	run := startHTTP(t, a, `{"tokens":3,"token_ms":0,"tools":0,"title":"a run's own title"}`)
	waitTerminal(t, a, run.RunID, 30*time.Second)
	sid := run.SessionID
	tab.until(20*time.Second, "hub B's tab to see the run end", func() bool { return tab.status[sid].Terminal })
	if got := tab.status[sid].Title; got != "scale" {
		t.Fatalf("title on hub B after a titled run: %q, want the given one", got)
	}

	var st protocol.SessionStatus
	if code := call(t, "PATCH", a.URL()+"/v1/sessions/"+sid, map[string]string{"title": "renamed on A"}, &st); code != 200 || st.Title != "renamed on A" {
		t.Fatalf("rename on A: %d %+v", code, st)
	}
	tab.until(20*time.Second, "hub B's tab to see the new title", func() bool { return tab.status[sid].Title == "renamed on A" })
	if code := call(t, "GET", b.URL()+"/v1/sessions/"+sid, nil, &st); code != 200 || st.Title != "renamed on A" {
		t.Fatalf("hub B's session after the rename: %d %+v", code, st)
	}

	var long protocol.RunStartResult
	body := map[string]any{"message": "long", "metadata": map[string]any{"sim": map[string]any{"tokens": 100000, "token_ms": 10}}}
	if code := call(t, "POST", a.URL()+"/v1/sessions/"+sid+"/runs", body, &long); code != 202 {
		t.Fatalf("start: %d", code)
	}
	var e protocol.ErrorBody
	if code := call(t, "DELETE", b.URL()+"/v1/sessions/"+sid, nil, &e); code != 409 || e.Error == nil || e.Error.Code != protocol.CodeConflict {
		t.Fatalf("delete on B with a run active: %d %+v", code, e.Error)
	}
	cancelHTTP(t, a, long.RunID)
	waitTerminal(t, a, long.RunID, 30*time.Second)
	var res protocol.DeleteSessionResult
	if code := call(t, "DELETE", a.URL()+"/v1/sessions/"+sid, nil, &res); code != 200 || !res.Deleted {
		t.Fatalf("delete on A: %d %+v", code, res)
	}
	tab.until(20*time.Second, "hub B's tab to see the session deleted", func() bool { return tab.status[sid].Deleted })
	for _, p := range []*hubProcess{a, b} {
		for _, path := range []string{"/v1/sessions/" + sid, "/v1/runs/" + run.RunID, "/v1/runs/" + long.RunID + "/events"} {
			if code := call(t, "GET", p.URL()+path, nil, &e); code != 404 {
				t.Fatalf("GET %s on %s after the delete: %d, want 404", path, p.addr, code)
			}
		}
	}
}
