package agui_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/internal/npmtest"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/agui"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/protocol"
)

// aguiSummary is what web/agui-test/check.mjs prints: the stream as the
// official AG-UI client read it, reassembled.
type aguiSummary struct {
	Count int      `json:"count"`
	Types []string `json:"types"`
	Runs  []struct {
		RunID    string `json:"runId"`
		ThreadID string `json:"threadId"`
		Message  string `json:"message"`
		End      string `json:"end"`
	} `json:"runs"`
	Texts     map[string]string `json:"texts"`
	Reasoning map[string]string `json:"reasoning"`
	Tools     map[string]struct {
		Name string `json:"name"`
		Args string `json:"args"`
	} `json:"tools"`
	Results map[string]string `json:"results"`
	Custom  []string          `json:"custom"`
	Steps   []string          `json:"steps"`
}

// installAGUI installs the pinned AG-UI packages of web/agui-test with npm
// ci into a temporary directory and returns it, with the check script
// beside them. A missing node or npm fails the test.
func installAGUI(t *testing.T) (node, dir string) {
	return npmtest.Install(t, "the AG-UI client", "../../web/agui-test", "package.json", "package-lock.json", "check.mjs", "run.mjs")
}

// runAGUICheck starts check.mjs on url; wait returns its summary.
func runAGUICheck(t *testing.T, node, dir, url string, runs int, lastID string) (wait func() aguiSummary) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	args := []string{"check.mjs", url, fmt.Sprint(runs)}
	if lastID != "" {
		args = append(args, lastID)
	}
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	return func() aguiSummary {
		t.Helper()
		defer cancel()
		if err := cmd.Wait(); err != nil {
			// The last lines carry the error; the first may echo minified sources.
			errText := stderr.String()
			if len(errText) > 2000 {
				errText = "…" + errText[len(errText)-2000:]
			}
			t.Fatalf("node check.mjs %s: %v\nstderr: %s\nstdout: %s", url, err, errText, stdout.String())
		}
		var s aguiSummary
		if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
			t.Fatalf("check.mjs output %q: %v", stdout.String(), err)
		}
		return s
	}
}

// expectAGUI is what the journal of a run says its AG-UI stream must
// reassemble to.
func expectAGUI(t *testing.T, th *hubtest.Hub, rid string, s *aguiSummary) {
	t.Helper()
	events := hubtest.JournalEvents(t, th, rid)
	texts, reasoning, results := map[string]string{}, map[string]string{}, map[string]string{}
	var custom []string
	for _, e := range events {
		switch e.Type {
		case protocol.EventTokenDelta:
			p := hubtest.Payload[protocol.TokenDeltaPayload](t, e)
			texts[agui.ID(rid, p.MessageID)] += p.Text
		case protocol.EventReasoningDelta, protocol.EventReasoningDone:
			p := hubtest.Payload[protocol.ReasoningPayload](t, e)
			reasoning[agui.ID(rid, p.BlockID)] += p.Text
		case protocol.EventToolStarted:
			p := hubtest.Payload[protocol.ToolStartedPayload](t, e)
			got, ok := s.Tools[agui.ID(rid, p.ToolCallID)]
			var a, b any
			if !ok || got.Name != p.Name || json.Unmarshal([]byte(got.Args), &a) != nil || json.Unmarshal(p.Args, &b) != nil || !reflect.DeepEqual(a, b) {
				t.Errorf("tool %s: got %+v, journal %s %s", p.ToolCallID, got, p.Name, p.Args)
			}
		case protocol.EventToolDone:
			p := hubtest.Payload[protocol.ToolDonePayload](t, e)
			var str string
			if json.Unmarshal(p.Result, &str) != nil {
				str = string(p.Result)
			}
			results[agui.ID(rid, p.ToolCallID)] = str
		case protocol.EventRunStarted, protocol.EventDone, protocol.EventCancelled:
		case protocol.EventError:
			if !e.Terminal {
				custom = append(custom, agui.CustomPrefix+string(e.Type))
			}
		default:
			custom = append(custom, agui.CustomPrefix+string(e.Type))
		}
	}
	pick := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if strings.HasPrefix(k, rid+":") {
				out[k] = v
			}
		}
		return out
	}
	if got := pick(s.Texts); !reflect.DeepEqual(got, texts) || len(texts) == 0 {
		t.Errorf("run %s text: AG-UI %q, journal %q", rid, got, texts)
	}
	if got := pick(s.Reasoning); !reflect.DeepEqual(got, reasoning) {
		t.Errorf("run %s reasoning: AG-UI %q, journal %q", rid, got, reasoning)
	}
	if got := pick(s.Results); !reflect.DeepEqual(got, results) {
		t.Errorf("run %s tool results: AG-UI %q, journal %q", rid, got, results)
	}
	gotCustom := append([]string(nil), s.Custom...)
	for _, want := range custom {
		found := false
		for i, name := range gotCustom {
			if name == want {
				gotCustom = append(gotCustom[:i], gotCustom[i+1:]...)
				found = true
				break
			}
		}
		if !found {
			t.Errorf("run %s: no CUSTOM %s in %v", rid, want, s.Custom)
		}
	}
}

// The official AG-UI client (npm @ag-ui/client's SSE transport and event
// verifier, @ag-ui/core's zod schemas, run by node) reads a run live
// through an approval and a clarification, and then a session stream of
// three runs that complete, fail and are cancelled: every event validates,
// the order passes the client's verifier, and the text, reasoning, tool
// calls and results reassemble to the journal's.
func TestAGUI_NPMClient(t *testing.T) {
	node, dir := installAGUI(t)
	th := newTestHub(t, hub.Config{})
	var sess protocol.CreateSessionResult
	hubtest.Do(t, "POST", th.URL+"/v1/sessions", `{"title":"agui"}`, nil, &sess)
	sid := sess.SessionID
	var r1 protocol.RunStartResult
	hubtest.Do(t, "POST", th.URL+"/v1/sessions/"+sid+"/runs",
		`{"message":"first","metadata":{"sim":{"tokens":30,"token_ms":5,"reasoning":4,"tools":2,"approval":true,"clarify":true}}}`, nil, &r1)
	wait := runAGUICheck(t, node, dir, th.URL+"/v1/runs/"+r1.RunID+"/agui", 1, "")
	ap := hubtest.Payload[protocol.ApprovalRequestedPayload](t, hubtest.WaitEvent(t, th, r1.RunID, "approval", hubtest.IsType(protocol.EventApprovalReq)))
	hubtest.PostOK(t, th.URL+"/v1/runs/"+r1.RunID+"/approvals/"+ap.ApprovalID, `{"choice":"once"}`)
	cq := hubtest.Payload[protocol.ClarifyRequestedPayload](t, hubtest.WaitEvent(t, th, r1.RunID, "clarify", hubtest.IsType(protocol.EventClarifyReq)))
	hubtest.PostOK(t, th.URL+"/v1/runs/"+r1.RunID+"/clarifications/"+cq.ClarifyID, `{"response":"short"}`)
	s := wait()
	if len(s.Runs) != 1 || s.Runs[0].RunID != r1.RunID || s.Runs[0].ThreadID != sid || s.Runs[0].Message != "first" || s.Runs[0].End != "RUN_FINISHED:success" {
		t.Fatalf("runs %+v", s.Runs)
	}
	for _, typ := range []string{"REASONING_START", "REASONING_MESSAGE_END", "REASONING_END", "TOOL_CALL_END", "TOOL_CALL_RESULT", "STEP_STARTED", "STEP_FINISHED", "TEXT_MESSAGE_END"} {
		if !strings.Contains(strings.Join(s.Types, " "), typ) {
			t.Errorf("no %s in %v", typ, s.Types)
		}
	}
	expectAGUI(t, th, r1.RunID, &s)

	// The session stream from the start of run 1, then a run that fails and
	// one that is cancelled mid-text.
	wait = runAGUICheck(t, node, dir, th.URL+"/v1/sessions/"+sid+"/agui", 3, protocol.EventID(r1.RunID, 0))
	var r2, r3 protocol.RunStartResult
	hubtest.Do(t, "POST", th.URL+"/v1/sessions/"+sid+"/runs", `{"message":"second","metadata":{"sim":{"tokens":10,"token_ms":1,"tools":1,"fail":"error"}}}`, nil, &r2)
	hubtest.WaitTerminal(t, th, r2.RunID)
	hubtest.Do(t, "POST", th.URL+"/v1/sessions/"+sid+"/runs", `{"message":"third","metadata":{"sim":{"tokens":5000,"token_ms":10,"tools":0}}}`, nil, &r3)
	hubtest.WaitEvent(t, th, r3.RunID, "a token", hubtest.IsType(protocol.EventTokenDelta))
	hubtest.PostOK(t, th.URL+"/v1/runs/"+r3.RunID+"/cancel", "")
	s = wait()
	ends := []string{"RUN_FINISHED:success", "RUN_ERROR:provider_error", "RUN_FINISHED:cancelled"}
	if len(s.Runs) != 3 {
		t.Fatalf("runs %+v", s.Runs)
	}
	for i, rid := range []string{r1.RunID, r2.RunID, r3.RunID} {
		if s.Runs[i].RunID != rid || s.Runs[i].ThreadID != sid || s.Runs[i].End != ends[i] {
			t.Errorf("run %d: %+v, want %s ending %s", i+1, s.Runs[i], rid, ends[i])
		}
		expectAGUI(t, th, rid, &s)
	}
}

// sseEvent is one AG-UI event of a stream as read raw: its SSE id and data.
type sseEvent struct {
	ID   string
	Data string
}

// readAGUI reads an AG-UI stream until it ends or stop says so.
func readAGUI(t *testing.T, url, lastID string, stop func([]sseEvent) bool) []sseEvent {
	t.Helper()
	out, err := readAGUIErr(url, lastID, stop)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readAGUIErr(url, lastID string, stop func([]sseEvent) bool) ([]sseEvent, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		return nil, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []sseEvent
	var id string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = line[4:]
		case strings.HasPrefix(line, "data: "):
			out = append(out, sseEvent{ID: id, Data: line[6:]})
			if stop != nil && stop(out) {
				return out, nil
			}
		}
	}
	if ctx.Err() != nil {
		return out, fmt.Errorf("GET %s: timed out after %d events", url, len(out))
	}
	return out, nil
}

func aguiType(e sseEvent) string {
	var v struct {
		Type  string `json:"type"`
		RunID string `json:"runId"`
	}
	json.Unmarshal([]byte(e.Data), &v)
	return v.Type
}

// Reconnecting with any id of an AG-UI stream, including one in the middle
// of the several AG-UI events one journal event makes, or with a native
// cursor, resumes right after it: no gap, no duplicate.
func TestAGUI_ResumeFromEveryID(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	var sess protocol.CreateSessionResult
	hubtest.Do(t, "POST", th.URL+"/v1/sessions", `{}`, nil, &sess)
	var r protocol.RunStartResult
	hubtest.Do(t, "POST", th.URL+"/v1/sessions/"+sess.SessionID+"/runs", `{"message":"resume","metadata":{"sim":{"tokens":12,"token_ms":0,"reasoning":3,"tools":2}}}`, nil, &r)
	hubtest.WaitTerminal(t, th, r.RunID)
	url := th.URL + "/v1/runs/" + r.RunID + "/agui"
	all := readAGUI(t, url, "", nil)
	if len(all) < 30 || aguiType(all[0]) != agui.RunStarted || aguiType(all[len(all)-1]) != agui.RunFinished {
		t.Fatalf("stream of %d events: first %v last %v", len(all), all[0], all[len(all)-1])
	}
	multi := false
	for i, e := range all {
		p, err := agui.ParseEventID(e.ID)
		if err != nil || p.RunID != r.RunID {
			t.Fatalf("id %q: %v", e.ID, err)
		}
		if i > 0 {
			q, _ := agui.ParseEventID(all[i-1].ID)
			if !(p.Seq == q.Seq && p.Index == q.Index+1 || p.Seq > q.Seq && p.Index == 0) {
				t.Fatalf("id %s after %s", e.ID, all[i-1].ID)
			}
			multi = multi || p.Index > 0
		}
	}
	if !multi {
		t.Fatal("no journal event made several AG-UI events")
	}
	for i, e := range all {
		rest := readAGUI(t, url, e.ID, nil)
		if !reflect.DeepEqual(rest, all[i+1:]) && !(len(rest) == 0 && i == len(all)-1) {
			t.Fatalf("resume after %s: %d events, want %d", e.ID, len(rest), len(all)-i-1)
		}
	}
	// A native cursor resumes after every AG-UI event of that journal event.
	for _, e := range all {
		p, _ := agui.ParseEventID(e.ID)
		rest := readAGUI(t, url, protocol.EventID(r.RunID, p.Seq), nil)
		var want []sseEvent
		for _, f := range all {
			if q, _ := agui.ParseEventID(f.ID); q.Seq > p.Seq {
				want = append(want, f)
			}
		}
		if !reflect.DeepEqual(rest, want) && len(want)+len(rest) > 0 {
			t.Fatalf("resume after native %d: %d events, want %d", p.Seq, len(rest), len(want))
		}
	}
	// Bad ids are refused before the stream starts.
	meta := hubtest.RunMeta(t, th, r.RunID)
	for _, bad := range []string{"junk", "r_other:3.0", r.RunID + ":2.x", r.RunID + ":2.01", fmt.Sprintf("%s:%d.0", r.RunID, meta.LastSeq+1)} {
		code, body := hubtest.RawDo(t, "GET", url, "", map[string]string{"Last-Event-ID": bad})
		if code != 400 || !strings.Contains(body, "bad_cursor") {
			t.Errorf("Last-Event-ID %q: %d %s", bad, code, body)
		}
	}
	if code, body := hubtest.RawDo(t, "GET", th.URL+"/v1/runs/r_nope/agui", "", nil); code != 404 || !strings.Contains(body, "not_found") {
		t.Errorf("unknown run: %d %s", code, body)
	}
}

// A session stream without Last-Event-ID starts with the session's latest
// run and follows the runs that start later; resumed at a run's last event
// it goes on with the next run.
func TestAGUI_SessionFollowsRuns(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	var sess protocol.CreateSessionResult
	hubtest.Do(t, "POST", th.URL+"/v1/sessions", `{}`, nil, &sess)
	sid := sess.SessionID
	url := th.URL + "/v1/sessions/" + sid + "/agui"
	runOnce := func(msg string) string {
		var r protocol.RunStartResult
		hubtest.Do(t, "POST", th.URL+"/v1/sessions/"+sid+"/runs", `{"message":"`+msg+`","metadata":{"sim":{"tokens":4,"token_ms":0,"tools":0}}}`, nil, &r)
		hubtest.WaitTerminal(t, th, r.RunID)
		return r.RunID
	}
	// No run yet: the stream waits for the first one.
	type result struct {
		ev  []sseEvent
		err error
	}
	got := make(chan result, 1)
	go func() {
		ev, err := readAGUIErr(url, "", func(ev []sseEvent) bool { return aguiType(ev[len(ev)-1]) == agui.RunFinished })
		got <- result{ev, err}
	}()
	time.Sleep(100 * time.Millisecond)
	r1 := runOnce("one")
	res := <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	first := res.ev
	if p, _ := agui.ParseEventID(first[0].ID); p.RunID != r1 {
		t.Fatalf("first run streamed %s, want %s", first[0].ID, r1)
	}
	r2 := runOnce("two")
	latest := readAGUI(t, url, "", func(ev []sseEvent) bool { return aguiType(ev[len(ev)-1]) == agui.RunFinished })
	if p, _ := agui.ParseEventID(latest[0].ID); p.RunID != r2 || aguiType(latest[0]) != agui.RunStarted {
		t.Fatalf("stream starts at %s, want the latest run %s", latest[0].ID, r2)
	}
	// From run 2's last event, the stream waits for run 3 and streams it.
	go func() {
		ev, err := readAGUIErr(url, latest[len(latest)-1].ID, func(ev []sseEvent) bool {
			return aguiType(ev[len(ev)-1]) == agui.RunFinished
		})
		got <- result{ev, err}
	}()
	time.Sleep(100 * time.Millisecond)
	r3 := runOnce("three")
	res = <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	next := res.ev
	if p, _ := agui.ParseEventID(next[0].ID); p.RunID != r3 || aguiType(next[0]) != agui.RunStarted {
		t.Fatalf("after run 2 the stream went on with %s, want %s", next[0].ID, r3)
	}
	// An id of another session's run is refused.
	var other protocol.CreateSessionResult
	hubtest.Do(t, "POST", th.URL+"/v1/sessions", `{}`, nil, &other)
	if code, body := hubtest.RawDo(t, "GET", th.URL+"/v1/sessions/"+other.SessionID+"/agui", "", map[string]string{"Last-Event-ID": r3 + ":1.0"}); code != 400 || !strings.Contains(body, "bad_cursor") {
		t.Errorf("foreign run id: %d %s", code, body)
	}
}

// Another subject's run and session answer exactly as unknown ones.
func TestAGUI_ForeignIsNotFound(t *testing.T) {
	th := newTestHub(t, hubtest.WithAuth(t, hub.Config{}))
	alice := th.DialToken(t, hubtest.Token(t, "alice", time.Hour, ""))
	run := hubtest.StartAliceRun(t, th, alice)
	bob := hubtest.BearerOf(hubtest.Token(t, "bob", time.Hour, ""))
	_, unknown := hubtest.RawDo(t, "GET", th.URL+"/v1/runs/r_unknown/agui", "", bob)
	for _, path := range []string{"/v1/runs/" + run.RID + "/agui", "/v1/sessions/" + run.SID + "/agui"} {
		code, body := hubtest.RawDo(t, "GET", th.URL+path, "", bob)
		if code != 404 || body != unknown {
			t.Errorf("bob GET %s: %d %s (unknown: %s)", path, code, body, unknown)
		}
	}
	// Alice herself gets the stream.
	ev := readAGUIAuth(t, th.URL+"/v1/runs/"+run.RID+"/agui", hubtest.BearerOf(hubtest.Token(t, "alice", time.Hour, "")))
	if aguiType(ev) != agui.RunStarted {
		t.Fatalf("alice's first event %+v", ev)
	}
}

// readAGUIAuth returns the first event of a stream read with hdr.
func readAGUIAuth(t *testing.T, url string, hdr map[string]string) sseEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var id string
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "id: ") {
			id = l[4:]
		} else if strings.HasPrefix(l, "data: ") {
			return sseEvent{ID: id, Data: l[6:]}
		}
	}
	t.Fatalf("GET %s: %d, no event", url, resp.StatusCode)
	return sseEvent{}
}

// A stream ends when the caller's token expires, like the native SSE.
func TestAGUI_EndsWhenTokenExpires(t *testing.T) {
	th := newTestHub(t, hubtest.WithAuth(t, hub.Config{}))
	alice := th.DialToken(t, hubtest.Token(t, "alice", time.Hour, ""))
	run := hubtest.StartAliceRun(t, th, alice) // waits for an approval: the stream stays open
	for _, path := range []string{"/v1/runs/" + run.RID + "/agui", "/v1/sessions/" + run.SID + "/agui"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", th.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+hubtest.Token(t, "alice", 2*time.Second, ""))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		n := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				n++
			}
		}
		resp.Body.Close()
		expired := ctx.Err() == nil
		cancel()
		if !expired || n == 0 {
			t.Errorf("%s: %d events, ended by the token's expiry: %v", path, n, expired)
		}
	}
}
