package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/protocol"
)

func TestAPI_SessionsRunsEvents(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	var sess protocol.CreateSessionResult
	if code := hubtest.Do(t, "POST", th.URL+"/v1/sessions", `{"title":"api"}`, nil, &sess); code != 201 || sess.SessionID == "" {
		t.Fatalf("create: %d %+v", code, sess)
	}
	var start protocol.RunStartResult
	body := `{"message":"hi","metadata":{"sim":{"tokens":200,"token_ms":5,"tools":0}}}`
	if code := hubtest.Do(t, "POST", th.URL+"/v1/sessions/"+sess.SessionID+"/runs", body, nil, &start); code != 202 {
		t.Fatalf("start: %d", code)
	}
	if start.RunID == "" || start.SessionID != sess.SessionID || start.Cursor != protocol.EventID(start.RunID, 1) {
		t.Fatalf("start result %+v", start)
	}
	if start.StreamID != start.RunID || start.Status != protocol.StatusRunning || start.StartedAt <= 0 ||
		!slices.Contains(start.ActiveControls, protocol.OpCancel) {
		t.Fatalf("start result %+v: want stream_id = run_id, running, started_at set, cancel among the controls", start)
	}
	var conflict protocol.ControlResult
	if code := hubtest.Do(t, "POST", th.URL+"/v1/sessions/"+sess.SessionID+"/runs", body, nil, &conflict); code != 409 || conflict.Status != protocol.ResultConflict {
		t.Fatalf("second start while active: %d %+v", code, conflict)
	}
	var list protocol.SessionList
	if code := hubtest.Do(t, "GET", th.URL+"/v1/sessions", "", nil, &list); code != 200 || len(list.Sessions) != 1 || list.Sessions[0].RunID != start.RunID {
		t.Fatalf("list: %d %+v", code, list)
	}
	hubtest.WaitTerminal(t, th, start.RunID)
	var st protocol.RunStatus
	if code := hubtest.Do(t, "GET", th.URL+"/v1/runs/"+start.RunID, "", nil, &st); code != 200 || st.Status != protocol.StatusCompleted || !st.Terminal {
		t.Fatalf("run status: %d %+v", code, st)
	}
	var page protocol.EventPage
	if code := hubtest.Do(t, "GET", th.URL+"/v1/runs/"+start.RunID+"/events?after_seq=5&limit=10", "", nil, &page); code != 200 {
		t.Fatalf("events: %d", code)
	}
	if len(page.Events) != 10 || page.Events[0].Seq != 6 || page.NextCursor != protocol.EventID(start.RunID, 15) || !page.Terminal {
		t.Fatalf("page: %d events from %d, next %s", len(page.Events), page.Events[0].Seq, page.NextCursor)
	}
	var ss protocol.SessionStatus
	if code := hubtest.Do(t, "GET", th.URL+"/v1/sessions/"+sess.SessionID, "", nil, &ss); code != 200 || ss.Status != protocol.StatusCompleted || ss.Tokens != 200 {
		t.Fatalf("session: %d %+v", code, ss)
	}
}

func TestAPI_Errors(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	var sess protocol.CreateSessionResult
	hubtest.Do(t, "POST", th.URL+"/v1/sessions", `{}`, nil, &sess)
	cases := []struct {
		method, path, body string
		status             int
		code               protocol.Code
	}{
		{"GET", "/v1/sessions/s_missing", "", 404, protocol.CodeNotFound},
		{"GET", "/v1/runs/r_missing", "", 404, protocol.CodeNotFound},
		{"GET", "/v1/runs/r_missing/events", "", 404, protocol.CodeNotFound},
		{"POST", "/v1/runs/r_missing/cancel", "", 404, protocol.CodeNotFound},
		{"POST", "/v1/sessions/" + sess.SessionID + "/runs", `{"message":`, 400, protocol.CodeBadRequest},
		{"POST", "/v1/sessions/" + sess.SessionID + "/runs", `{"message":42}`, 400, protocol.CodeBadRequest},
		{"POST", "/v1/sessions/" + sess.SessionID + "/runs", `{}`, 400, protocol.CodeBadRequest},
		{"POST", "/v1/sessions/" + sess.SessionID + "/runs", `{"message":"x","metadata":{"sim":{"tokens":-1}}}`, 400, protocol.CodeBadRequest},
		{"POST", "/v1/sessions/" + sess.SessionID + "/runs", `{"message":"` + strings.Repeat("x", 70000) + `"}`, 413, protocol.CodeTooLarge},
		{"GET", "/v1/nope", "", 404, protocol.CodeNotFound},
	}
	for _, tc := range cases {
		var body protocol.ErrorBody
		code := hubtest.Do(t, tc.method, th.URL+tc.path, tc.body, nil, &body)
		if code != tc.status || body.Error == nil || body.Error.Code != tc.code || body.Error.Message == "" {
			t.Errorf("%s %s %.40s: %d %+v, want %d %s", tc.method, tc.path, tc.body, code, body.Error, tc.status, tc.code)
		}
	}
}

// SSE: id is the event_id, event the type; Last-Event-ID resumes; the stream
// ends after the terminal event.
func TestAPI_SSE(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	var sess protocol.CreateSessionResult
	hubtest.Do(t, "POST", th.URL+"/v1/sessions", `{}`, nil, &sess)
	var start protocol.RunStartResult
	hubtest.Do(t, "POST", th.URL+"/v1/sessions/"+sess.SessionID+"/runs", `{"message":"sse","metadata":{"sim":{"tokens":50,"token_ms":10,"tools":1}}}`, nil, &start)

	read := func(lastID string) []protocol.Envelope {
		req, _ := http.NewRequest("GET", th.URL+"/v1/runs/"+start.RunID+"/events", nil)
		req.Header.Set("Accept", "text/event-stream")
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("content type %q", ct)
		}
		var out []protocol.Envelope
		var id, typ string
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		done := make(chan struct{})
		timer := time.AfterFunc(20*time.Second, func() { resp.Body.Close() })
		defer timer.Stop()
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = line[4:]
			case strings.HasPrefix(line, "event: "):
				typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				var e protocol.Envelope
				if err := json.Unmarshal([]byte(line[6:]), &e); err != nil {
					t.Fatal(err)
				}
				if e.EventID != id || string(e.Type) != typ {
					t.Fatalf("id %q event %q for %+v", id, typ, e)
				}
				out = append(out, e)
			}
		}
		close(done)
		return out
	}
	all := read("")
	if got := hubtest.CheckRun(t, all, start.RunID); got != sim.Text(50) {
		t.Fatalf("sse text %q", got)
	}
	rest := read(all[9].EventID)
	if len(rest) != len(all)-10 || rest[0].Seq != 11 || !rest[len(rest)-1].Terminal {
		t.Fatalf("resume: %d events from seq %d", len(rest), rest[0].Seq)
	}
	// A Last-Event-ID of another run is refused.
	req, _ := http.NewRequest("GET", th.URL+"/v1/runs/"+start.RunID+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "r_other:3")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !bytes.Contains(b, []byte("bad_cursor")) {
		t.Fatalf("foreign Last-Event-ID: %d %s", resp.StatusCode, b)
	}
}
