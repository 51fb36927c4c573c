package hermes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/hermes"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/adapter/openai"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/protocol"
)

// fakeJudge is an OpenAI-compatible chat completions server answering the
// goal judge's requests (not streamed) with verdicts in order.
type fakeJudge struct {
	srv      *httptest.Server
	verdicts []string

	mu    sync.Mutex
	calls []map[string]any
}

func newFakeJudge(t *testing.T, verdicts ...string) *fakeJudge {
	j := &fakeJudge{verdicts: verdicts}
	j.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		j.mu.Lock()
		j.calls = append(j.calls, body)
		text := j.verdicts[min(len(j.calls), len(j.verdicts))-1]
		j.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}}})
	}))
	t.Cleanup(j.srv.Close)
	return j
}

func (j *fakeJudge) requests() []map[string]any {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]map[string]any(nil), j.calls...)
}

// Hermes cannot judge a goal: a hermes profile without goal_judge answers
// goal set with unsupported, naming it, and keeps no goal; one whose
// goal_judge names an openai profile pursues the goal on Hermes, each turn
// judged by that profile's model.
func TestGoal_HermesProfileNeedsAJudge(t *testing.T) {
	fake := newFakeHermes(t, testKey)
	fake.script = func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, fmt.Sprintf("turn %d.", n))
		completed(s, fmt.Sprintf("turn %d.", n))
	}
	judge := newFakeJudge(t, `{"verdict":"continue","reason":"the release notes are missing"}`, `{"done": true, "reason": "shipped"}`)
	cfg, err := profile.Parse(fmt.Appendf(nil, `{"profiles": {
		"plain":  {"driver": "hermes", "base_url": %q, "api_key_env": "HERMES_KEY"},
		"judged": {"driver": "hermes", "base_url": %q, "api_key_env": "HERMES_KEY", "goal_judge": "judge", "goal_max_turns": 5},
		"judge":  {"driver": "openai", "base_url": %q, "model": "judge-1", "timeout": "5s"}}}`,
		fake.srv.URL, fake.srv.URL, judge.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := drivertest.Logger()
	profiles, err := cfg.Build(map[string]profile.Builder{
		profile.KindHermes: hermes.FromProfile,
		profile.KindOpenAI: openai.FromProfile,
		profile.KindSim:    func(profile.Profile, profile.Env) (driver.Driver, error) { return &sim.Driver{}, nil },
	}, profile.Env{Getenv: func(k string) string { return map[string]string{"HERMES_KEY": testKey}[k] }, Logger: log, ClarifyTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := drivertest.New(t, drivertest.Config{Profiles: profiles, Log: log, Logs: logs})
	ctx := context.Background()
	goalSet := func(sid, text string) protocol.ControlResult {
		t.Helper()
		res, err := h.Control(ctx, protocol.Control{Op: protocol.OpGoal, SessionID: sid, Action: protocol.GoalSet, Text: text})
		if err != nil {
			t.Fatalf("goal set: %v", err)
		}
		return res
	}

	plain := h.Start(protocol.StartRunRequest{Message: "hi", Profile: "plain"})
	drivertest.Terminal(t, h.Events(plain.RunID, 10*time.Second), protocol.EventDone)
	if res := goalSet(plain.SessionID, "ship it"); res.Status != protocol.ResultUnsupported || !strings.Contains(res.Message, `profile "plain"`) ||
		!strings.Contains(res.Message, "goal_judge") {
		t.Errorf("goal set on a hermes profile without a judge: %+v", res)
	}
	if m, _ := h.Store.Session(ctx, plain.SessionID); m.Goal != nil || len(m.Runs) != 1 {
		t.Errorf("refused goal left goal %+v, runs %v", m.Goal, m.Runs)
	}

	judged := h.Start(protocol.StartRunRequest{Message: "hi", Profile: "judged"})
	drivertest.Terminal(t, h.Events(judged.RunID, 10*time.Second), protocol.EventDone)
	if res := goalSet(judged.SessionID, "ship it"); res.Status != protocol.ResultAccepted {
		t.Fatalf("goal set on a hermes profile with a judge: %+v", res)
	}
	var runs []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		m, err := h.Store.Session(ctx, judged.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		if m.ActiveRun == "" && m.Goal.State != protocol.GoalActive {
			if m.Goal.State != protocol.GoalDone || m.Goal.Reason != "shipped" || m.Goal.Turns != 2 {
				t.Fatalf("goal %+v", m.Goal)
			}
			runs = m.Runs
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the goal did not settle: %+v", m.Goal)
		}
	}
	if len(runs) != 3 {
		t.Fatalf("runs %v; want the user's and two goal runs", runs)
	}
	starts := fake.startCalls()
	inputs := []string{}
	for _, s := range starts {
		inputs = append(inputs, fmt.Sprint(s.Body["input"]))
	}
	want := []string{"hi", "hi", "ship it", executor.ContinuationPrompt("ship it")}
	if fmt.Sprint(inputs) != fmt.Sprint(want) {
		t.Errorf("Hermes runs' inputs %q, want %q", inputs, want)
	}
	for _, rid := range runs[1:] {
		evs := h.Events(rid, 10*time.Second)
		drivertest.Terminal(t, evs, protocol.EventDone)
		if st := payload[protocol.RunStartedPayload](evs[0]); st.Source != "goal" || st.Profile != "judged" || st.Provider != profile.KindHermes {
			t.Errorf("goal run.started %+v", st)
		}
	}
	calls := judge.requests()
	if len(calls) != 2 {
		t.Fatalf("%d judge calls, want 2", len(calls))
	}
	for i, c := range calls {
		msgs, _ := c["messages"].([]any)
		user := ""
		if len(msgs) == 2 {
			user, _ = msgs[1].(map[string]any)["content"].(string)
		}
		if c["model"] != "judge-1" || c["stream"] != false || !strings.Contains(user, fmt.Sprintf("turn %d.", i+3)) {
			t.Errorf("judge call %d: model %v, stream %v, user message %q", i+1, c["model"], c["stream"], user)
		}
	}
}
