package hub_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/auth"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
)

// Real-looking secrets, each placed where a redaction rule recognizes it:
// by its shape (bearer, sk-, JWT, GitHub, AWS, key=value) or by the name of
// the field that holds it (password, api_key, authorization, cookie, …).
// Every value is unique, so finding one anywhere is a leak.
type secretSet struct {
	openAI, openAI2, bearer, basic, jwt, github, aws, password, fieldPassword, fieldKey, cookie, clarify, queued, goal, steer, driverErr string
}

func newSecrets(t testing.TB) secretSet {
	jwtTok, err := auth.Sign([]byte("a-signing-key-for-the-leaked-jwt-0001"), auth.Claims{RegisteredClaims: jwt.RegisteredClaims{
		Subject: "svc-deploy", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
	if err != nil {
		t.Fatal(err)
	}
	return secretSet{
		openAI:        "sk-proj-Q3vT8mWz1LpR7xKc2NbY9fHd4JsA",
		openAI2:       "sk-live-Zr4Wq8Lm2Tx6Vb1Nc9Ks3Hd7Pf5Gj",
		bearer:        "mF9vQ2xL7pZ4tR8wK1nB6cJ3yH5sD0gA",
		basic:         "c3ZjLWRlcGxveTpTM2NyM3RQQHNzdzByZA==",
		jwt:           jwtTok,
		github:        "ghp_R8tY2uI6oP0aS4dF8gH2jK6lZ0xC4vB8nM2q",
		aws:           "AKIAQ7XW3RZ5T2YV8NPL",
		password:      "Tr0ub4dor-and-3-horses",
		fieldPassword: "c0rrect-H0rse-Battery-Staple",
		fieldKey:      "k9-Hq2Lm7Vx4Rt8Zp1Wn",
		cookie:        "sessid-7f3a9c2e1b5d8064",
		clarify:       "Pa55-word-for-clarify-91x",
		queued:        "sk-ant-api03-Xy7Qm2Vz8Lp4Tr6Wn1Bk9Hc3",
		goal:          "AKIAZ4RT8WQ2LM6VX9PK",
		steer:         "ghp_Steer0aS4dF8gH2jK6lZ0xC4vB8nM2q7Rt",
		driverErr:     "Upstream-Pw-77-Qz",
	}
}

func (s secretSet) all() map[string]string {
	return map[string]string{"openai": s.openAI, "openai2": s.openAI2, "bearer": s.bearer, "basic": s.basic, "jwt": s.jwt,
		"jwt signature": s.jwt[strings.LastIndex(s.jwt, ".")+1:], "github": s.github, "aws": s.aws, "password": s.password,
		"password field": s.fieldPassword, "api_key field": s.fieldKey, "cookie": s.cookie, "clarify": s.clarify,
		"queued": s.queued, "goal": s.goal, "steer": s.steer, "driver error": s.driverErr}
}

// marker is plain text next to the secrets: finding it proves a search
// looked at plaintext.
const marker = "REDACTION-MARKER-visible"

// leakyDriver is a driver whose model and tools spill every kind of
// secret: in tokens, progress, tool args (an Authorization header, a
// password field), tool output, tool results, an approval summary, and its
// final error. A run started from the queue just finishes.
type leakyDriver struct{ s secretSet }

func (leakyDriver) Steers() bool { return true }

func (d leakyDriver) Execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	emit := func(typ protocol.EventType, p any) error {
		_, err := x.Emit(ctx, typ, p)
		return err
	}
	s := d.s
	if x.Request.Source == "queue" {
		if err := emit(protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: marker + " queued run"}); err != nil {
			return nil, err
		}
		return &protocol.Usage{Model: "leaky", Provider: "leaky"}, nil
	}
	args, _ := json.Marshal(map[string]any{
		"url":      "https://api.example.com/v1/deploy",
		"headers":  map[string]string{"Authorization": "Basic " + s.basic, "Cookie": "sid=" + s.cookie, "X-Trace": marker},
		"password": s.fieldPassword,
		"api_key":  s.fieldKey,
		"cmd":      "curl -H 'Authorization: Bearer " + s.bearer + "' https://api.example.com",
	})
	result, _ := json.Marshal(map[string]any{"note": "issued " + s.jwt, "marker": marker})
	steps := []struct {
		typ protocol.EventType
		p   any
	}{
		{protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: marker + " your key is " + s.openAI2 + " keep it safe"}},
		{protocol.EventProgress, protocol.ProgressPayload{Text: "logging in with password=" + s.password}},
		{protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: "t1", Name: "http.request", Args: args}},
		{protocol.EventToolUpdated, protocol.ToolUpdatedPayload{ToolCallID: "t1", Stream: "stdout", Text: "export GITHUB_TOKEN=" + s.github + "\naws " + s.aws + "\n"}},
		{protocol.EventToolDone, protocol.ToolDonePayload{ToolCallID: "t1", Status: "ok", DurationMS: 3, Result: result}},
	}
	for _, st := range steps {
		if err := emit(st.typ, st.p); err != nil {
			return nil, err
		}
	}
	if _, err := x.Approval(ctx, protocol.ApprovalRequestedPayload{ApprovalID: "a1", Summary: "call the API with Bearer " + s.bearer,
		Risk: "high", Choices: []string{"once", "deny"}}); err != nil {
		return nil, err
	}
	if _, _, err := x.Clarify(ctx, protocol.ClarifyRequestedPayload{ClarifyID: "c1", Question: "Which password?", Choices: []string{}, InputMode: "text"}, 0); err != nil {
		return nil, err
	}
	select {
	case text := <-x.Steering():
		if err := emit(protocol.EventProgress, protocol.ProgressPayload{Text: "steered: " + text}); err != nil {
			return nil, err
		}
	case <-time.After(10 * time.Second):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return nil, &driver.Error{Code: protocol.ErrorProviderError, Message: "upstream refused password: " + s.driverErr}
}

// rawTab records every frame a socket receives.
type rawTab struct {
	ws   *websocket.Conn
	mu   sync.Mutex
	data bytes.Buffer
	done chan struct{}
}

func openRawTab(t *testing.T, th *testHub, first ...string) *rawTab {
	t.Helper()
	ws := rawSocket(t, th, nil)
	rt := &rawTab{ws: ws, done: make(chan struct{})}
	go func() {
		defer close(rt.done)
		for {
			_, b, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			rt.mu.Lock()
			rt.data.Write(b)
			rt.data.WriteByte('\n')
			rt.mu.Unlock()
		}
	}()
	for _, m := range first {
		sendRaw(t, ws, m)
	}
	return rt
}

func (rt *rawTab) waitFor(t *testing.T, what string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		rt.mu.Lock()
		ok := bytes.Contains(rt.data.Bytes(), []byte(what))
		rt.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("tab never received %q", what)
}

func (rt *rawTab) bytes() []byte {
	rt.ws.Close(websocket.StatusNormalClosure, "")
	<-rt.done
	return rt.data.Bytes()
}

// syncWriter is a goroutine-safe log sink.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// Secrets that a user types (start message, metadata, clarify answer,
// queued message, steer text, goal) and that a driver spills (tokens,
// progress, tool args with an Authorization header and password fields,
// tool output, results, an approval summary, its error) reach neither the
// journal file, the logs, the WebSocket frames (live and replayed) nor the
// HTTP and SSE answers.
func TestRedaction_EndToEnd(t *testing.T) {
	s := newSecrets(t)
	logs := &syncWriter{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	th := newTestHubRuntime(t, hub.Config{Logger: logger}, runtimeOpts{Adapter: executor.Options{Logger: logger,
		Drivers: map[string]driver.Driver{"sim": &sim.Driver{}, "leaky": leakyDriver{s}}}, Bolt: true})
	live := openRawTab(t, th, `{"type":"hello","client":"live"}`, `{"type":"watch","all":true}`)
	ctl := th.Dial(t)
	ctx := ctxT(t, 60*time.Second)

	md, _ := json.Marshal(map[string]any{"api_key": s.fieldKey, "notes": "Authorization: Bearer " + s.bearer})
	res := startRun(t, ctl, protocol.Control{Op: protocol.OpStart, Provider: "leaky", Metadata: md,
		Message: "deploy with key " + s.openAI + " " + marker})
	sendRaw(t, live.ws, `{"type":"focus","session_id":"`+res.SessionID+`"}`)

	waitStatus := func(what string, cond func(protocol.SessionStatus) bool) protocol.SessionStatus {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			var st protocol.SessionStatus
			do(t, "GET", th.URL+"/v1/sessions/"+res.SessionID, "", nil, &st)
			if cond(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %+v", what, st)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitStatus("the approval", func(st protocol.SessionStatus) bool { return st.PendingApproval != nil })
	if _, err := ctl.Control(ctx, protocol.Control{Op: protocol.OpGoal, SessionID: res.SessionID, Action: protocol.GoalSet, Text: "ship with " + s.goal}); err != nil {
		t.Fatal(err)
	}
	if r, err := ctl.Control(ctx, protocol.Control{Op: protocol.OpQueue, SessionID: res.SessionID, Message: "then rotate " + s.queued}); err != nil || !r.Accepted {
		t.Fatalf("queue: %+v %v", r, err)
	}
	if r, err := ctl.Control(ctx, protocol.Control{Op: protocol.OpApprove, RunID: res.RunID, ApprovalID: "a1", Choice: "once"}); err != nil || !r.Accepted {
		t.Fatalf("approve: %+v %v", r, err)
	}
	waitStatus("the clarify", func(st protocol.SessionStatus) bool { return st.PendingClarify != nil })
	if r, err := ctl.Control(ctx, protocol.Control{Op: protocol.OpClarify, RunID: res.RunID, ClarifyID: "c1", Response: "password: " + s.clarify}); err != nil || !r.Accepted {
		t.Fatalf("clarify: %+v %v", r, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := ctl.Control(ctx, protocol.Control{Op: protocol.OpQueue, SessionID: res.SessionID, Mode: protocol.ModeSteer, Message: "use " + s.steer})
		if err == nil && r.Accepted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("steer: %+v %v", r, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The leaky run fails; the queued message runs next and completes.
	final := waitStatus("the queued run to end", func(st protocol.SessionStatus) bool {
		return st.Terminal && st.RunID != res.RunID && st.QueueDepth == 0
	})
	live.waitFor(t, `"terminal":true,"payload":{"status":"completed"`, 10*time.Second)

	// What a tab replays, what HTTP and SSE answer.
	replay := openRawTab(t, th, `{"type":"hello","client":"replay"}`, `{"type":"watch","all":true}`,
		`{"type":"focus","session_id":"`+res.SessionID+`","cursor":"`+res.RunID+`:0"}`)
	replay.waitFor(t, `"type":"replayed"`, 10*time.Second)
	var answers bytes.Buffer
	get := func(path string, hdr map[string]string) {
		req, _ := http.NewRequest("GET", th.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if hdr != nil { // SSE ends after the terminal event
			io.Copy(&answers, bufio.NewReader(resp.Body))
			return
		}
		io.Copy(&answers, resp.Body)
	}
	get("/v1/sessions", nil)
	get("/v1/sessions/"+res.SessionID, nil)
	for _, rid := range []string{res.RunID, final.RunID} {
		get("/v1/runs/"+rid, nil)
		get("/v1/runs/"+rid+"/events?limit=1000", nil)
		get("/v1/runs/"+rid+"/events", map[string]string{"Accept": "text/event-stream"})
	}
	files, err := bolt.Files(th.Path) // the journal file and its event log
	if err != nil || len(files) < 2 {
		t.Fatalf("journal files: %v, %v", files, err)
	}
	var journalBytes []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		journalBytes = append(journalBytes, b...)
	}

	for name, data := range map[string][]byte{"journal file": journalBytes, "live frames": live.bytes(),
		"replayed frames": replay.bytes(), "HTTP and SSE answers": answers.Bytes()} {
		if !bytes.Contains(data, []byte(marker)) {
			t.Errorf("%s: the plaintext marker is missing; the search proves nothing", name)
		}
		if !bytes.Contains(data, []byte(`[REDACTED]`)) {
			t.Errorf("%s: nothing was redacted", name)
		}
		for what, secret := range s.all() {
			if bytes.Contains(data, []byte(secret)) {
				i := bytes.Index(data, []byte(secret))
				t.Errorf("%s holds the %s secret: …%s…", name, what, data[max(0, i-120):min(len(data), i+len(secret)+40)])
			}
		}
	}
	for what, secret := range s.all() {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the logs hold the %s secret", what)
		}
	}
}
