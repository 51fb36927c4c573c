package agui_test

import (
	"strings"
	"testing"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/agui"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/internal/npmtest"
	"github.com/runhub/runhub/protocol"
)

// aguiRunSummary is what web/agui-test/run.mjs prints.
type aguiRunSummary struct {
	Types   []string          `json:"types"`
	Texts   map[string]string `json:"texts"`
	Tools   map[string]string `json:"tools"`
	Results map[string]string `json:"results"`
	Custom  []string          `json:"custom"`
	Runs    []struct {
		RunID      string           `json:"runId"`
		ThreadID   string           `json:"threadId"`
		RunhubRun  string           `json:"runhubRun"`
		End        string           `json:"end"`
		Interrupts []map[string]any `json:"interrupts"`
	} `json:"runs"`
	RunIDs   []string `json:"runIds"`
	Messages []struct {
		ID      string  `json:"id"`
		Role    string  `json:"role"`
		Content *string `json:"content"`
	} `json:"messages"`
	CutAt      string `json:"cutAt"`
	FirstCount int    `json:"firstCount"`
}

// runAGUIRun runs run.mjs and returns its summary.
func runAGUIRun(t *testing.T, node, dir string, env []string, args ...string) aguiRunSummary {
	t.Helper()
	var s aguiRunSummary
	npmtest.RunJSON(t, node, dir, env, &s, "run.mjs", args...)
	return s
}

// journalText is the text of a run's token deltas, by AG-UI message id.
func journalText(t *testing.T, th *hubtest.Hub, rid string) (map[string]string, int) {
	t.Helper()
	texts := map[string]string{}
	n := 0
	for _, e := range hubtest.JournalEvents(t, th, rid) {
		if e.Type == protocol.EventTokenDelta {
			p := hubtest.Payload[protocol.TokenDeltaPayload](t, e)
			texts[agui.ID(rid, p.MessageID)] += p.Text
			if p.Text != "" {
				n++
			}
		}
	}
	return texts, n
}

// The official AG-UI client (HttpAgent.runAgent, @ag-ui/client 1.0.0)
// against POST /v1/agui: a text run; a run through an approval and a
// clarification, each ending an AG-UI run with the interrupt outcome and
// answered by the next runAgent's resume; and a stream cut mid-run and
// resumed with Last-Event-ID. Every event validates with @ag-ui/core's
// schemas and passes the client's verifier; the text equals the journal's.
func TestAGUIRun_NPMClient(t *testing.T) {
	node, dir := installAGUI(t)
	th := newTestHub(t, hub.Config{})
	url := th.URL + "/v1/agui"

	// A text run in a new thread.
	s := runAGUIRun(t, node, dir, nil, "agent", url, "thread-text", "hello there", `{"runhub":{"metadata":{"sim":{"tokens":20,"token_ms":1,"tools":1}}}}`)
	meta := hubtest.SessionMeta(t, th, "thread-text")
	if len(meta.Runs) != 1 || len(s.Runs) != 1 || s.Runs[0].End != "RUN_FINISHED:success" || s.Runs[0].RunID != s.RunIDs[0] || s.Runs[0].ThreadID != "thread-text" {
		t.Fatalf("runs %+v (runhub runs %v)", s.Runs, meta.Runs)
	}
	rid := meta.Runs[0]
	want, _ := journalText(t, th, rid)
	if len(want) == 0 || !mapsEqual(s.Texts, want) {
		t.Fatalf("text %q, journal %q", s.Texts, want)
	}
	if got := assistantText(s); got != strings.Join(values(want), "") {
		t.Errorf("the agent's messages say %q, journal %q", got, want)
	}

	// An approval and a clarification: three AG-UI runs of one runhub run.
	s = runAGUIRun(t, node, dir, nil, "agent", url, "thread-hitl", "ask me",
		`{"runhub":{"metadata":{"sim":{"tokens":12,"token_ms":1,"tools":2,"approval":true,"clarify":true}}}}`)
	meta = hubtest.SessionMeta(t, th, "thread-hitl")
	if len(meta.Runs) != 1 {
		t.Fatalf("runhub runs %v, want one", meta.Runs)
	}
	rid = meta.Runs[0]
	hubtest.WaitTerminal(t, th, rid)
	if len(s.Runs) != 3 {
		t.Fatalf("AG-UI runs %+v, want 3 (approval, clarify, end)", s.Runs)
	}
	kinds := []string{"approval", "clarify"}
	for i, r := range s.Runs[:2] {
		if r.End != "RUN_FINISHED:interrupt" || len(r.Interrupts) != 1 || r.RunID != s.RunIDs[i] {
			t.Fatalf("AG-UI run %d: %+v", i, r)
		}
		md, _ := r.Interrupts[0]["metadata"].(map[string]any)
		rh, _ := md["runhub"].(map[string]any)
		if rh["kind"] != kinds[i] || rh["run_id"] != rid {
			t.Errorf("interrupt %d: %v", i, r.Interrupts[0])
		}
	}
	if s.Runs[2].End != "RUN_FINISHED:success" || s.Runs[2].RunID != s.RunIDs[2] {
		t.Fatalf("last AG-UI run %+v", s.Runs[2])
	}
	for i, r := range s.Runs {
		if r.RunhubRun != rid {
			t.Errorf("AG-UI run %d names runhub run %q, want %s", i, r.RunhubRun, rid)
		}
	}
	want, _ = journalText(t, th, rid)
	if !mapsEqual(s.Texts, want) {
		t.Fatalf("text %q, journal %q", s.Texts, want)
	}
	var results int
	for _, e := range hubtest.JournalEvents(t, th, rid) {
		switch e.Type {
		case protocol.EventToolDone:
			p := hubtest.Payload[protocol.ToolDonePayload](t, e)
			if _, ok := s.Results[agui.ID(rid, p.ToolCallID)]; !ok {
				t.Errorf("no TOOL_CALL_RESULT for %s in %v", p.ToolCallID, s.Results)
			}
			results++
		case protocol.EventApprovalRes:
			if p := hubtest.Payload[protocol.ApprovalResolvedPayload](t, e); p.Choice != "once" || p.Status != "resolved" {
				t.Errorf("approval resolved %+v", p)
			}
		case protocol.EventClarifyRes:
			if p := hubtest.Payload[protocol.ClarifyResolvedPayload](t, e); p.Response != "short" {
				t.Errorf("clarify resolved %+v", p)
			}
		}
	}
	if results != 2 {
		t.Errorf("%d tool results", results)
	}

	// A stream cut mid-run and resumed with Last-Event-ID.
	s = runAGUIRun(t, node, dir, []string{"CUT=7"}, "cut", url, "thread-cut", "cut me", `{"runhub":{"metadata":{"sim":{"tokens":40,"token_ms":5,"tools":0}}}}`)
	meta = hubtest.SessionMeta(t, th, "thread-cut")
	if len(meta.Runs) != 1 {
		t.Fatalf("runhub runs %v, want one (the retry is no second run)", meta.Runs)
	}
	rid = meta.Runs[0]
	want, n := journalText(t, th, rid)
	got := 0
	for _, typ := range s.Types {
		if typ == "TEXT_MESSAGE_CONTENT" {
			got++
		}
	}
	if !mapsEqual(s.Texts, want) || got != n || s.FirstCount == 0 || s.CutAt == "" {
		t.Fatalf("after a cut at %s (%d events): text %q (%d deltas), journal %q (%d)", s.CutAt, s.FirstCount, s.Texts, got, want, n)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func values(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func assistantText(s aguiRunSummary) string {
	var b strings.Builder
	for _, m := range s.Messages {
		if m.Role == "assistant" && m.Content != nil {
			b.WriteString(*m.Content)
		}
	}
	return b.String()
}
