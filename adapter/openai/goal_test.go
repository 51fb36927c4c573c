package openai

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// goalFake is one OpenAI-compatible upstream serving both a profile's
// runs (streamed answers "step N done.") and its goal judge (requests
// without stream, as the judge sends them): judge answers the n-th judge
// call (from 1), gate, when set, holds the n-th run's answer until it
// returns.
type goalFake struct {
	*fake
	judge func(n int, w http.ResponseWriter, r *http.Request)
	gate  func(n int)

	mu            sync.Mutex
	runs, judges  int
	judgeRequests []chatRequest
}

func newGoalFake(t *testing.T, judge func(n int, w http.ResponseWriter, r *http.Request)) *goalFake {
	g := &goalFake{judge: judge}
	g.fake = newFake(t, func(w http.ResponseWriter, r *http.Request) {
		g.fake.mu.Lock()
		req := g.fake.reqs[len(g.fake.reqs)-1]
		g.fake.mu.Unlock()
		g.mu.Lock()
		if !req.Stream {
			g.judges++
			n := g.judges
			g.judgeRequests = append(g.judgeRequests, req)
			g.mu.Unlock()
			g.judge(n, w, r)
			return
		}
		g.runs++
		n := g.runs
		g.mu.Unlock()
		if g.gate != nil {
			g.gate(n)
		}
		streamHeaders(w)
		send(w, roleChunk, content(fmt.Sprintf("step %d done.", n)), finishChunk, usageChunk, doneLine)
	})
	return g
}

func (g *goalFake) judgeCalls() []chatRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]chatRequest(nil), g.judgeRequests...)
}

// answer writes a judge's non-streamed chat completion whose content is
// text, as OpenAI answers it.
func answer(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-j","object":"chat.completion","model":"m-up","choices":[{"index":0,`+
		`"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":90,"completion_tokens":12,"total_tokens":102}}`, jsonStr(text))
}

// verdicts answers the judge's calls with texts in order (the last one
// repeated).
func verdicts(texts ...string) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) { answer(w, texts[min(n, len(texts))-1]) }
}

// goalHarness runs profile "fake" (this driver, judging its own goals)
// with a goal budget of maxTurns (0: the default).
func goalHarness(t *testing.T, f *goalFake, maxTurns int, mod func(*Config)) *drivertest.Harness {
	t.Helper()
	log, logs := drivertest.Logger()
	cfg := Config{BaseURL: f.srv.URL, Model: "m-test", APIKey: profile.NewSecret(testKey), APIKeyEnv: "TEST_KEY",
		IdleTimeout: 5 * time.Second, Logger: log}
	if mod != nil {
		mod(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return drivertest.New(t, drivertest.Config{Log: log, Logs: logs,
		Profiles: map[string]driver.Profile{"fake": {Driver: d, Kind: Kind, Model: "m-test", GoalMaxTurns: maxTurns}}})
}

// goalSession runs a first user turn (no goal yet: no judge call) and
// returns its session.
func goalSession(t *testing.T, h *drivertest.Harness) string {
	t.Helper()
	r := h.Start(protocol.StartRunRequest{Message: "hello", Profile: "fake"})
	drivertest.Terminal(t, h.Events(r.RunID, 10*time.Second), protocol.EventDone)
	return r.SessionID
}

func setGoal(t *testing.T, h *drivertest.Harness, sid, text string) protocol.ControlResult {
	t.Helper()
	res, err := h.Control(context.Background(), protocol.Control{Op: protocol.OpGoal, SessionID: sid, Action: protocol.GoalSet, Text: text})
	if err != nil {
		t.Fatalf("goal set: %v", err)
	}
	return res
}

// settle waits until the session's goal is no longer active and no run is
// active, and returns the session and its runs' events (every run ended).
func settle(t *testing.T, h *drivertest.Harness, sid string) (journal.SessionMeta, [][]protocol.Envelope) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := h.Store.Session(context.Background(), sid)
		if err != nil {
			t.Fatal(err)
		}
		if m.ActiveRun == "" && m.Goal != nil && m.Goal.State != protocol.GoalActive {
			var runs [][]protocol.Envelope
			for _, rid := range m.Runs {
				runs = append(runs, h.Events(rid, 10*time.Second))
			}
			return m, runs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the goal did not settle: %+v, runs %v", m.Goal, m.Runs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// goalUpdates returns a run's goal.updated payloads.
func goalUpdates(t *testing.T, evs []protocol.Envelope) []protocol.GoalUpdatedPayload {
	var out []protocol.GoalUpdatedPayload
	for _, e := range evs {
		if e.Type == protocol.EventGoalUpdated {
			out = append(out, payload[protocol.GoalUpdatedPayload](t, e))
		}
	}
	return out
}

// verdictOf is a judged run's verdict: its last goal.updated, just before
// its done.
func verdictOf(t *testing.T, evs []protocol.Envelope) protocol.GoalUpdatedPayload {
	t.Helper()
	drivertest.Terminal(t, evs, protocol.EventDone)
	if e := evs[len(evs)-2]; e.Type != protocol.EventGoalUpdated {
		t.Fatalf("no goal.updated before done: %s", drivertest.Types(evs))
	}
	return payload[protocol.GoalUpdatedPayload](t, evs[len(evs)-2])
}

func sources(t *testing.T, runs [][]protocol.Envelope) string {
	var s []string
	for _, evs := range runs {
		s = append(s, payload[protocol.RunStartedPayload](t, evs[0]).Source)
	}
	return strings.Join(s, " ")
}

// A goal the judge finds done after its first run: one goal run (the goal's
// text as message), one judge call of the profile's own model, not
// streamed, at temperature 0, shown the goal and the run's answer; the goal
// is done with the judge's reason, journaled before the run's done.
func TestGoal_DoneOnFirstTurn(t *testing.T) {
	f := newGoalFake(t, verdicts(`{"verdict": "done", "reason": "the file was written"}`))
	h := goalHarness(t, f, 0, nil)
	sid := goalSession(t, h)
	if res := setGoal(t, h, sid, "write the file"); res.Status != protocol.ResultAccepted || res.Message != "goal active" {
		t.Fatalf("goal set: %+v", res)
	}
	m, runs := settle(t, h, sid)
	if got := sources(t, runs); got != "user goal" {
		t.Fatalf("runs by source: %s", got)
	}
	if rs := payload[protocol.RunStartedPayload](t, runs[1][0]); rs.Message != "write the file" || rs.Profile != "fake" {
		t.Errorf("goal run.started = %+v", rs)
	}
	if g := verdictOf(t, runs[1]); g.State != protocol.GoalDone || g.Reason != "the file was written" || g.Turns != 1 {
		t.Errorf("verdict %+v", g)
	}
	if m.Goal.State != protocol.GoalDone || m.Goal.Reason != "the file was written" {
		t.Errorf("session goal %+v", m.Goal)
	}
	calls := f.judgeCalls()
	if len(calls) != 1 {
		t.Fatalf("%d judge calls, want 1", len(calls))
	}
	c := calls[0]
	if c.Stream || c.StreamOptions != nil || c.Temperature == nil || *c.Temperature != 0 || c.Model != "m-test" || len(c.Messages) != 2 {
		t.Fatalf("judge request %+v", c)
	}
	if c.Messages[0].Role != "system" || c.Messages[0].Content != driver.JudgeSystemPrompt {
		t.Errorf("judge system message %+v", c.Messages[0])
	}
	if u := c.Messages[1]; u.Role != "user" || !strings.Contains(fmt.Sprint(u.Content), "Goal:\nwrite the file\n") ||
		!strings.Contains(fmt.Sprint(u.Content), "most recent response:\nstep 2 done.\n") {
		t.Errorf("judge user message %q", u.Content)
	}
	if _, auths := f.requests(); auths[len(auths)-1] != "Bearer "+testKey {
		t.Errorf("judge authorization %q", auths[len(auths)-1])
	}
	noSecret(t, h, runs[1])
}

// Continue twice (the legacy {"done": false} shape, then wait, which runhub
// takes as continue), then done: three goal runs, the later two with the
// continuation prompt, each verdict journaled with its reason.
func TestGoal_ContinueTwiceThenDone(t *testing.T) {
	f := newGoalFake(t, verdicts(`{"done": false, "reason": "only the outline exists"}`,
		`{"verdict": "wait", "wait_for_seconds": 60, "reason": "tests are running"}`,
		`{"verdict": "done", "reason": "all sections written"}`))
	h := goalHarness(t, f, 0, nil)
	sid := goalSession(t, h)
	setGoal(t, h, sid, "write the report")
	m, runs := settle(t, h, sid)
	if got := sources(t, runs); got != "user goal goal goal" {
		t.Fatalf("runs by source: %s", got)
	}
	want := []protocol.GoalUpdatedPayload{
		{State: protocol.GoalActive, Text: "write the report", Turns: 1, Reason: "only the outline exists"},
		{State: protocol.GoalActive, Text: "write the report", Turns: 2, Reason: "tests are running (wait: continuing)"},
		{State: protocol.GoalDone, Text: "write the report", Turns: 3, Reason: "all sections written"},
	}
	for i, w := range want {
		run := runs[1+i]
		if g := verdictOf(t, run); g != w {
			t.Errorf("goal run %d verdict %+v, want %+v", i+1, g, w)
		}
		msg := payload[protocol.RunStartedPayload](t, run[0]).Message
		if wantMsg := executor.ContinuationPrompt("write the report"); i > 0 && msg != wantMsg {
			t.Errorf("goal run %d message %q, want the continuation prompt", i+1, msg)
		}
		if g := goalUpdates(t, run)[0]; run[1].Type != protocol.EventGoalUpdated || g.Turns != i+1 {
			t.Errorf("goal run %d seq 2: %s %+v", i+1, run[1].Type, g)
		}
	}
	if m.Goal.State != protocol.GoalDone || len(f.judgeCalls()) != 3 {
		t.Errorf("goal %+v after %d judge calls", m.Goal, len(f.judgeCalls()))
	}
}

// A judge that answers 500 fails open: the goal continues, the failure's
// reason journaled; the next answer ends it.
func TestGoal_JudgeErrorContinues(t *testing.T) {
	f := newGoalFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"message":"the server had an error while processing your request","type":"server_error"}}`)
			return
		}
		answer(w, `{"verdict":"done","reason":"ok"}`)
	})
	h := goalHarness(t, f, 0, nil)
	sid := goalSession(t, h)
	setGoal(t, h, sid, "fix the bug")
	m, runs := settle(t, h, sid)
	if got := sources(t, runs); got != "user goal goal" {
		t.Fatalf("runs by source: %s", got)
	}
	g := verdictOf(t, runs[1])
	if g.State != protocol.GoalActive || !strings.Contains(g.Reason, "the judge failed") || !strings.Contains(g.Reason, "500") || g.UnreadableVerdicts != 0 {
		t.Errorf("verdict after a 500: %+v", g)
	}
	if m.Goal.State != protocol.GoalDone {
		t.Errorf("goal %+v", m.Goal)
	}
}

// Answers without a verdict fail open too, counted: a readable answer
// resets the count, and three in a row pause the goal, with the reason.
func TestGoal_UnreadableAnswersContinueThenPause(t *testing.T) {
	f := newGoalFake(t, verdicts("Looks like good progress!", `{"done": false}`, "", "Still going.", "I think it is done"))
	h := goalHarness(t, f, 0, nil)
	sid := goalSession(t, h)
	setGoal(t, h, sid, "tidy the repo")
	m, runs := settle(t, h, sid)
	if got := sources(t, runs); got != "user goal goal goal goal goal" {
		t.Fatalf("runs by source: %s", got)
	}
	counts := []int{1, 0, 1, 2, 3}
	for i, want := range counts {
		g := verdictOf(t, runs[1+i])
		if g.UnreadableVerdicts != want {
			t.Errorf("goal run %d verdict %+v: unreadable_verdicts %d, want %d", i+1, g, g.UnreadableVerdicts, want)
		}
		if want > 0 && i < 4 && (g.State != protocol.GoalActive || !strings.Contains(g.Reason, "holds no verdict")) {
			t.Errorf("goal run %d verdict %+v", i+1, g)
		}
	}
	if m.Goal.State != protocol.GoalPaused || !strings.Contains(m.Goal.Reason, "no verdict 3 turns in a row") {
		t.Errorf("goal %+v, want paused after three unreadable answers", m.Goal)
	}
}

// A judge that does not answer within its profile's timeout fails open:
// the run ends and the goal goes on; the session is never held.
func TestGoal_JudgeTimeoutContinues(t *testing.T) {
	f := newGoalFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			select { // never answers; gone when the judge gives up
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		answer(w, `{"verdict":"done","reason":"finished"}`)
	})
	h := goalHarness(t, f, 0, func(c *Config) { c.Timeout = 300 * time.Millisecond })
	sid := goalSession(t, h)
	setGoal(t, h, sid, "deploy")
	m, runs := settle(t, h, sid)
	if got := sources(t, runs); got != "user goal goal" {
		t.Fatalf("runs by source: %s", got)
	}
	if g := verdictOf(t, runs[1]); g.State != protocol.GoalActive || !strings.Contains(g.Reason, "goal judge exceeded its 300ms timeout") {
		t.Errorf("verdict after a judge timeout: %+v", g)
	}
	if m.Goal.State != protocol.GoalDone {
		t.Errorf("goal %+v", m.Goal)
	}
}

// A judge that always continues meets the profile's turn budget: the goal
// pauses after that many goal runs, with the reason.
func TestGoal_BudgetExhausted(t *testing.T) {
	f := newGoalFake(t, verdicts(`{"verdict":"continue","reason":"more to do"}`))
	h := goalHarness(t, f, 2, nil)
	sid := goalSession(t, h)
	setGoal(t, h, sid, "boil the ocean")
	m, runs := settle(t, h, sid)
	if got := sources(t, runs); got != "user goal goal" {
		t.Fatalf("runs by source: %s", got)
	}
	g := verdictOf(t, runs[2])
	if g.State != protocol.GoalPaused || g.Turns != 2 || !strings.Contains(g.Reason, "turn budget exhausted (2/2 turns)") ||
		!strings.Contains(g.Reason, "more to do") {
		t.Errorf("last verdict %+v", g)
	}
	if *m.Goal != g {
		t.Errorf("session goal %+v, want %+v", m.Goal, g)
	}
}

// Blocked pauses the goal with the judge's reason (the answer in a code
// fence, as models often write it); nothing follows.
func TestGoal_BlockedPauses(t *testing.T) {
	f := newGoalFake(t, verdicts("```json\n{\"verdict\": \"blocked\", \"reason\": \"it needs the user's login\"}\n```"))
	h := goalHarness(t, f, 0, nil)
	sid := goalSession(t, h)
	setGoal(t, h, sid, "book the flight")
	m, runs := settle(t, h, sid)
	if got := sources(t, runs); got != "user goal" {
		t.Fatalf("runs by source: %s", got)
	}
	if m.Goal.State != protocol.GoalPaused || m.Goal.Reason != "blocked: it needs the user's login" {
		t.Errorf("goal %+v", m.Goal)
	}
}

// A user's message queued during a goal run is served before the goal's
// continuation: the loop waits that turn, judges the user's run, then
// continues.
func TestGoal_UserMessagePreemptsContinuation(t *testing.T) {
	f := newGoalFake(t, verdicts(`{"verdict":"continue","reason":"next"}`, `{"verdict":"continue","reason":"next"}`,
		`{"verdict":"done","reason":"done"}`))
	release := make(chan struct{})
	f.gate = func(n int) {
		if n == 2 { // the first goal run
			<-release
		}
	}
	h := goalHarness(t, f, 0, nil)
	sid := goalSession(t, h)
	setGoal(t, h, sid, "refactor")
	var goalRun string
	for deadline := time.Now().Add(10 * time.Second); goalRun == ""; time.Sleep(10 * time.Millisecond) {
		m, _ := h.Store.Session(context.Background(), sid)
		if len(m.Runs) == 2 {
			goalRun = m.ActiveRun
		}
		if time.Now().After(deadline) {
			t.Fatal("no goal run")
		}
	}
	res, err := h.Control(context.Background(), protocol.Control{Op: protocol.OpQueue, SessionID: sid, Message: "also rename the package"})
	if err != nil || res.Status != protocol.ResultAccepted || res.Message != "queued" {
		t.Fatalf("queue: %+v, %v", res, err)
	}
	close(release)
	m, runs := settle(t, h, sid)
	if got := sources(t, runs); got != "user goal queue goal" {
		t.Fatalf("runs by source: %s", got)
	}
	if rs := payload[protocol.RunStartedPayload](t, runs[2][0]); rs.Message != "also rename the package" {
		t.Errorf("queued run.started %+v", rs)
	}
	if g := verdictOf(t, runs[2]); g.State != protocol.GoalActive || g.Turns != 1 {
		t.Errorf("the user's run was judged %+v; want active, the goal's turns unchanged", g)
	}
	if m.Goal.State != protocol.GoalDone || m.Goal.Turns != 2 {
		t.Errorf("goal %+v", m.Goal)
	}
}

// The simulator's turns=N rule is the simulator's: on an openai profile a
// goal reading "turns=0" is judged by the profile's model, not found done
// at once.
func TestGoal_SimRuleNotOnOpenAIProfile(t *testing.T) {
	f := newGoalFake(t, verdicts(`{"verdict":"done","reason":"the model says so"}`))
	h := goalHarness(t, f, 0, nil)
	sid := goalSession(t, h)
	if res := setGoal(t, h, sid, "stop after turns=0"); res.Message != "goal active" {
		t.Fatalf("goal set: %+v", res)
	}
	m, runs := settle(t, h, sid)
	if got := sources(t, runs); got != "user goal" || m.Goal.Reason != "the model says so" || len(f.judgeCalls()) != 1 {
		t.Fatalf("runs %s, goal %+v, %d judge calls", got, m.Goal, len(f.judgeCalls()))
	}
}

// A cancel while the judge thinks ends the run cancelled at once (the
// judge's request is aborted) and starts nothing: the goal stays active,
// for resume.
func TestGoal_CancelWhileJudging(t *testing.T) {
	f := newGoalFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	h := goalHarness(t, f, 0, nil)
	sid := goalSession(t, h)
	setGoal(t, h, sid, "think hard")
	for deadline := time.Now().Add(10 * time.Second); len(f.judgeCalls()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the judge was not asked")
		}
	}
	m, _ := h.Store.Session(context.Background(), sid)
	if m.ActiveRun == "" || len(m.Runs) != 2 {
		t.Fatalf("the judged run is not active while judged: %+v", m)
	}
	h.Cancel(m.ActiveRun)
	evs := h.Events(m.ActiveRun, 5*time.Second)
	drivertest.Terminal(t, evs, protocol.EventCancelled)
	select {
	case <-f.aborted:
	case <-time.After(5 * time.Second):
		t.Fatal("the judge's request was not aborted")
	}
	if g := goalUpdates(t, evs); len(g) != 1 || g[0].Turns != 1 || g[0].Reason != "" {
		t.Errorf("goal.updated of the cancelled run %+v; want only its seq 2", g)
	}
	time.Sleep(100 * time.Millisecond) // a continuation would start at once
	if m, _ := h.Store.Session(context.Background(), sid); len(m.Runs) != 2 || m.Goal.State != protocol.GoalActive {
		t.Errorf("after the cancel: runs %v, goal %+v", m.Runs, m.Goal)
	}
}
