package interop_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/aisdk"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/protocol"
)

// errorOf decodes a JSON error body.
func errorOf(t *testing.T, body string) protocol.Error {
	t.Helper()
	var b struct {
		Error protocol.Error `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return b.Error
}

func aguiBody(thread, runID, message, extra string) string {
	return `{"threadId":"` + thread + `","runId":"` + runID + `","messages":[{"id":"u1","role":"user","content":"` + message + `"}],"tools":[],"context":[]` + extra + `}`
}

// Bad input to POST /v1/agui answers 400 naming the field (413 over the
// body limit, 404 for an unknown profile or interrupt), and starts nothing.
func TestAGUIRun_BadInput(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	url := th.URL + "/v1/agui"
	big := strings.Repeat("x", 1<<20)
	for _, c := range []struct {
		name, path, body string
		status           int
		field            string
	}{
		{"malformed", "", `{"threadId":`, 400, ""},
		{"no threadId", "", `{"runId":"r","messages":[]}`, 400, "threadId"},
		{"bad threadId", "", aguiBody("a b", "r", "hi", ""), 400, "threadId"},
		{"no runId", "", `{"threadId":"t-bad","messages":[]}`, 400, "runId"},
		{"no messages", "", `{"threadId":"t-bad","runId":"r"}`, 400, "messages"},
		{"messages not an array", "", `{"threadId":"t-bad","runId":"r","messages":{}}`, 400, "messages"},
		{"message without role", "", `{"threadId":"t-bad","runId":"r","messages":[{"id":"1"}]}`, 400, "messages[0]"},
		{"last is not user", "", `{"threadId":"t-bad","runId":"r","messages":[{"id":"1","role":"assistant","content":"x"}]}`, 400, "messages"},
		{"resume status", "", aguiBody("t-bad", "r", "hi", `,"resume":[{"interruptId":"a","status":"maybe"}]`), 400, "resume[0].status"},
		{"resume without id", "", aguiBody("t-bad", "r", "hi", `,"resume":[{"status":"resolved"}]`), 400, "resume[0].interruptId"},
		{"forwardedProps.runhub", "", aguiBody("t-bad", "r", "hi", `,"forwardedProps":{"runhub":{"model":3}}`), 400, "forwardedProps.runhub.model"},
		{"too large", "", aguiBody("t-bad", "r", big, ""), 413, ""},
		{"unknown profile", "/nope", aguiBody("t-bad", "r", "hi", ""), 404, "profile"},
		{"unknown interrupt", "", aguiBody("t-bad", "r2", "hi", `,"resume":[{"interruptId":"a_nope","status":"resolved","payload":{"choice":"once"}}]`), 404, "resume[0].interruptId"},
	} {
		code, body := hubtest.RawDo(t, "POST", url+c.path, c.body, nil)
		if code != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.status)
			continue
		}
		if e := errorOf(t, body); e.Field != c.field {
			t.Errorf("%s: field %q, want %q (%s)", c.name, e.Field, c.field, body)
		}
	}
	if m, err := th.Store.Session(context.Background(), "t-bad"); err == nil && len(m.Runs) > 0 {
		t.Errorf("bad input started runs %v", m.Runs)
	}

	// A resume of a prompt already answered gets the control's own answer,
	// and no second run.
	ctx := hubtest.Ctx(t, 30*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(aguiBody("t-hitl", "run-1", "go",
		`,"forwardedProps":{"runhub":{"metadata":{"sim":{"tokens":3,"token_ms":1,"tools":1,"approval":true}}}}`)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	interrupt := readUntilInterrupt(t, resp)
	rid := hubtest.SessionMeta(t, th, "t-hitl").Runs[0]
	resume := aguiBody("t-hitl", "run-2", "go", `,"resume":[{"interruptId":"`+interrupt+`","status":"resolved","payload":{"choice":"once"}}]`)
	ctl := th.URL + "/v1/runs/" + rid + "/approvals/" + interrupt
	hubtest.PostOK(t, ctl, `{"choice":"once"}`)
	hubtest.WaitTerminal(t, th, rid)
	wantCode, wantBody := hubtest.RawDo(t, "POST", ctl, `{"choice":"once"}`, nil)
	code, body := hubtest.RawDo(t, "POST", url, resume, nil)
	if code != wantCode || body != wantBody || code/100 == 2 {
		t.Errorf("resume of an answered prompt: %d %s; the control answers %d %s", code, body, wantCode, wantBody)
	}
	if runs := hubtest.SessionMeta(t, th, "t-hitl").Runs; len(runs) != 1 {
		t.Errorf("runs %v after the resume, want one", runs)
	}
	// The runId of the first POST answers its stream again: no second run.
	code, body = hubtest.RawDo(t, "POST", url, aguiBody("t-hitl", "run-1", "go", ""), map[string]string{"Accept": "text/event-stream"})
	if code != 200 || !strings.Contains(body, `"RUN_FINISHED"`) || !strings.Contains(body, `"run-1"`) {
		t.Errorf("retry of run-1: %d %.300s", code, body)
	}
	if runs := hubtest.SessionMeta(t, th, "t-hitl").Runs; len(runs) != 1 {
		t.Errorf("runs %v after a retry, want one", runs)
	}
}

// readUntilInterrupt reads an AG-UI POST stream to its end and returns the
// id of the interrupt it ends with.
func readUntilInterrupt(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type    string `json:"type"`
			Outcome struct {
				Type       string `json:"type"`
				Interrupts []struct {
					ID string `json:"id"`
				} `json:"interrupts"`
			} `json:"outcome"`
		}
		json.Unmarshal([]byte(data), &ev)
		if ev.Type == "RUN_FINISHED" {
			if ev.Outcome.Type != "interrupt" || len(ev.Outcome.Interrupts) != 1 {
				t.Fatalf("the stream ended %s", data)
			}
			return ev.Outcome.Interrupts[0].ID
		}
	}
	t.Fatal("the stream ended without RUN_FINISHED")
	return ""
}

func chatBody(id, trigger, messages, extra string) string {
	return `{"id":"` + id + `","trigger":"` + trigger + `","messages":` + messages + extra + `}`
}

const userMsg = `[{"id":"u1","role":"user","parts":[{"type":"text","text":"hi"}]}]`

// Bad input to the AI SDK HTTP transport answers 400 naming the field (413
// over the body limit, 404 for an unknown profile) and starts nothing.
func TestAISDK_BadInput(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	url := th.URL + "/v1/aisdk/chat"
	for _, c := range []struct {
		name, body string
		status     int
		field      string
	}{
		{"malformed", `{"id":`, 400, ""},
		{"no id", `{"trigger":"submit-message","messages":` + userMsg + `}`, 400, "id"},
		{"bad id", chatBody("a/b", "submit-message", userMsg, ""), 400, "id"},
		{"no trigger", `{"id":"c-bad","messages":` + userMsg + `}`, 400, "trigger"},
		{"bad trigger", chatBody("c-bad", "go", userMsg, ""), 400, "trigger"},
		{"no messages", chatBody("c-bad", "submit-message", `[]`, ""), 400, "messages"},
		{"message role", chatBody("c-bad", "submit-message", `[{"id":"1","role":"robot","parts":[]}]`, ""), 400, "messages[0].role"},
		{"message id", chatBody("c-bad", "submit-message", `[{"role":"user","parts":[]}]`, ""), 400, "messages[0].id"},
		{"last not user", chatBody("c-bad", "submit-message", `[{"id":"1","role":"assistant","parts":[{"type":"text","text":"x"}]}]`, ""), 400, "messages"},
		{"runhub options", chatBody("c-bad", "submit-message", userMsg, `,"runhub":{"toolsets":"x"}`), 400, "runhub.toolsets"},
		{"too large", chatBody("c-bad", "submit-message", `[{"id":"1","role":"user","parts":[{"type":"text","text":"`+strings.Repeat("x", 1<<20)+`"}]}]`, ""), 413, ""},
		{"unknown profile", chatBody("c-bad", "submit-message", userMsg, `,"runhub":{"profile":"nope"}`), 404, "profile"},
	} {
		code, body := hubtest.RawDo(t, "POST", url, c.body, nil)
		if code != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.status)
			continue
		}
		if e := errorOf(t, body); e.Field != c.field {
			t.Errorf("%s: field %q, want %q (%s)", c.name, e.Field, c.field, body)
		}
	}
	if m, err := th.Store.Session(context.Background(), "c-bad"); err == nil && len(m.Runs) > 0 {
		t.Errorf("bad input started runs %v", m.Runs)
	}
	if code, body := hubtest.RawDo(t, "GET", url+"/a.b%20c/stream", "", nil); code != 400 || errorOf(t, body).Field != "id" {
		t.Errorf("GET a malformed chat id: %d %s", code, body)
	}
}

// wsFrames is a test client of /v1/aisdk/ws.
type wsFrames struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialAISDK(t *testing.T, th *hubtest.Hub, tok string, subprotocols ...string) (*wsFrames, *http.Response, error) {
	t.Helper()
	url := "ws" + strings.TrimPrefix(th.URL, "http") + "/v1/aisdk/ws"
	if tok != "" {
		url += "?access_token=" + tok
	}
	ws, resp, err := websocket.Dial(hubtest.Ctx(t, 10*time.Second), url, &websocket.DialOptions{Subprotocols: subprotocols})
	if err != nil {
		return nil, resp, err
	}
	t.Cleanup(func() { ws.CloseNow() })
	return &wsFrames{t: t, ws: ws}, resp, nil
}

func (f *wsFrames) send(frame string) {
	f.t.Helper()
	if err := f.ws.Write(hubtest.Ctx(f.t, 5*time.Second), websocket.MessageText, []byte(frame)); err != nil {
		f.t.Fatal(err)
	}
}

type wsFrame struct {
	Type      string         `json:"type"`
	RequestID string         `json:"requestId"`
	Sequence  int64          `json:"sequence"`
	Chunk     map[string]any `json:"chunk"`
	ErrorText string         `json:"errorText"`
}

func (f *wsFrames) read() wsFrame {
	f.t.Helper()
	_, data, err := f.ws.Read(hubtest.Ctx(f.t, 30*time.Second))
	if err != nil {
		f.t.Fatal(err)
	}
	var fr wsFrame
	if err := json.Unmarshal(data, &fr); err != nil {
		f.t.Fatalf("frame %s: %v", data, err)
	}
	return fr
}

func sendFrame(reqID, chat, metadata string) string {
	return `{"type":"send","requestId":"` + reqID + `","id":"` + chat + `","trigger":"submit-message","messages":` + userMsg +
		`,"headers":{},"body":{"runhub":{"metadata":` + metadata + `}},"metadata":null}`
}

// A malformed frame gets an error frame for its requestId; the socket and
// the chats it streams go on; a resume with lastSequence continues with no
// gap or repeat.
func TestAISDKWS_MalformedFrames(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	f, _, err := dialAISDK(t, th, "", aisdk.AISDKSubprotocol)
	if err != nil {
		t.Fatal(err)
	}
	f.send(sendFrame("good", "chat-ws-bad", `{"sim":{"tokens":20,"token_ms":20,"tools":0}}`))
	bad := map[string]string{
		"":   `not json`,
		"b1": `{"type":"send","requestId":"b1"}`,
		"b2": `{"type":"send","requestId":"b2","id":"c2","headers":{},"body":{},"trigger":"go","messages":[]}`,
		"b3": `{"type":"resume","requestId":"b3","id":"c2","headers":{"a":1},"body":{}}`,
		"b4": `{"type":"resume","requestId":"b4","id":"c2","headers":{},"body":{},"lastSequence":-1}`,
		"b5": `{"type":"send","requestId":"b5","id":"c2","headers":{},"body":{},"trigger":"submit-message","messages":[{"id":"1","role":"user"}]}`,
		"b6": `{"type":"nope","requestId":"b6","id":"c2","headers":{},"body":{}}`,
	}
	for _, fr := range bad {
		f.send(fr)
	}
	errs := map[string]string{}
	var seqs []int64
	ended := false
	for !ended || len(errs) < len(bad) {
		fr := f.read()
		switch fr.Type {
		case "error":
			errs[fr.RequestID] = fr.ErrorText
		case "chunk":
			if fr.RequestID != "good" {
				t.Fatalf("chunk for %s", fr.RequestID)
			}
			seqs = append(seqs, fr.Sequence)
		case "end":
			ended = fr.RequestID == "good"
		}
	}
	for id := range bad {
		if errs[id] == "" {
			t.Errorf("no error frame for %q (errors %v)", id, errs)
		}
	}
	for i, s := range seqs {
		if s != int64(i) {
			t.Fatalf("sequences %v", seqs)
		}
	}
	// A resume after sequence n of a running run (it waits at an
	// approval) continues at n+1, once, to the end.
	f.send(sendFrame("second", "chat-ws-seq", `{"sim":{"tokens":5,"token_ms":1,"tools":0,"reasoning":3,"approval":true}}`))
	approval := ""
	for approval == "" {
		if fr := f.read(); fr.Type == "chunk" && fr.Chunk["type"] == "data-runhub-approval" {
			approval, _ = fr.Chunk["id"].(string)
		}
	}
	g, _, err := dialAISDK(t, th, "", aisdk.AISDKSubprotocol)
	if err != nil {
		t.Fatal(err)
	}
	g.send(`{"type":"resume","requestId":"r","id":"chat-ws-seq","headers":{},"body":{},"lastSequence":4}`)
	next := int64(5)
	for {
		fr := g.read()
		if fr.Type == "end" {
			break
		}
		if fr.Type != "chunk" {
			continue
		}
		if fr.Sequence != next {
			t.Fatalf("resumed after 4: sequence %d, want %d", fr.Sequence, next)
		}
		next++
		if d, _ := fr.Chunk["data"].(map[string]any); fr.Chunk["type"] == "data-runhub-approval" && d["status"] == "pending" {
			m := hubtest.SessionMeta(t, th, "chat-ws-seq")
			hubtest.PostOK(t, th.URL+"/v1/runs/"+m.LatestRun()+"/approvals/"+approval, `{"choice":"once"}`)
		}
	}
	if next < 10 {
		t.Errorf("the resumed stream ended at sequence %d", next)
	}
	g.send(`{"type":"resume","requestId":"r2","id":"chat-ws-seq","headers":{},"body":{}}`)
	if fr := g.read(); fr.Type != "no-active" || fr.RequestID != "r2" {
		t.Errorf("resume of a finished chat: %+v", fr)
	}
}

// Both endpoints take the API's bearer token; one subject cannot start,
// resume or read another's thread or chat.
func TestInterop_Auth(t *testing.T) {
	th := newTestHub(t, hubtest.WithAuth(t, hub.Config{}))
	alice := hubtest.BearerOf(hubtest.Token(t, "alice", time.Hour, ""))
	bob := hubtest.BearerOf(hubtest.Token(t, "bob", time.Hour, ""))
	bobTok := hubtest.Token(t, "bob", time.Hour, "")
	for _, c := range []struct{ path, body string }{
		{"/v1/agui", aguiBody("t-x", "r", "hi", "")},
		{"/v1/aisdk/chat", chatBody("c-x", "submit-message", userMsg, "")},
	} {
		if code, body := hubtest.RawDo(t, "POST", th.URL+c.path, c.body, nil); code != 401 {
			t.Errorf("POST %s without a token: %d %s", c.path, code, body)
		}
	}
	if _, resp, err := dialAISDK(t, th, "", aisdk.AISDKSubprotocol); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("WebSocket without a token: %v %v", resp, err)
	}

	// Alice's thread, waiting for an approval, and her chat, streaming.
	slow := `{"sim":{"tokens":3,"token_ms":1,"tools":1,"approval":true}}`
	ctx := hubtest.Ctx(t, 30*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "POST", th.URL+"/v1/agui", strings.NewReader(aguiBody("t-alice", "a-1", "mine", `,"forwardedProps":{"runhub":{"metadata":`+slow+`}}`)))
	req.Header.Set("Authorization", alice["Authorization"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	interrupt := readUntilInterrupt(t, resp)
	if code := streamHead(t, "POST", th.URL+"/v1/aisdk/chat", chatBody("c-alice", "submit-message", userMsg, `,"runhub":{"metadata":`+slow+`}`), alice); code != 200 {
		t.Fatalf("alice's chat: %d", code)
	}

	// Bob can neither start in, resume, nor read them.
	for _, c := range []struct{ name, path, body string }{
		{"start in alice's thread", "/v1/agui", aguiBody("t-alice", "b-1", "yours", "")},
		{"resume alice's thread", "/v1/agui", aguiBody("t-alice", "b-2", "yours", `,"resume":[{"interruptId":"`+interrupt+`","status":"resolved","payload":"once"}]`)},
		{"retry alice's run", "/v1/agui", aguiBody("t-alice", "a-1", "yours", "")},
		{"start in alice's chat", "/v1/aisdk/chat", chatBody("c-alice", "submit-message", userMsg, "")},
	} {
		if code, body := hubtest.RawDo(t, "POST", th.URL+c.path, c.body, bob); code != 403 {
			t.Errorf("bob: %s: %d %s", c.name, code, body)
		}
	}
	if code, body := hubtest.RawDo(t, "GET", th.URL+"/v1/aisdk/chat/c-alice/stream", "", bob); code != 204 {
		t.Errorf("bob resumes alice's chat: %d %s", code, body)
	}
	if code := streamHead(t, "GET", th.URL+"/v1/aisdk/chat/c-alice/stream", "", alice); code != 200 {
		t.Errorf("alice resumes her chat: %d", code)
	}
	fb, _, err := dialAISDK(t, th, bobTok, aisdk.AISDKSubprotocol)
	if err != nil {
		t.Fatal(err)
	}
	fb.send(`{"type":"resume","requestId":"x","id":"c-alice","headers":{},"body":{}}`)
	if fr := fb.read(); fr.Type != "no-active" {
		t.Errorf("bob resumes alice's chat over the socket: %+v", fr)
	}
	fb.send(sendFrame("y", "c-alice", `{}`))
	if fr := fb.read(); fr.Type != "error" || fr.RequestID != "y" {
		t.Errorf("bob sends in alice's chat over the socket: %+v", fr)
	}
	// Alice's token as a subprotocol, as a browser sends it.
	fa, resp2, err := dialAISDK(t, th, "", aisdk.AISDKSubprotocol, "bearer."+hubtest.Token(t, "alice", time.Hour, ""))
	if err != nil {
		t.Fatal(err)
	}
	if resp2.Header.Get("Sec-WebSocket-Protocol") != aisdk.AISDKSubprotocol {
		t.Errorf("subprotocol %q", resp2.Header.Get("Sec-WebSocket-Protocol"))
	}
	fa.send(`{"type":"resume","requestId":"z","id":"c-alice","headers":{},"body":{}}`)
	if fr := fa.read(); fr.Type != "start" {
		t.Errorf("alice resumes her chat over the socket: %+v", fr)
	}
	// Nothing bob did touched alice's run.
	rid := hubtest.SessionMeta(t, th, "t-alice").Runs[0]
	for _, e := range hubtest.JournalEvents(t, th, rid) {
		if e.Type == protocol.EventApprovalRes {
			t.Errorf("bob resolved alice's approval: %s", e.Payload)
		}
	}
}

// streamHead sends a request and returns its status, leaving the body
// (a stream that may not end) unread.
func streamHead(t *testing.T, method, url, body string, hdr map[string]string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Every SSE stream sends a keep-alive comment while it is quiet.
func TestSSE_KeepAlive(t *testing.T) {
	th := newTestHub(t, hub.Config{SSEKeepAlive: 10 * time.Millisecond})
	slow := `{"sim":{"tokens":3,"token_ms":1,"tools":1,"approval":true}}`
	rid := ""
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/aisdk/chat", chatBody("c-ka", "submit-message", userMsg, `,"runhub":{"metadata":`+slow+`}`)},
		{"GET", "/v1/runs/{rid}/events", ""},
		{"GET", "/v1/runs/{rid}/agui", ""},
		{"GET", "/v1/sessions/c-ka/agui", ""},
		{"GET", "/v1/aisdk/chat/c-ka/stream", ""},
		{"POST", "/v1/agui", aguiBody("t-ka", "ka-1", "slow", `,"forwardedProps":{"runhub":{"metadata":{"sim":{"tokens":2,"token_ms":60000,"tools":0}}}}`)},
		{"POST", "/v1/aisdk/chat", chatBody("c-ka2", "submit-message", userMsg, `,"runhub":{"metadata":{"sim":{"tokens":2,"token_ms":60000,"tools":0}}}`)},
	} {
		if rid == "" && c.method == "GET" {
			rid = hubtest.SessionMeta(t, th, "c-ka").Runs[0]
			hubtest.WaitEvent(t, th, rid, "approval", hubtest.IsType(protocol.EventApprovalReq))
		}
		path := strings.Replace(c.path, "{rid}", rid, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		req, _ := http.NewRequestWithContext(ctx, c.method, th.URL+path, strings.NewReader(c.body))
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		found := false
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if sc.Text() == ": keep-alive" {
				found = true
				break
			}
		}
		resp.Body.Close()
		cancel()
		if !found {
			t.Errorf("%s %s: no keep-alive comment", c.method, path)
		}
	}
	for _, sid := range []string{"c-ka", "t-ka", "c-ka2"} {
		m := hubtest.SessionMeta(t, th, sid)
		hubtest.PostOK(t, th.URL+"/v1/runs/"+m.LatestRun()+"/cancel", "")
	}
}

// The AI SDK socket closes with 4401 when its token expires, like the tab
// socket; the chat's run goes on.
func TestAISDKWS_EndsWhenTokenExpires(t *testing.T) {
	th := newTestHub(t, hubtest.WithAuth(t, hub.Config{}))
	f, _, err := dialAISDK(t, th, hubtest.Token(t, "alice", 2*time.Second, ""), aisdk.AISDKSubprotocol)
	if err != nil {
		t.Fatal(err)
	}
	f.send(sendFrame("s", "c-exp", `{"sim":{"tokens":3,"token_ms":1,"tools":1,"approval":true}}`))
	for {
		_, _, err := f.ws.Read(hubtest.Ctx(t, 20*time.Second))
		if err == nil {
			continue
		}
		if code := websocket.CloseStatus(err); code != websocket.StatusCode(protocol.CloseUnauthorized) {
			t.Fatalf("the socket ended with %v (code %d), want 4401", err, code)
		}
		break
	}
	m := hubtest.SessionMeta(t, th, "c-exp")
	if m.ActiveRun == "" {
		t.Errorf("the run ended with the socket")
	}
	if code, body := hubtest.RawDo(t, "POST", th.URL+"/v1/runs/"+m.ActiveRun+"/cancel", "", hubtest.BearerOf(hubtest.Token(t, "alice", time.Hour, ""))); code != 200 {
		t.Errorf("cancel: %d %s", code, body)
	}
}

// The HTTP chat stream is a UI message stream: its header, data lines of
// chunks, a terminal error as an error chunk, and [DONE] last.
func TestAISDK_StreamFraming(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	for _, c := range []struct {
		chat, sim, want string
	}{
		{"frame-ok", `{"tokens":3,"token_ms":0,"tools":1}`, `"finishReason":"stop"`},
		{"frame-fail", `{"tokens":6,"token_ms":0,"tools":0,"fail":"error"}`, `{"errorText":"simulated provider failure","type":"error"}`},
	} {
		req, _ := http.NewRequestWithContext(hubtest.Ctx(t, 20*time.Second), "POST", th.URL+"/v1/aisdk/chat",
			strings.NewReader(chatBody(c.chat, "submit-message", userMsg, `,"runhub":{"metadata":{"sim":`+c.sim+`}}`)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if l := sc.Text(); l != "" {
				lines = append(lines, l)
			}
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("x-vercel-ai-ui-message-stream") != "v1" || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s: %d %v", c.chat, resp.StatusCode, resp.Header)
		}
		if len(lines) < 3 || lines[len(lines)-1] != "data: [DONE]" || !strings.HasPrefix(lines[0], `data: {"messageId":`) {
			t.Fatalf("%s: stream %q", c.chat, lines)
		}
		if !strings.Contains(strings.Join(lines, "\n"), c.want) {
			t.Errorf("%s: no %s in %q", c.chat, c.want, lines)
		}
	}
}
