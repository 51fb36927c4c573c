package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/protocol"
)

func withKey(hdr map[string]string, key string) map[string]string {
	out := map[string]string{"Idempotency-Key": key}
	for k, v := range hdr {
		out[k] = v
	}
	return out
}

func ids(st protocol.QueueState) string {
	var out []string
	for _, it := range st.Items {
		out = append(out, it.Message)
	}
	return strings.Join(out, ",")
}

// lastQueueEvent is the payload of the event id, which must be a
// queue.updated of run.
func lastQueueEvent(t *testing.T, th *hubtest.Hub, run, eventID string) protocol.QueueUpdatedPayload {
	t.Helper()
	cur, err := protocol.ParseCursor(eventID)
	if err != nil || cur.RunID != run {
		t.Fatalf("event id %q is not of run %s (%v)", eventID, run, err)
	}
	events, err := th.Store.Read(context.Background(), run, cur.Seq-1, 1)
	if err != nil || len(events) != 1 || events[0].Type != protocol.EventQueueUpdated {
		t.Fatalf("event %s: %+v %v, want a queue.updated", eventID, events, err)
	}
	p, err := protocol.DecodePayload[protocol.QueueUpdatedPayload](&events[0])
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The owner sees, edits, reorders and removes queued messages; each change
// is journaled as queue.updated on the active run and reaches the runtime
// (the edited head is the next run's message); bad input is refused and
// changes nothing; a repeated Idempotency-Key changes nothing; another
// subject gets exactly what an unknown session gets; "stop & clear" empties
// the queue and cancels the run, and nothing starts after it.
func TestQueueEdit(t *testing.T) {
	th := newTestHub(t, hubtest.WithAuth(t, hub.Config{}))
	alice := hubtest.BearerOf(hubtest.Token(t, "alice", time.Hour, ""))
	bob := hubtest.BearerOf(hubtest.Token(t, "bob", time.Hour, ""))
	tab := th.DialToken(t, hubtest.Token(t, "alice", time.Hour, ""))
	res := hubtest.StartRun(t, tab, hubtest.SimStart("", 100000, 20, ""))
	sid, rid := res.SessionID, res.RunID
	base := th.URL + "/v1/sessions/" + sid + "/queue"
	for _, m := range []string{"one", "two", "three"} {
		if code := hubtest.Do(t, "POST", base, `{"message":"`+m+`"}`, alice, nil); code != 200 {
			t.Fatalf("queue %s: %d", m, code)
		}
	}
	var st protocol.QueueState
	if code := hubtest.Do(t, "GET", base, "", alice, &st); code != 200 || ids(st) != "one,two,three" || st.Depth != 3 || st.Items[0].Preview != "one" {
		t.Fatalf("GET queue: %d %+v", code, st)
	}
	q1, q2, q3 := st.Items[0].ID, st.Items[1].ID, st.Items[2].ID

	// Edit.
	if code := hubtest.Do(t, "PATCH", base+"/"+q2, `{"message":"TWO, edited\nsecond line"}`, alice, &st); code != 200 || ids(st) != "one,TWO, edited\nsecond line,three" || st.EventID == "" {
		t.Fatalf("edit: %d %+v", code, st)
	}
	if p := lastQueueEvent(t, th, rid, st.EventID); p.Depth != 3 || p.Items[1].ID != q2 || p.Items[1].Preview != "TWO, edited" {
		t.Fatalf("queue.updated after the edit: %+v", p)
	}
	// Reorder.
	if code := hubtest.Do(t, "PUT", base, `{"ids":["`+q3+`","`+q1+`","`+q2+`"]}`, alice, &st); code != 200 || ids(st) != "three,one,TWO, edited\nsecond line" {
		t.Fatalf("reorder: %d %+v", code, st)
	}
	if p := lastQueueEvent(t, th, rid, st.EventID); p.Items[0].ID != q3 || p.Items[2].ID != q2 {
		t.Fatalf("queue.updated after the reorder: %+v", p)
	}
	// Bad input: refused, nothing changes.
	for _, tc := range []struct {
		method, path, body string
		code               int
		errCode            string
	}{
		{"PATCH", "/" + q1, `{"message":"   "}`, 400, "bad_request"},
		{"PATCH", "/" + q1, `{}`, 400, "bad_request"},
		{"PATCH", "/" + q1, `{"message":5}`, 400, "bad_request"},
		{"PATCH", "/" + q1, `{"message":"` + strings.Repeat("x", protocol.MaxTextBytes+1) + `"}`, 413, "too_large"},
		{"PATCH", "/q_nope", `{"message":"x"}`, 404, "not_found"},
		{"DELETE", "/q_nope", ``, 404, "not_found"},
		{"PUT", "", `{"ids":["` + q1 + `","` + q2 + `"]}`, 409, "conflict"},
		{"PUT", "", `{"ids":["` + q1 + `","` + q1 + `","` + q2 + `"]}`, 409, "conflict"},
		{"PUT", "", `{}`, 400, "bad_request"},
		{"DELETE", "?stop=maybe", ``, 400, "bad_request"},
	} {
		code, body := hubtest.RawDo(t, tc.method, base+tc.path, tc.body, alice)
		if code != tc.code || !strings.Contains(body, `"`+tc.errCode+`"`) {
			t.Errorf("%s %s %.60s: %d %.200s, want %d %s", tc.method, tc.path, tc.body, code, body, tc.code, tc.errCode)
		}
	}
	if hubtest.Do(t, "GET", base, "", alice, &st); ids(st) != "three,one,TWO, edited\nsecond line" {
		t.Fatalf("bad input changed the queue: %+v", st)
	}
	// Another subject: exactly what an unknown session gets; nothing changes.
	ghost := th.URL + "/v1/sessions/s_0000000000000000000000000000dead/queue"
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "", ""}, {"PATCH", "/" + q1, `{"message":"hijack"}`}, {"DELETE", "/" + q1, ""},
		{"PUT", "", `{"ids":["` + q1 + `","` + q2 + `","` + q3 + `"]}`}, {"DELETE", "", ""}, {"DELETE", "?stop=true", ""},
	} {
		code, body := hubtest.RawDo(t, tc.method, base+tc.path, tc.body, bob)
		gcode, gbody := hubtest.RawDo(t, tc.method, ghost+tc.path, tc.body, bob)
		if code != 404 || code != gcode || body != gbody {
			t.Errorf("bob %s %s: %d %s; unknown session: %d %s", tc.method, tc.path, code, body, gcode, gbody)
		}
	}
	if hubtest.Do(t, "GET", base, "", alice, &st); st.Depth != 3 {
		t.Fatalf("bob changed the queue: %+v", st)
	}
	// Remove with an Idempotency-Key; the retry changes nothing.
	if code := hubtest.Do(t, "DELETE", base+"/"+q3, "", withKey(alice, "rm-1"), &st); code != 200 || ids(st) != "one,TWO, edited\nsecond line" || st.Duplicate {
		t.Fatalf("remove: %d %+v", code, st)
	}
	if code := hubtest.Do(t, "DELETE", base+"/"+q3, "", withKey(alice, "rm-1"), &st); code != 200 || !st.Duplicate || st.Depth != 2 {
		t.Fatalf("the repeated remove: %d %+v, want 200 duplicate with the queue unchanged", code, st)
	}
	// Edit the head, then stop the run: the edited message runs next.
	hubtest.Do(t, "PATCH", base+"/"+q1, `{"message":"one, edited"}`, alice, nil)
	if code := hubtest.Do(t, "POST", th.URL+"/v1/runs/"+rid+"/cancel", "", alice, nil); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	var next string
	deadline := time.Now().Add(20 * time.Second)
	for next == "" && time.Now().Before(deadline) {
		var s protocol.SessionStatus
		hubtest.Do(t, "GET", th.URL+"/v1/sessions/"+sid, "", alice, &s)
		if s.RunID != rid && s.RunID != "" && s.LastSeq > 0 {
			next = s.RunID
		}
		time.Sleep(20 * time.Millisecond)
	}
	if next == "" {
		t.Fatal("the queued message did not start after the cancel")
	}
	events, _ := th.Store.Read(context.Background(), next, 0, 1)
	if rs, err := protocol.DecodePayload[protocol.RunStartedPayload](&events[0]); err != nil || rs.Message != "one, edited" {
		t.Fatalf("the next run's message is %q (%v), want the edited head", rs.Message, err)
	}

	// Stop & clear: the queue empties, the run is cancelled, nothing starts.
	if code := hubtest.Do(t, "DELETE", base+"?stop=true", "", withKey(alice, "stop-1"), &st); code != 200 || st.Depth != 0 || st.Stop == nil || !st.Stop.Accepted {
		t.Fatalf("stop & clear: %d %+v", code, st)
	}
	var sum struct {
		Runs []protocol.RunSummary `json:"runs"`
	}
	deadline = time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := th.Store.Run(context.Background(), next); err == nil && r.Terminal {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // a drain would start the next run by now
	hubtest.Do(t, "GET", th.URL+"/v1/sessions/"+sid+"/runs", "", alice, &sum)
	if len(sum.Runs) != 2 || sum.Runs[0].RunID != next || sum.Runs[0].Status != protocol.StatusCancelled {
		b, _ := json.Marshal(sum.Runs)
		t.Fatalf("after stop & clear the session has runs %s; want the two, the last cancelled", b)
	}
}
