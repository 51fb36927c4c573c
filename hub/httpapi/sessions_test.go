package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/protocol"
)

// GET /v1/sessions/{sid}/runs pages a session's runs newest first, with
// each run's status, prompt and source; before and limit are checked.
func TestAPI_SessionRuns(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	var sess protocol.CreateSessionResult
	if code := hubtest.Do(t, "POST", th.URL+"/v1/sessions", `{"title":"history"}`, nil, &sess); code != 201 {
		t.Fatalf("create: %d", code)
	}
	base := th.URL + "/v1/sessions/" + sess.SessionID + "/runs"
	var st protocol.SessionStatus
	if hubtest.Do(t, "GET", th.URL+"/v1/sessions/"+sess.SessionID, "", nil, &st); st.CreatedAt == 0 || st.CreatedAt != st.UpdatedAt {
		t.Fatalf("a new session's created_at %v, updated_at %v", st.CreatedAt, st.UpdatedAt)
	}
	var empty protocol.RunList
	if code := hubtest.Do(t, "GET", base, "", nil, &empty); code != 200 || empty.Runs == nil || len(empty.Runs) != 0 || empty.More {
		t.Fatalf("runs of a new session: %d %+v", code, empty)
	}
	var rids []string
	for i, body := range []string{
		`{"message":"first prompt","metadata":{"sim":{"tokens":3,"token_ms":0,"tools":0}}}`,
		`{"message":"second prompt","metadata":{"sim":{"tokens":3,"token_ms":0,"tools":0,"fail":"error"}}}`,
		`{"message":"third prompt ` + strings.Repeat("x", 300) + `","metadata":{"sim":{"tokens":3,"token_ms":0,"tools":0}}}`,
	} {
		var start protocol.RunStartResult
		if code := hubtest.Do(t, "POST", base, body, nil, &start); code != 202 {
			t.Fatalf("start %d: %d", i, code)
		}
		hubtest.WaitTerminal(t, th, start.RunID)
		rids = append(rids, start.RunID)
	}
	// A fourth run, still active.
	var active protocol.RunStartResult
	if code := hubtest.Do(t, "POST", base, `{"message":"fourth","source":"api","metadata":{"sim":{"tokens":100000,"token_ms":5,"tools":0}}}`, nil, &active); code != 202 {
		t.Fatalf("start 4: %d", code)
	}
	rids = append(rids, active.RunID)

	var page protocol.RunList
	if code := hubtest.Do(t, "GET", base+"?limit=2", "", nil, &page); code != 200 || len(page.Runs) != 2 || !page.More {
		t.Fatalf("first page: %d %+v", code, page)
	}
	if r := page.Runs[0]; r.RunID != rids[3] || r.Terminal || r.Status == "" || r.Status.Terminal() || r.Message != "fourth" || r.Source != "api" || r.SessionID != sess.SessionID {
		t.Fatalf("newest run %+v, want the active fourth", r)
	}
	third := page.Runs[1]
	if third.RunID != rids[2] || third.Status != protocol.StatusCompleted || !third.Terminal || third.TerminalState != protocol.StatusCompleted ||
		third.LastSeq == 0 || third.CreatedAt == 0 || third.EndedAt < third.CreatedAt || third.Source != "user" ||
		len(third.Message) != protocol.RunSummaryMessageBytes+len("…") || !strings.HasPrefix(third.Message, "third prompt xx") {
		t.Fatalf("third run %+v", third)
	}
	if code := hubtest.Do(t, "GET", base+"?limit=2&before="+page.Runs[1].RunID, "", nil, &page); code != 200 || len(page.Runs) != 2 || page.More {
		t.Fatalf("second page: %d %+v", code, page)
	}
	if page.Runs[0].RunID != rids[1] || page.Runs[0].Status != protocol.StatusFailed || page.Runs[1].RunID != rids[0] ||
		page.Runs[1].Status != protocol.StatusCompleted || page.Runs[1].Message != "first prompt" {
		t.Fatalf("second page %+v", page.Runs)
	}
	if code := hubtest.Do(t, "GET", base+"?before="+rids[0], "", nil, &page); code != 200 || len(page.Runs) != 0 || page.More {
		t.Fatalf("before the first run: %d %+v", code, page)
	}
	if code := hubtest.Do(t, "GET", base, "", nil, &page); code != 200 || len(page.Runs) != 4 || page.More {
		t.Fatalf("default page: %d %+v", code, page)
	}

	var bad protocol.ErrorBody
	for _, q := range []string{"?limit=0", "?limit=101", "?limit=x", "?before=r_nope", "?before=" + rids[0] + "x"} {
		if code := hubtest.Do(t, "GET", base+q, "", nil, &bad); code != 400 || bad.Error == nil || bad.Error.Code != protocol.CodeBadRequest {
			t.Fatalf("%s: %d %+v, want 400 bad_request", q, code, bad.Error)
		}
	}
	if code := hubtest.Do(t, "GET", th.URL+"/v1/sessions/s_nope/runs", "", nil, &bad); code != 404 {
		t.Fatalf("unknown session: %d", code)
	}
	hubtest.Do(t, "POST", th.URL+"/v1/runs/"+active.RunID+"/cancel", "", nil, nil)
	hubtest.WaitTerminal(t, th, active.RunID)
	deadline := time.Now().Add(10 * time.Second)
	for {
		hubtest.Do(t, "GET", base+"?limit=1", "", nil, &page)
		if page.Runs[0].Status == protocol.StatusCancelled || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if page.Runs[0].Status != protocol.StatusCancelled || page.Runs[0].TerminalState != protocol.StatusCancelled {
		t.Fatalf("cancelled run %+v", page.Runs[0])
	}
}

// sessionTitle is the title GET /v1/sessions/{sid} answers.
func sessionTitle(t *testing.T, th *hubtest.Hub, sid string) string {
	t.Helper()
	var st protocol.SessionStatus
	if code := hubtest.Do(t, "GET", th.URL+"/v1/sessions/"+sid, "", nil, &st); code != 200 {
		t.Fatalf("session %s: %d", sid, code)
	}
	return st.Title
}

// httpSimRun starts a sim run with the given title.updated title and waits
// for its end.
func httpSimRun(t *testing.T, th *hubtest.Hub, sid, title string) string {
	t.Helper()
	var start protocol.RunStartResult
	body := `{"message":"hello","metadata":{"sim":{"tokens":2,"token_ms":0,"tools":0,"title":"` + title + `"}}}`
	if code := hubtest.Do(t, "POST", th.URL+"/v1/sessions/"+sid+"/runs", body, nil, &start); code != 202 {
		t.Fatalf("start: %d", code)
	}
	hubtest.WaitTerminal(t, th, start.RunID)
	return start.RunID
}

// A session keeps the title it was given; an untitled one takes its first
// run's title and keeps it; PATCH renames it (watchers see the new title)
// and no later run renames it back.
func TestAPI_SessionTitleAndRename(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	c := th.Dial(t)
	if err := c.Watch(hubtest.Ctx(t, 10*time.Second), true); err != nil {
		t.Fatal(err)
	}
	var given, untitled protocol.CreateSessionResult
	hubtest.Do(t, "POST", th.URL+"/v1/sessions", `{"title":"given title"}`, nil, &given)
	hubtest.Do(t, "POST", th.URL+"/v1/sessions", `{}`, nil, &untitled)
	httpSimRun(t, th, given.SessionID, "a run's title")
	if got := sessionTitle(t, th, given.SessionID); got != "given title" {
		t.Fatalf("titled session after a run: %q, want its given title", got)
	}
	httpSimRun(t, th, untitled.SessionID, "first run title")
	httpSimRun(t, th, untitled.SessionID, "second run title")
	if got := sessionTitle(t, th, untitled.SessionID); got != "first run title" {
		t.Fatalf("untitled session after two runs: %q, want the first run's title", got)
	}
	if m, err := th.Store.Session(hubtest.Ctx(t, 5*time.Second), untitled.SessionID); err != nil || m.Title != "first run title" {
		t.Fatalf("the first run's title is not kept in the session's record: %+v %v", m, err)
	}

	var st protocol.SessionStatus
	if code := hubtest.Do(t, "PATCH", th.URL+"/v1/sessions/"+given.SessionID, `{"title":"  renamed  "}`, nil, &st); code != 200 || st.Title != "renamed" || st.SessionID != given.SessionID {
		t.Fatalf("rename: %d %+v", code, st)
	}
	httpSimRun(t, th, given.SessionID, "yet another run title")
	if got := sessionTitle(t, th, given.SessionID); got != "renamed" {
		t.Fatalf("renamed session after a run: %q", got)
	}
	col := hubtest.NewCollector()
	col.Until(t, c, 10*time.Second, "the watcher to see the new title", func() bool {
		return col.Statuses[given.SessionID].Title == "renamed"
	})

	var bad protocol.ErrorBody
	for body, want := range map[string]int{`{}`: 400, `{"title":"   "}`: 400, `{"title":7}`: 400, `{"title":"` + strings.Repeat("x", 513) + `"}`: 413} {
		if code := hubtest.Do(t, "PATCH", th.URL+"/v1/sessions/"+given.SessionID, body, nil, &bad); code != want {
			t.Fatalf("rename with %s: %d %+v, want %d", body, code, bad.Error, want)
		}
	}
	if code := hubtest.Do(t, "PATCH", th.URL+"/v1/sessions/s_nope", `{"title":"x"}`, nil, &bad); code != 404 {
		t.Fatalf("rename an unknown session: %d", code)
	}
	if got := sessionTitle(t, th, given.SessionID); got != "renamed" {
		t.Fatalf("refused renames changed the title to %q", got)
	}
}

// DELETE refuses a session with an active run (409), then removes the
// session with its runs; every watcher gets a last status with deleted.
func TestAPI_DeleteSession(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	c := th.Dial(t)
	if err := c.Watch(hubtest.Ctx(t, 10*time.Second), true); err != nil {
		t.Fatal(err)
	}
	var keep, doomed protocol.CreateSessionResult
	hubtest.Do(t, "POST", th.URL+"/v1/sessions", `{"title":"keep"}`, nil, &keep)
	hubtest.Do(t, "POST", th.URL+"/v1/sessions", `{"title":"doomed"}`, nil, &doomed)
	first := httpSimRun(t, th, doomed.SessionID, "t")
	var active protocol.RunStartResult
	if code := hubtest.Do(t, "POST", th.URL+"/v1/sessions/"+doomed.SessionID+"/runs", `{"message":"long","metadata":{"sim":{"tokens":100000,"token_ms":5}}}`, nil, &active); code != 202 {
		t.Fatalf("start: %d", code)
	}
	var bad protocol.ErrorBody
	if code := hubtest.Do(t, "DELETE", th.URL+"/v1/sessions/"+doomed.SessionID, "", nil, &bad); code != 409 || bad.Error.Code != protocol.CodeConflict {
		t.Fatalf("delete with an active run: %d %+v, want 409 conflict", code, bad.Error)
	}
	hubtest.Do(t, "POST", th.URL+"/v1/runs/"+active.RunID+"/cancel", "", nil, nil)
	hubtest.WaitTerminal(t, th, active.RunID)
	var res protocol.DeleteSessionResult
	if code := hubtest.Do(t, "DELETE", th.URL+"/v1/sessions/"+doomed.SessionID, "", nil, &res); code != 200 || !res.Deleted || res.SessionID != doomed.SessionID {
		t.Fatalf("delete: %d %+v", code, res)
	}
	for _, path := range []string{"/v1/sessions/" + doomed.SessionID, "/v1/sessions/" + doomed.SessionID + "/runs", "/v1/runs/" + first, "/v1/runs/" + active.RunID + "/events"} {
		if code := hubtest.Do(t, "GET", th.URL+path, "", nil, &bad); code != 404 {
			t.Fatalf("GET %s after the delete: %d, want 404", path, code)
		}
	}
	if code := hubtest.Do(t, "DELETE", th.URL+"/v1/sessions/"+doomed.SessionID, "", nil, &bad); code != 404 {
		t.Fatalf("a second delete: %d, want 404", code)
	}
	var list protocol.SessionList
	if hubtest.Do(t, "GET", th.URL+"/v1/sessions", "", nil, &list); len(list.Sessions) != 1 || list.Sessions[0].SessionID != keep.SessionID {
		t.Fatalf("sessions after the delete: %+v", list.Sessions)
	}
	col := hubtest.NewCollector()
	col.Until(t, c, 10*time.Second, "the deleted status", func() bool { return col.Statuses[doomed.SessionID].Deleted })
	if st := col.Statuses[doomed.SessionID]; st.RunID != "" || st.Status != "" {
		t.Fatalf("deleted status %+v", st)
	}
}
