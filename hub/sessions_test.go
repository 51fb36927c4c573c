package hub_test

import (
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// GET /v1/sessions/{sid}/runs pages a session's runs newest first, with
// each run's status, prompt and source; before and limit are checked.
func TestAPI_SessionRuns(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	var sess protocol.CreateSessionResult
	if code := do(t, "POST", th.URL+"/v1/sessions", `{"title":"history"}`, nil, &sess); code != 201 {
		t.Fatalf("create: %d", code)
	}
	base := th.URL + "/v1/sessions/" + sess.SessionID + "/runs"
	var empty protocol.RunList
	if code := do(t, "GET", base, "", nil, &empty); code != 200 || empty.Runs == nil || len(empty.Runs) != 0 || empty.More {
		t.Fatalf("runs of a new session: %d %+v", code, empty)
	}
	var rids []string
	for i, body := range []string{
		`{"message":"first prompt","metadata":{"sim":{"tokens":3,"token_ms":0,"tools":0}}}`,
		`{"message":"second prompt","metadata":{"sim":{"tokens":3,"token_ms":0,"tools":0,"fail":"error"}}}`,
		`{"message":"third prompt ` + strings.Repeat("x", 300) + `","metadata":{"sim":{"tokens":3,"token_ms":0,"tools":0}}}`,
	} {
		var start protocol.RunStartResult
		if code := do(t, "POST", base, body, nil, &start); code != 202 {
			t.Fatalf("start %d: %d", i, code)
		}
		waitTerminal(t, th, start.RunID)
		rids = append(rids, start.RunID)
	}
	// A fourth run, still active.
	var active protocol.RunStartResult
	if code := do(t, "POST", base, `{"message":"fourth","source":"api","metadata":{"sim":{"tokens":100000,"token_ms":5,"tools":0}}}`, nil, &active); code != 202 {
		t.Fatalf("start 4: %d", code)
	}
	rids = append(rids, active.RunID)

	var page protocol.RunList
	if code := do(t, "GET", base+"?limit=2", "", nil, &page); code != 200 || len(page.Runs) != 2 || !page.More {
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
	if code := do(t, "GET", base+"?limit=2&before="+page.Runs[1].RunID, "", nil, &page); code != 200 || len(page.Runs) != 2 || page.More {
		t.Fatalf("second page: %d %+v", code, page)
	}
	if page.Runs[0].RunID != rids[1] || page.Runs[0].Status != protocol.StatusFailed || page.Runs[1].RunID != rids[0] ||
		page.Runs[1].Status != protocol.StatusCompleted || page.Runs[1].Message != "first prompt" {
		t.Fatalf("second page %+v", page.Runs)
	}
	if code := do(t, "GET", base+"?before="+rids[0], "", nil, &page); code != 200 || len(page.Runs) != 0 || page.More {
		t.Fatalf("before the first run: %d %+v", code, page)
	}
	if code := do(t, "GET", base, "", nil, &page); code != 200 || len(page.Runs) != 4 || page.More {
		t.Fatalf("default page: %d %+v", code, page)
	}

	var bad protocol.ErrorBody
	for _, q := range []string{"?limit=0", "?limit=101", "?limit=x", "?before=r_nope", "?before=" + rids[0] + "x"} {
		if code := do(t, "GET", base+q, "", nil, &bad); code != 400 || bad.Error == nil || bad.Error.Code != protocol.CodeBadRequest {
			t.Fatalf("%s: %d %+v, want 400 bad_request", q, code, bad.Error)
		}
	}
	if code := do(t, "GET", th.URL+"/v1/sessions/s_nope/runs", "", nil, &bad); code != 404 {
		t.Fatalf("unknown session: %d", code)
	}
	do(t, "POST", th.URL+"/v1/runs/"+active.RunID+"/cancel", "", nil, nil)
	waitTerminal(t, th, active.RunID)
	deadline := time.Now().Add(10 * time.Second)
	for {
		do(t, "GET", base+"?limit=1", "", nil, &page)
		if page.Runs[0].Status == protocol.StatusCancelled || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if page.Runs[0].Status != protocol.StatusCancelled || page.Runs[0].TerminalState != protocol.StatusCancelled {
		t.Fatalf("cancelled run %+v", page.Runs[0])
	}
}
