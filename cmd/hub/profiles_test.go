package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/runhub/runhub/hub/auth"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// Keys that no redaction pattern recognizes: only runhub's own handling
// keeps them out of the journal, the logs and the browser.
const (
	openaiKey = "lk9Xq2Rw7Tz4Vb6Nm3Hp"
	scriptKey = "zq8Wv1Lc5Ry3Kd7Fs2Gj"
)

// fakeOpenAI is an OpenAI-compatible upstream that wants openaiKey; a
// message containing "leak" is answered 401 with the key echoed back, as
// some servers do.
func fakeOpenAI(t *testing.T) (*httptest.Server, func() int) {
	return fakeOpenAIKey(t, openaiKey)
}

// fakeOpenAIKey is fakeOpenAI wanting key, or none when key is "" (a
// local server).
func fakeOpenAIKey(t *testing.T, key string) (*httptest.Server, func() int) {
	var mu sync.Mutex
	authed := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"message":"no key"}}`)
			return
		}
		mu.Lock()
		authed++
		mu.Unlock()
		if last := req.Messages[len(req.Messages)-1].Content; strings.Contains(last, "leak") {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided: `+openaiKey+`","code":"invalid_api_key"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{"Hi ", "there"} {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", c)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
		io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, func() int {
		mu.Lock()
		defer mu.Unlock()
		return authed
	}
}

// writeProfiles writes a profile file: "local" (openai, the default) and
// "script" (exec), each with its own key variable.
func writeProfiles(t *testing.T, baseURL string) string {
	dir := t.TempDir()
	script := filepath.Join(dir, "agent.sh")
	os.WriteFile(script, []byte(`IFS= read -r start
case "$start" in
  *crash*) echo "debug: using key $SCRIPT_KEY" >&2; exit 4;;
esac
echo '{"type":"token.delta","payload":{"message_id":"m1","text":"script says hi"}}'
echo '{"type":"done","payload":{"status":"completed","usage":null}}'
`), 0o755)
	file := filepath.Join(dir, "profiles.json")
	body := fmt.Sprintf(`{
  "default": "local",
  "profiles": {
    "local":  {"driver": "openai", "base_url": %q, "model": "m-local", "api_key_env": "RUNHUB_TEST_OPENAI_KEY", "idle_timeout": "10s"},
    "script": {"driver": "exec", "command": "/bin/sh", "args": [%q], "api_key_env": "SCRIPT_KEY", "cancel_grace": "1s", "kill_grace": "1s"}
  }
}`, baseURL, script)
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func profileEnv(file string) []string {
	return []string{"RUNHUB_PROFILES=" + file, "RUNHUB_TEST_OPENAI_KEY=" + openaiKey, "SCRIPT_KEY=" + scriptKey, "RUNHUB_LOG_LEVEL=debug"}
}

// rawTab is a WebSocket tab that keeps every frame it receives.
type rawTab struct {
	t      *testing.T
	ws     *websocket.Conn
	mu     sync.Mutex
	frames [][]byte
	msgs   chan json.RawMessage
	done   chan struct{}
}

func dialRaw(t *testing.T, ctx context.Context, url string) *rawTab {
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(16 << 20)
	tab := &rawTab{t: t, ws: ws, msgs: make(chan json.RawMessage, 10000), done: make(chan struct{})}
	go func() {
		defer close(tab.done)
		for {
			_, data, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			tab.mu.Lock()
			tab.frames = append(tab.frames, data)
			tab.mu.Unlock()
			for _, line := range protocol.SplitBatch(data) {
				tab.msgs <- append(json.RawMessage(nil), line...)
			}
		}
	}()
	t.Cleanup(func() {
		ws.Close(websocket.StatusNormalClosure, "bye")
		<-tab.done
	})
	tab.send(ctx, map[string]any{"type": "hello", "client": "profiles-test"})
	tab.next(ctx, func(typ string, _ json.RawMessage) bool { return typ == "welcome" })
	return tab
}

func (tab *rawTab) send(ctx context.Context, v any) {
	b, _ := json.Marshal(v)
	if err := tab.ws.Write(ctx, websocket.MessageText, b); err != nil {
		tab.t.Fatal(err)
	}
}

// next returns the first message (after skipping others) that match accepts.
func (tab *rawTab) next(ctx context.Context, match func(typ string, m json.RawMessage) bool) json.RawMessage {
	tab.t.Helper()
	for {
		select {
		case m := <-tab.msgs:
			var h struct {
				Type string `json:"type"`
			}
			json.Unmarshal(m, &h)
			if match(h.Type, m) {
				return m
			}
		case <-ctx.Done():
			tab.t.Fatalf("no matching message: %v", ctx.Err())
		}
	}
}

// control sends a control and returns its control_result or error message.
func (tab *rawTab) control(ctx context.Context, id string, c map[string]any) (typ string, m json.RawMessage) {
	tab.t.Helper()
	c["type"], c["id"] = "control", id
	tab.send(ctx, c)
	m = tab.next(ctx, func(typ string, m json.RawMessage) bool {
		var r struct {
			ID  string `json:"id"`
			Ref string `json:"ref"`
		}
		json.Unmarshal(m, &r)
		return (typ == "control_result" && r.ID == id) || (typ == "error" && r.Ref == id)
	})
	json.Unmarshal(m, &struct {
		Type *string `json:"type"`
	}{&typ})
	return typ, m
}

// start starts a run over the socket, focuses its session and returns the
// run's events up to its terminal one.
func (tab *rawTab) start(ctx context.Context, id string, c map[string]any) []protocol.Envelope {
	tab.t.Helper()
	c["op"] = "start"
	typ, m := tab.control(ctx, id, c)
	var res protocol.ControlResult
	json.Unmarshal(m, &res)
	if typ != "control_result" || !res.Accepted {
		tab.t.Fatalf("start %v: %s", c, m)
	}
	tab.send(ctx, map[string]any{"type": "focus", "session_id": res.SessionID})
	var out []protocol.Envelope
	for {
		m := tab.next(ctx, func(typ string, _ json.RawMessage) bool { return typ == "event" })
		var em struct {
			Event protocol.Envelope `json:"event"`
		}
		json.Unmarshal(m, &em)
		// On a tab already focused on the session the run's first live
		// events may come before the start's answer (tab.control skips
		// them); the focus below restarts from seq 1. Keep each seq once.
		if em.Event.RunID != res.RunID || em.Event.Seq != uint64(len(out))+1 {
			continue
		}
		out = append(out, em.Event)
		if em.Event.Terminal {
			return out
		}
	}
}

func (tab *rawTab) allFrames() []byte {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	return bytes.Join(tab.frames, []byte("\n"))
}

func lastError(t *testing.T, ev []protocol.Envelope) protocol.ErrorPayload {
	t.Helper()
	last := ev[len(ev)-1]
	if last.Type != protocol.EventError || !last.Terminal {
		t.Fatalf("run ended %s, want a terminal error", last.Type)
	}
	p, _ := protocol.DecodePayload[protocol.ErrorPayload](&last)
	return p
}

// httpBody does one request and returns status and body.
func httpBody(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// A hub with a profile file: the workbench's profile list holds names and
// kinds only, an unknown profile is a bad_request over HTTP and over the
// socket, runs pick their driver by profile (the default without one), and
// neither key ever reaches the journal file, the logs, a WebSocket frame or
// an HTTP answer — even when the upstream echoes it back or the command
// prints it.
func TestProcess_Profiles(t *testing.T) {
	upstream, authed := fakeOpenAI(t)
	data := t.TempDir()
	p := startHub(t, data, profileEnv(writeProfiles(t, upstream.URL))...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var answers [][]byte

	// The profile list, with each profile's capabilities.
	code, body := httpBody(t, "GET", p.URL()+"/v1/profiles", "")
	answers = append(answers, body)
	if code != 200 || strings.TrimSpace(string(body)) != `{"profiles":[`+
		`{"name":"local","driver":"openai","capabilities":["cancel","queue","goal","attachments","reasoning","usage"],"default":true},`+
		`{"name":"script","driver":"exec","capabilities":["cancel","approval","clarify","steer","queue","attachments","workspace","reasoning","usage","tools"]},`+
		`{"name":"sim","driver":"sim","capabilities":["cancel","approval","clarify","steer","queue","goal","attachments","reasoning","usage","tools"]}]}` {
		t.Fatalf("GET /v1/profiles: %d %s", code, body)
	}

	// An unknown profile over HTTP: 400 bad_request, no run.
	_, body = httpBody(t, "POST", p.URL()+"/v1/sessions", `{}`)
	var sess struct {
		SessionID string `json:"session_id"`
	}
	json.Unmarshal(body, &sess)
	code, body = httpBody(t, "POST", p.URL()+"/v1/sessions/"+sess.SessionID+"/runs", `{"message":"hi","profile":"nope"}`)
	answers = append(answers, body)
	var eb protocol.ErrorBody
	json.Unmarshal(body, &eb)
	if code != 400 || eb.Error == nil || eb.Error.Code != protocol.CodeBadRequest || !strings.Contains(eb.Error.Message, `profile: unknown profile "nope"`) {
		t.Fatalf("HTTP start with an unknown profile: %d %s", code, body)
	}
	code, body = httpBody(t, "GET", p.URL()+"/v1/sessions/"+sess.SessionID, "")
	var st protocol.SessionStatus
	json.Unmarshal(body, &st)
	if code != 200 || st.RunID != "" {
		t.Fatalf("the refused start made a run: %d %s", code, body)
	}

	tab := dialRaw(t, ctx, "ws://"+p.addr+"/v1/ws")

	// An unknown profile over the socket: error bad_request, the socket stays.
	typ, m := tab.control(ctx, "c-nope", map[string]any{"op": "start", "message": "hi", "profile": "nope"})
	var em protocol.ErrorMessage
	json.Unmarshal(m, &em)
	if typ != "error" || em.Code != protocol.CodeBadRequest || !strings.Contains(em.Message, `profile: unknown profile "nope"`) {
		t.Fatalf("socket start with an unknown profile: %s", m)
	}

	// No profile: the file's default, "local" (openai).
	var runs []string
	ev := tab.start(ctx, "c1", map[string]any{"message": "hello"})
	runs = append(runs, ev[0].RunID)
	if last := ev[len(ev)-1]; last.Type != protocol.EventDone || tokenText(ev) != "Hi there" {
		t.Fatalf("default-profile run: %s %q", last.Type, tokenText(ev))
	}
	rs, _ := protocol.DecodePayload[protocol.RunStartedPayload](&ev[0])
	if rs.Profile != "local" || rs.Provider != "openai" || rs.Model != "m-local" {
		t.Errorf("run.started = %+v", rs)
	}
	sid := ev[0].SessionID

	// The upstream echoes the key in its 401: error auth, key scrubbed.
	ev = tab.start(ctx, "c2", map[string]any{"session_id": sid, "message": "please leak", "profile": "local"})
	runs = append(runs, ev[0].RunID)
	if ep := lastError(t, ev); ep.Code != "auth" || !strings.Contains(ep.Message, "Incorrect API key provided: [REDACTED]") {
		t.Errorf("auth error = %+v", ep)
	}
	// The session's latest run is the openai profile's, whose model judges
	// goals: the idle session offers goal (it offers none after the exec
	// runs below).
	_, body = httpBody(t, "GET", p.URL()+"/v1/sessions/"+sid, "")
	st = protocol.SessionStatus{}
	json.Unmarshal(body, &st)
	if strings.Join(st.ActiveControls, ",") != "start,queue,goal" {
		t.Errorf("idle session of an openai run offers %v", st.ActiveControls)
	}

	// The exec profile: a run, and a crash whose stderr holds its key.
	ev = tab.start(ctx, "c3", map[string]any{"session_id": sid, "message": "fine", "profile": "script"})
	runs = append(runs, ev[0].RunID)
	if last := ev[len(ev)-1]; last.Type != protocol.EventDone || tokenText(ev) != "script says hi" {
		t.Fatalf("script run: %s %q", last.Type, tokenText(ev))
	}
	ev = tab.start(ctx, "c4", map[string]any{"session_id": sid, "message": "crash", "profile": "script"})
	runs = append(runs, ev[0].RunID)
	if ep := lastError(t, ev); ep.Code != protocol.ErrorProviderError || !strings.Contains(ep.Message, "exit status 4") ||
		!strings.Contains(ep.Message, "debug: using key [REDACTED]") {
		t.Errorf("crash error = %+v", ep)
	}
	if authed() < 2 {
		t.Fatalf("the upstream saw the key %d times: the search below would prove nothing", authed())
	}

	// The session's latest run was the exec profile's, which evaluates no
	// goal: the session offers none, and a goal is unsupported, naming the
	// profile, with nothing changed.
	_, body = httpBody(t, "GET", p.URL()+"/v1/sessions/"+sid, "")
	answers = append(answers, body)
	st = protocol.SessionStatus{}
	json.Unmarshal(body, &st)
	if strings.Join(st.ActiveControls, ",") != "start,queue" {
		t.Errorf("idle session of an exec run offers %v", st.ActiveControls)
	}
	code, body = httpBody(t, "POST", p.URL()+"/v1/sessions/"+sid+"/goal", `{"action":"set","text":"ship it"}`)
	answers = append(answers, body)
	var gr protocol.ControlResult
	json.Unmarshal(body, &gr)
	if code != 501 || gr.Status != protocol.ResultUnsupported || !strings.Contains(gr.Message, `profile "script" cannot do goal`) {
		t.Errorf("goal on an exec session: %d %s", code, body)
	}

	// Every answer over HTTP about the session and its runs.
	_, body = httpBody(t, "GET", p.URL()+"/v1/sessions/"+sid, "")
	answers = append(answers, body)
	_, body = httpBody(t, "GET", p.URL()+"/v1/sessions", "")
	answers = append(answers, body)
	for _, rid := range runs {
		for _, e := range allEvents(t, p.URL(), rid) {
			answers = append(answers, e.Payload)
		}
		_, body = httpBody(t, "GET", p.URL()+"/v1/runs/"+rid, "")
		answers = append(answers, body)
	}
	if len(runs) != 4 {
		t.Fatalf("runs %v", runs)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	journalBytes := embeddedJournalBytes(t, data)
	if !strings.Contains(p.out.String(), "level=DEBUG") && !strings.Contains(p.out.String(), "level=INFO") {
		t.Fatalf("no logs captured: %s", p.out.String())
	}
	for _, key := range []string{openaiKey, scriptKey} {
		for where, b := range map[string][]byte{"the journal (its file and event log)": journalBytes, "the logs": []byte(p.out.String()),
			"a WebSocket frame": tab.allFrames(), "an HTTP answer": bytes.Join(answers, nil)} {
			if bytes.Contains(b, []byte(key)) {
				t.Errorf("a key is in %s", where)
			}
		}
	}
}

// Profiles work in runner mode: the hub refuses unknown profiles, the
// runner builds the same drivers from the same file and executes them.
func TestRunners_Profiles(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	upstream, _ := fakeOpenAI(t)
	env := append([]string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_LEASE_TTL=2s"}, profileEnv(writeProfiles(t, upstream.URL))...)
	p := startHub(t, t.TempDir(), env...)
	r := startRunner(t, env...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tab := dialRaw(t, ctx, "ws://"+p.addr+"/v1/ws")

	typ, m := tab.control(ctx, "c-nope", map[string]any{"op": "start", "message": "hi", "profile": "nope"})
	if typ != "error" || !strings.Contains(string(m), "bad_request") {
		t.Fatalf("unknown profile in runner mode: %s", m)
	}
	ev := tab.start(ctx, "c1", map[string]any{"message": "hello", "profile": "local"})
	if last := ev[len(ev)-1]; last.Type != protocol.EventDone || tokenText(ev) != "Hi there" {
		t.Fatalf("openai run in a runner: %s %q\nrunner: %s", last.Type, tokenText(ev), r.out.String())
	}
	ev = tab.start(ctx, "c2", map[string]any{"session_id": ev[0].SessionID, "message": "fine", "profile": "script"})
	if last := ev[len(ev)-1]; last.Type != protocol.EventDone || tokenText(ev) != "script says hi" {
		t.Fatalf("exec run in a runner: %s %q\nrunner: %s", last.Type, tokenText(ev), r.out.String())
	}
	for _, key := range []string{openaiKey, scriptKey} {
		if strings.Contains(p.out.String()+r.out.String(), key) || bytes.Contains(tab.allFrames(), []byte(key)) {
			t.Error("a key is in the logs or a frame")
		}
	}
}

// On a hub with authentication, the profile list is as protected as the
// rest of the API.
func TestProcess_ProfilesNeedAuth(t *testing.T) {
	secret := strings.Repeat("s", 32)
	p := startHub(t, t.TempDir(), "RUNHUB_JWT_SECRET="+secret)
	if code, body := httpBody(t, "GET", p.URL()+"/v1/profiles", ""); code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d %s", code, body)
	}
	tok, err := auth.Sign([]byte(secret), auth.Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "u1",
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", p.URL()+"/v1/profiles", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"name":"sim"`) {
		t.Fatalf("with a token: %d %s", resp.StatusCode, body)
	}
}
