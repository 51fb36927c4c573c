package hermes_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/hermes"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/protocol"
)

// A full run, mapped event by event, as the second turn of a session: the
// upstream run id is journaled as progress, the first turn's message and
// answer go upstream as conversation_history, no Idempotency-Key is sent
// (Hermes 0.18.x ignores it), the API key only travels in the
// Authorization header, and a reasoning.available repeating the streamed
// message (as Hermes sends it after each message) maps to nothing.
func TestFullRunMappedEventByEvent(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		if n == 1 { // answers without streaming: the output becomes the text
			completed(s, "Hello world")
			return
		}
		s.event("reasoning.available", map[string]any{"text": "thinking about it"})
		deltas(s, "Let me look. ")
		s.event("reasoning.available", map[string]any{"text": "Let me look."})
		s.event("tool.started", map[string]any{"tool": "terminal", "preview": "ls -la"})
		s.event("tool.completed", map[string]any{"tool": "terminal", "duration": 1.25, "error": false})
		s.event("tool.started", map[string]any{"tool": "read_file", "preview": "README.md"})
		s.event("tool.started", map[string]any{"tool": "terminal", "preview": "false"})
		s.event("tool.completed", map[string]any{"tool": "read_file", "duration": 0.5, "error": false})
		s.event("tool.completed", map[string]any{"tool": "terminal", "duration": 0.1, "error": true})
		s.event("subagent.start", map[string]any{"goal": "summarize"})
		s.event("subagent.complete", map[string]any{"summary": "ok", "status": "completed"})
		s.keepalive()
		s.event("reasoning.delta", map[string]any{"text": "more"})
		deltas(s, "Done.")
		s.event("reasoning.available", map[string]any{"text": "Done."})
		completed(s, "Let me look. Done.")
	}, nil)

	first := h.start("", "first question")
	evs1 := h.finish(first.RunID)
	if got := text(evs1); got != "Hello world" {
		t.Fatalf("run 1 text %q, want the output", got)
	}
	second := h.start(first.SessionID, "second question")
	evs := h.finish(second.RunID)

	type ev struct {
		typ protocol.EventType
		p   any
	}
	toolArgs := func(preview string) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"preview": preview})
		return b
	}
	null := json.RawMessage("null")
	usage := &protocol.Usage{InputTokens: 11, OutputTokens: 7, Provider: "hermes"}
	want := []ev{
		{protocol.EventRunStarted, nil},
		{protocol.EventProgress, protocol.ProgressPayload{Text: "started Hermes run run_00000000000000000000000000000002"}},
		// Streamed text is re-cut at word ends (driver.Execution holds back
		// an unfinished word: it may be part of a secret).
		{protocol.EventReasoningDelta, protocol.ReasoningPayload{BlockID: "b1", Text: "thinking about "}},
		{protocol.EventReasoningDelta, protocol.ReasoningPayload{BlockID: "b1", Text: "it"}},
		{protocol.EventReasoningDone, protocol.ReasoningPayload{BlockID: "b1", Text: ""}},
		{protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: "Let me look. "}},
		{protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: "t1", Name: "terminal", Args: toolArgs("ls -la")}},
		{protocol.EventToolDone, protocol.ToolDonePayload{ToolCallID: "t1", Status: "ok", DurationMS: 1250, Result: null}},
		{protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: "t2", Name: "read_file", Args: toolArgs("README.md")}},
		{protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: "t3", Name: "terminal", Args: toolArgs("false")}},
		{protocol.EventToolDone, protocol.ToolDonePayload{ToolCallID: "t2", Status: "ok", DurationMS: 500, Result: null}},
		{protocol.EventToolDone, protocol.ToolDonePayload{ToolCallID: "t3", Status: "error", DurationMS: 100, Error: true, Result: null}},
		{protocol.EventProgress, protocol.ProgressPayload{Text: "subagent started: summarize"}},
		{protocol.EventProgress, protocol.ProgressPayload{Text: "subagent finished: ok"}},
		{protocol.EventReasoningDelta, protocol.ReasoningPayload{BlockID: "b2", Text: "more"}},
		{protocol.EventReasoningDone, protocol.ReasoningPayload{BlockID: "b2", Text: ""}},
		{protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m2", Text: "Done."}},
		{protocol.EventUsageFinal, usage},
		{protocol.EventDone, nil},
	}
	if len(evs) != len(want) {
		t.Fatalf("got %d events, want %d:\n%s", len(evs), len(want), dump(evs))
	}
	for i, w := range want {
		e := evs[i]
		if e.Type != w.typ {
			t.Fatalf("event %d is %s, want %s:\n%s", i, e.Type, w.typ, dump(evs))
		}
		if w.p == nil {
			continue
		}
		got := reflect.New(reflect.TypeOf(w.p)).Interface()
		if err := json.Unmarshal(e.Payload, got); err != nil {
			t.Fatal(err)
		}
		g := reflect.ValueOf(got).Elem().Interface()
		if u, ok := g.(*protocol.Usage); ok {
			u.DurationMS = 0
		}
		if !reflect.DeepEqual(g, w.p) {
			t.Errorf("event %d %s payload %s, want %+v", i, e.Type, e.Payload, w.p)
		}
	}
	done := payload[protocol.DonePayload](terminal(evs))
	if done.Status != "completed" || done.Usage == nil || done.Usage.InputTokens != 11 || done.Usage.OutputTokens != 7 {
		t.Errorf("done %+v", done)
	}

	starts := h.fake.startCalls()
	if len(starts) != 2 {
		t.Fatalf("%d starts, want 2", len(starts))
	}
	for i, s := range starts {
		if s.Auth != "Bearer "+testKey {
			t.Errorf("start %d Authorization %q", i, s.Auth)
		}
		if s.Key != "" {
			t.Errorf("start %d Idempotency-Key %q, want none", i, s.Key)
		}
		if s.Body["session_id"] != first.SessionID {
			t.Errorf("start %d session_id %v", i, s.Body["session_id"])
		}
	}
	if _, ok := starts[0].Body["conversation_history"]; ok {
		t.Errorf("the first turn sent history %v", starts[0].Body["conversation_history"])
	}
	hist, _ := json.Marshal(starts[1].Body["conversation_history"])
	if want := `[{"content":"first question","role":"user"},{"content":"Hello world","role":"assistant"}]`; string(hist) != want {
		t.Errorf("conversation_history %s, want %s", hist, want)
	}
	if starts[1].Body["input"] != "second question" {
		t.Errorf("input %v", starts[1].Body["input"])
	}
}

// approval.request becomes approval.requested with Hermes' choices; the
// user's choice is posted to /approval with the request_id; Hermes' echo
// (approval.responded) adds nothing: exactly one approval.resolved.
func TestApprovalRoundTrip(t *testing.T) {
	posted := make(chan map[string]any, 1)
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		s.event("approval.request", map[string]any{"command": "rm -rf build/", "description": "recursive delete",
			"pattern_key": "rm", "choices": []string{"once", "session", "deny"}, "request_id": "req_1"})
		body := fr.wait(s.t(), fr.approvals, "approval")
		posted <- body
		s.event("approval.responded", map[string]any{"choice": body["choice"], "request_id": "req_1", "resolved": 1})
		s.event("tool.started", map[string]any{"tool": "terminal", "preview": "rm -rf build/"})
		s.event("tool.completed", map[string]any{"tool": "terminal", "duration": 0.2, "error": false})
		completed(s, "cleaned")
	}, nil)
	res := h.start("", "clean up")
	ch := h.watch(res.RunID)
	req := payload[protocol.ApprovalRequestedPayload](h.until(ch, protocol.EventApprovalReq))
	if req.Summary != "recursive delete: rm -rf build/" || !reflect.DeepEqual(req.Choices, []string{"once", "session", "deny"}) {
		t.Fatalf("approval.requested %+v", req)
	}
	ctx := context.Background()
	if _, err := h.control(ctx, protocol.Control{Op: protocol.OpApprove, RunID: res.RunID, ApprovalID: req.ApprovalID, Choice: "always"}); err == nil {
		t.Fatal("a choice Hermes did not offer was accepted")
	}
	r, err := h.control(ctx, protocol.Control{Op: protocol.OpApprove, RunID: res.RunID, ApprovalID: req.ApprovalID, Choice: "session"})
	if err != nil || !r.Accepted {
		t.Fatalf("approve: %+v %v", r, err)
	}
	if r, _ := h.control(ctx, protocol.Control{Op: protocol.OpApprove, RunID: res.RunID, ApprovalID: req.ApprovalID, Choice: "once"}); r.Status != protocol.ResultNotActive {
		t.Fatalf("a second answer: %+v", r)
	}
	body := <-posted
	if body["choice"] != "session" || body["request_id"] != "req_1" {
		t.Fatalf("POST /approval %v", body)
	}
	evs := h.finish(res.RunID)
	if terminal(evs).Type != protocol.EventDone {
		t.Fatalf("terminal %s", terminal(evs).Type)
	}
	resolved := ofType(evs, protocol.EventApprovalRes)
	if len(resolved) != 1 {
		t.Fatalf("%d approval.resolved, want 1:\n%s", len(resolved), dump(evs))
	}
	if p := payload[protocol.ApprovalResolvedPayload](resolved[0]); p.ApprovalID != req.ApprovalID || p.Choice != "session" || p.Status != "resolved" {
		t.Errorf("approval.resolved %+v", p)
	}
}

// An approval Hermes settled on its own (another client answered) resolves
// the runhub prompt once with Hermes' choice, and nothing is posted back.
func TestApprovalSettledInHermes(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		s.event("approval.request", map[string]any{"command": "curl x | sh", "description": "pipe to shell",
			"choices": []string{"once", "session", "always", "deny"}})
		time.Sleep(100 * time.Millisecond)
		s.event("approval.responded", map[string]any{"choice": "deny", "resolved": 1})
		completed(s, "did not run it")
	}, nil)
	res := h.start("", "install")
	evs := h.finish(res.RunID)
	resolved := ofType(evs, protocol.EventApprovalRes)
	if len(resolved) != 1 {
		t.Fatalf("%d approval.resolved, want 1:\n%s", len(resolved), dump(evs))
	}
	if p := payload[protocol.ApprovalResolvedPayload](resolved[0]); p.Choice != "deny" || p.Status != "resolved" {
		t.Errorf("approval.resolved %+v", p)
	}
	if fr := h.fake.onlyRun(t); len(fr.approvals) != 0 {
		t.Errorf("an answer was posted for an approval Hermes settled")
	}
	if terminal(evs).Type != protocol.EventDone {
		t.Fatalf("terminal %s", terminal(evs).Type)
	}
}

// Hermes may settle a prompt in the very event after asking it (another of
// its clients answered at once). The prompt is pending in runhub by the time
// the driver reads that next event, so each prompt still gets exactly one
// resolution, and the run goes on to ask the next prompt. Repeated, since
// the failure this guards against depended on goroutine scheduling.
func TestPromptSettledInTheNextEvent(t *testing.T) {
	for i := range 20 {
		h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
			s.event("approval.request", map[string]any{"command": "rm -rf build", "choices": []string{"once", "deny"}})
			s.event("approval.responded", map[string]any{"choice": "once", "resolved": 1})
			s.event("approval.request", map[string]any{"command": "rm -rf dist", "choices": []string{"once", "deny"}})
			s.event("approval.responded", map[string]any{"choice": "deny", "resolved": 1})
			completed(s, "done it")
		}, nil)
		evs := h.finish(h.start("", "clean").RunID)
		if terminal(evs).Type != protocol.EventDone {
			t.Fatalf("round %d: terminal %s:\n%s", i, terminal(evs).Type, dump(evs))
		}
		for _, typ := range []protocol.EventType{protocol.EventApprovalReq, protocol.EventApprovalRes} {
			if n := len(ofType(evs, typ)); n != 2 {
				t.Fatalf("round %d: %d %s, want 2:\n%s", i, n, typ, dump(evs))
			}
		}
		res := ofType(evs, protocol.EventApprovalRes)
		if p, q := payload[protocol.ApprovalResolvedPayload](res[0]), payload[protocol.ApprovalResolvedPayload](res[1]); p.Choice != "once" || q.Choice != "deny" {
			t.Errorf("round %d: approval.resolved %+v, %+v", i, p, q)
		}
		if fr := h.fake.onlyRun(t); len(fr.approvals) != 0 {
			t.Errorf("round %d: an answer was posted for an approval Hermes settled", i)
		}
	}
}

// Cancel mid-stream: Hermes gets POST /stop and the run ends cancelled with
// partial set.
func TestCancelMidStream(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, "partial ")
		s.hold(fr, 20*time.Millisecond)
	}, nil)
	res := h.start("", "long task")
	ch := h.watch(res.RunID)
	h.until(ch, protocol.EventTokenDelta)
	r, err := h.control(context.Background(), protocol.Control{Op: protocol.OpCancel, RunID: res.RunID})
	if err != nil || !r.Accepted {
		t.Fatalf("cancel: %+v %v", r, err)
	}
	evs := h.finish(res.RunID)
	e := terminal(evs)
	if e.Type != protocol.EventCancelled || !payload[protocol.CancelledPayload](e).Partial {
		t.Fatalf("terminal %s %s, want cancelled with partial", e.Type, e.Payload)
	}
	if fr := h.fake.onlyRun(t); fr.stopCount() != 1 {
		t.Errorf("Hermes got %d stops, want 1", fr.stopCount())
	}
}

// A run stopped in Hermes itself (run.cancelled without a runhub cancel)
// ends cancelled, and runhub sends no stop of its own.
func TestCancelledInHermes(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, "half ")
		s.event("run.cancelled", nil)
	}, nil)
	res := h.start("", "task")
	evs := h.finish(res.RunID)
	e := terminal(evs)
	p := payload[protocol.CancelledPayload](e)
	if e.Type != protocol.EventCancelled || !p.Partial || !strings.Contains(p.Reason, "Hermes") {
		t.Fatalf("terminal %s %s, want cancelled in Hermes with partial", e.Type, e.Payload)
	}
	if fr := h.fake.onlyRun(t); fr.stopCount() != 0 {
		t.Errorf("Hermes got %d stops, want 0", fr.stopCount())
	}
}

// run.failed ends the run with provider_error and a redacted message: the
// API key and other secrets in Hermes' error text never reach the journal.
func TestRunFailedRedacted(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, "trying ")
		s.event("run.failed", map[string]any{"error": "provider said 401 for api_key=sk-live-abcdefghijklmnop1234 (key " + testKey + ")"})
	}, nil)
	res := h.start("", "task")
	evs := h.finish(res.RunID)
	p := wantError(t, evs, protocol.ErrorProviderError)
	if strings.Contains(p.Message, "sk-live") || !strings.Contains(p.Message, "the Hermes run failed") {
		t.Errorf("message %q", p.Message)
	}
}

// Start refused: 401 (wrong key) → auth, 429 → rate_limited, 500 →
// provider_error; each one terminal error, and an error body echoing the
// key never reaches the journal.
func TestStartErrors(t *testing.T) {
	cases := []struct {
		name   string
		key    string
		status int
		body   string
		code   string
	}{
		{"401", "wrong-key", 0, "", hermes.CodeAuth},
		{"429", testKey, 429, `{"error":{"message":"Too many concurrent runs","code":"rate_limit_exceeded"}}`, hermes.CodeRateLimited},
		{"500", testKey, 500, `{"error":{"message":"boom with Authorization: Bearer ` + testKey + `"}}`, protocol.ErrorProviderError},
		{"500 text", testKey, 500, `Internal Server Error`, protocol.ErrorProviderError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) { completed(s, "never") },
				func(c *hermes.Config) { c.APIKey = profile.NewSecret(tc.key) })
			if tc.status != 0 {
				h.fake.startFail = func(int) (int, string, bool) { return tc.status, tc.body, false }
			}
			res := h.start("", "hello")
			evs := h.finish(res.RunID)
			p := wantError(t, evs, tc.code)
			if strings.Contains(p.Message, testKey) {
				t.Errorf("message %q holds the key", p.Message)
			}
			if got := types(evs); len(got) != 2 {
				t.Errorf("events %v, want run.started and the terminal error", got)
			}
			if n := len(h.fake.startCalls()); n != 1 {
				t.Errorf("%d start attempts, want 1 (no retry for %s)", n, tc.name)
			}
		})
	}
}

// Queue mode steer reaches Hermes as POST /steer {input}; run.steered
// becomes progress.
func TestSteer(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, "working ")
		body := fr.wait(s.t(), fr.steers, "steer")
		if body["input"] != "focus on tests" {
			s.t().Errorf("POST /steer %v", body)
		}
		s.event("run.steered", map[string]any{"accepted": true})
		deltas(s, "on tests")
		completed(s, "working on tests")
	}, nil)
	h.fake.setFeatures(func(f map[string]any) { f["run_steer"] = true }) // a server after 0.18.x
	res := h.start("", "go")
	ch := h.watch(res.RunID)
	h.until(ch, protocol.EventTokenDelta)
	r, err := h.control(context.Background(), protocol.Control{Op: protocol.OpQueue, SessionID: res.SessionID,
		Message: "focus on tests", Mode: protocol.ModeSteer})
	if err != nil || !r.Accepted {
		t.Fatalf("steer: %+v %v", r, err)
	}
	evs := h.finish(res.RunID)
	if terminal(evs).Type != protocol.EventDone {
		t.Fatalf("terminal %s", terminal(evs).Type)
	}
	// The runtime's record of the user's guidance and Hermes's answer, in
	// either order: the record is journaled once POST /steer returns, and
	// Hermes's run.steered can come over the stream before that.
	p := notes(evs)
	steer, answer := 0, 0
	for _, e := range p {
		pp := payload[protocol.ProgressPayload](e)
		if pp.Steer == "focus on tests" {
			steer++
		}
		if pp.Text == "guidance delivered to Hermes" {
			answer++
		}
	}
	if len(p) != 2 || steer != 1 || answer != 1 {
		t.Errorf("progress:\n%s", dump(evs))
	}
}

func TestConfigValidate(t *testing.T) {
	for _, bad := range []hermes.Config{{}, {BaseURL: "ftp://x"}, {BaseURL: "http://u:p@host"}, {BaseURL: "http://h", APIKey: profile.NewSecret("a\nb")}} {
		if _, err := hermes.New(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if _, err := hermes.New(hermes.Config{BaseURL: hermes.DefaultBaseURL + "/v1/"}); err != nil {
		t.Error(err)
	}
}

// A run over its Timeout ends with error timeout and the Hermes run is
// stopped.
func TestRunTimeout(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, "slow ")
		for i := 0; i < 100; i++ { // events keep coming: only the whole-run bound ends it
			select {
			case <-fr.stopped:
				s.event("run.cancelled", nil)
				return
			case <-s.ctx.Done():
				s.drop()
			case <-time.After(20 * time.Millisecond):
				deltas(s, ".")
			}
		}
	}, func(c *hermes.Config) { c.Timeout = 300 * time.Millisecond })
	res := h.start("", "go")
	evs := h.finish(res.RunID)
	if p := wantError(t, evs, protocol.ErrorTimeout); !strings.Contains(p.Message, "300ms") {
		t.Errorf("message %q", p.Message)
	}
	if fr := h.fake.onlyRun(t); fr.stopCount() != 1 {
		t.Errorf("Hermes got %d stops, want 1", fr.stopCount())
	}
}

// A profile's api_key_env variable unset where the run executes: the run
// ends with error auth naming the variable, and Hermes is never called.
func TestKeyVariableUnset(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) { completed(s, "never") },
		func(c *hermes.Config) { c.APIKey, c.APIKeyEnv = profile.Secret{}, "HERMES_TEST_KEY" })
	evs := h.finish(h.start("", "hi").RunID)
	if p := wantError(t, evs, hermes.CodeAuth); !strings.Contains(p.Message, "HERMES_TEST_KEY") {
		t.Errorf("message %q", p.Message)
	}
	if n := len(h.fake.startCalls()); n != 0 {
		t.Errorf("%d starts reached Hermes", n)
	}
}

// A profile builds the driver through the registration: its own key
// variable only, its options (idempotent_start: the key is sent), and the
// trailing /v1 of a base URL accepted.
func TestProfile_Build(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, "hi")
		completed(s, "hi")
	}, nil)
	var read []string
	reg := profile.NewRegistry(hermes.Registration())
	p, err := reg.Profile("hermes", []byte(`{"driver": "hermes", "base_url": "`+h.fake.srv.URL+`/v1/",
		"api_key_env": "HERMES_KEY", "model": "hermes-4", "instructions": "be brief",
		"options": {"max_history_turns": 4, "stream_idle_timeout": "10s", "idempotent_start": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := reg.Build(p, profile.Env{Getenv: func(k string) string {
		read = append(read, k)
		if k == "HERMES_KEY" {
			return testKey
		}
		return "another-profiles-key"
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(read) == 0 || slices.ContainsFunc(read, func(k string) bool { return k != "HERMES_KEY" }) {
		t.Errorf("read variables %v, want only HERMES_KEY", read)
	}
	h.exec.Close()
	h.exec = executor.New(h.store, executor.Options{Profiles: map[string]driver.Profile{
		"hermes": {Driver: d, Kind: hermes.Kind, Model: p.Model}}, DefaultProfile: "hermes"})
	h.rt = adapter.NewRouter(h.store, h.exec, nil)
	evs := h.finish(h.start("", "hello").RunID)
	if terminal(evs).Type != protocol.EventDone {
		t.Fatalf("terminal %s %s", terminal(evs).Type, terminal(evs).Payload)
	}
	started := payload[protocol.RunStartedPayload](evs[0])
	if started.Profile != "hermes" || started.Provider != "hermes" || started.Model != "hermes-4" {
		t.Errorf("run.started %+v", started)
	}
	s := h.fake.startCalls()[0]
	if s.Auth != "Bearer "+testKey || s.Body["model"] != "hermes-4" || s.Body["instructions"] != "be brief" {
		t.Errorf("start %+v", s)
	}
	if s.Key != evs[0].RunID { // idempotent_start sends the run id as Idempotency-Key
		t.Errorf("start Idempotency-Key %q, want the run id %s", s.Key, evs[0].RunID)
	}
	_, err = reg.Profile("hermes", []byte(`{"driver": "hermes", "base_url": "http://x", "options": {"max_history": 4}}`))
	if err == nil || !strings.Contains(err.Error(), `profile "hermes": options: unknown field "max_history"`) {
		t.Errorf("an unknown option: %v", err)
	}
}

// Cancel while an approval waits on the user: the prompt is withdrawn
// without a resolution, Hermes gets /stop, the run ends cancelled.
func TestCancelWhileAwaitingApproval(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		s.event("approval.request", map[string]any{"command": "rm -rf /", "description": "delete everything"})
		s.hold(fr, 20*time.Millisecond)
	}, nil)
	res := h.start("", "go")
	ch := h.watch(res.RunID)
	req := payload[protocol.ApprovalRequestedPayload](h.until(ch, protocol.EventApprovalReq))
	// Hermes sent neither risk nor choices: the prompt says so, it does not
	// make them up.
	if req.Risk != "" || len(req.Choices) != 0 || req.Choices == nil ||
		!reflect.DeepEqual(req.Unknown, []string{protocol.PromptRisk, protocol.PromptChoices}) {
		t.Errorf("approval.requested %+v, want no risk, no choices, both unknown", req)
	}
	if r, err := h.control(context.Background(), protocol.Control{Op: protocol.OpCancel, RunID: res.RunID}); err != nil || !r.Accepted {
		t.Fatalf("cancel: %+v %v", r, err)
	}
	evs := h.finish(res.RunID)
	if e := terminal(evs); e.Type != protocol.EventCancelled || payload[protocol.CancelledPayload](e).Partial {
		t.Fatalf("terminal %s %s, want cancelled without partial", e.Type, e.Payload)
	}
	if n := len(ofType(evs, protocol.EventApprovalRes)); n != 0 {
		t.Errorf("%d approval.resolved for a withdrawn prompt", n)
	}
	fr := h.fake.onlyRun(t)
	if fr.stopCount() != 1 || len(fr.approvals) != 0 {
		t.Errorf("stops %d, approvals posted %d; want 1 and 0", fr.stopCount(), len(fr.approvals))
	}
}

// An answer Hermes no longer waits for (409 approval_not_pending, e.g. its
// own approval timeout passed), or one it does not take (400
// invalid_approval_choice: an answer to a prompt whose choices Hermes did
// not say), is journaled as progress; the run goes on. Prompts are asked
// one at a time, so each note comes before the next prompt.
func TestAnswerHermesNoLongerWaitsFor(t *testing.T) {
	posted := make(chan map[string]any, 3)
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		s.event("approval.request", map[string]any{"command": "make", "choices": []string{"once", "deny"}})
		posted <- fr.wait(s.t(), fr.approvals, "approval")
		s.event("approval.request", map[string]any{"command": "make install"}) // no choices
		s.event("approval.request", map[string]any{"command": "make clean", "choices": []string{"once", "deny"}})
		posted <- fr.wait(s.t(), fr.approvals, "approval")
		completed(s, "built")
	}, nil)
	h.fake.controlStatus = http.StatusConflict
	res := h.start("", "build")
	ch := h.watch(res.RunID)
	for i, choice := range []string{"once", "later", "once"} {
		a := payload[protocol.ApprovalRequestedPayload](h.until(ch, protocol.EventApprovalReq))
		if r, err := h.control(context.Background(), protocol.Control{Op: protocol.OpApprove, RunID: res.RunID, ApprovalID: a.ApprovalID, Choice: choice}); err != nil || !r.Accepted {
			t.Fatalf("approve %d: %+v %v", i, r, err)
		}
	}
	for _, want := range []string{"once", "once"} {
		if body := <-posted; body["choice"] != want {
			t.Errorf("POST /approval %v", body)
		}
	}
	evs := h.finish(res.RunID)
	if terminal(evs).Type != protocol.EventDone {
		t.Fatalf("terminal %s %s", terminal(evs).Type, terminal(evs).Payload)
	}
	ns := notes(evs)
	if len(ns) < 2 || !strings.Contains(payload[protocol.ProgressPayload](ns[0]).Text, "no longer waits for this approval") ||
		!strings.Contains(payload[protocol.ProgressPayload](ns[1]).Text, "Hermes refused this approval answer: HTTP 400 invalid_approval_choice") {
		t.Errorf("progress:\n%s", dump(evs))
	}
}
