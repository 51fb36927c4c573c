package hermeswebui_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hermeswebui"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/internal/webuiclient"
	"github.com/runhub/runhub/protocol"
)

// importInto imports a state directory holding conv into the hub's
// journal as subject owner, as `hub import hermes-webui` does.
func importInto(t *testing.T, th *webuiHub, dir, owner string) {
	t.Helper()
	files, _, err := hermeswebui.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := &hermeswebui.Writer{Store: th.Store, Owner: owner}
	for _, f := range files {
		s, err := hermeswebui.ReadSidecar(f, hermeswebui.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		js, _ := hermeswebui.ReadRunJournals(dir, s.SessionID, hermeswebui.Limits{})
		prompts, _ := hermeswebui.Prompts(dir, s.SessionID, hermeswebui.Limits{})
		if _, err := w.Write(context.Background(), hermeswebui.Plan(hermeswebui.Input{Sidecar: s, Journals: js, Prompts: prompts,
			Now: protocol.Timestamp(time.Now())})); err != nil {
			t.Fatal(err)
		}
	}
}

// An imported session replays over /v1/ws as the source journal: each row
// one event with its seq and event_id, its time, runhub's type and the row
// itself; over the runner API its events are the source rows exactly; and
// WebUI goes on with the session through the runner API.
func TestWebUIImportedReplay(t *testing.T) {
	th := newWebUIHub(t, hub.Config{}, hermeswebui.RunnerOptions{})
	dir := t.TempDir()
	conv := webuiclient.Conversation("a1b2c3d4e5f6", 1786000000)
	if err := webuiclient.WriteSession(dir, conv); err != nil {
		t.Fatal(err)
	}
	importInto(t, th, dir, hub.OpenSubject)
	ctx := hubtest.Ctx(t, 30*time.Second)
	for _, run := range conv.Runs {
		// Over the tab socket: the run replays from its start.
		tab := th.Dial(t)
		if err := tab.Focus(ctx, conv.ID, protocol.EventID(run.ID, 0)); err != nil {
			t.Fatal(err)
		}
		col := hubtest.NewCollector()
		col.Until(t, tab, 10*time.Second, "the imported run's terminal", func() bool { return col.TerminalOf(run.ID) })
		var got []protocol.Envelope
		for _, e := range col.Events {
			if e.RunID == run.ID {
				got = append(got, e)
			}
		}
		hubtest.CheckRun(t, got, run.ID)
		if len(got) != len(run.Rows) {
			t.Fatalf("run %s: %d events over the socket, %d rows", run.ID, len(got), len(run.Rows))
		}
		for i, row := range run.Rows {
			e := got[i]
			var p struct {
				Webui struct {
					Event     string          `json:"event"`
					Payload   json.RawMessage `json:"payload"`
					CreatedAt float64         `json:"created_at"`
				} `json:"webui"`
			}
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if e.EventID != protocol.EventID(run.ID, uint64(i+1)) || p.Webui.Event != row.Event || p.Webui.CreatedAt != row.At ||
				(!e.Terminal && e.CreatedAt != row.At) || !sameJSON(t, p.Webui.Payload, row.Payload) {
				t.Fatalf("run %s row %d (%s): event %s %s at %v, kept %+v", run.ID, i+1, row.Event, e.EventID, e.Type, e.CreatedAt, p.Webui)
			}
		}
		// Over the runner API: the source rows themselves.
		c := webuiclient.New(th.runner, "")
		es, err := c.ObserveRun(ctx, run.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(es.Events) != len(run.Rows) {
			t.Fatalf("run %s: %d events over the runner API, %d rows", run.ID, len(es.Events), len(run.Rows))
		}
		for i, row := range run.Rows {
			e := es.Events[i]
			if e["event"] != row.Event || e["type"] != row.Event || e["event_id"] != protocol.EventID(run.ID, uint64(i+1)) ||
				e["seq"] != float64(i+1) || e["created_at"] != row.At || !sameJSON(t, mustMarshal(e["payload"]), row.Payload) {
				t.Fatalf("run %s row %d: %v, want %s %v", run.ID, i+1, e, row.Event, row.Payload)
			}
		}
	}
	// WebUI continues the imported session through the runner API.
	c := webuiclient.New(th.runner, "")
	st, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: conv.ID, Message: "and now?",
		Metadata: simMeta(map[string]any{"tokens": 2, "token_ms": 1, "tools": 0})})
	if err != nil {
		t.Fatal(err)
	}
	r := newRelayed()
	if err := relay(ctx, c, st.RunID, nil, r)(); err != nil {
		t.Fatal(err)
	}
	fs := r.snapshot()
	done := fs[len(fs)-2].Data.(map[string]any)["session"].(map[string]any)
	msgs := done["messages"].([]any)
	if len(msgs) < 4 || msgs[0].(map[string]any)["content"] != "Why does test_io fail?" ||
		msgs[len(msgs)-2].(map[string]any)["content"] != "and now?" {
		t.Fatalf("done's transcript after the import: %v", msgs)
	}
}

func mustMarshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func sameJSON(t *testing.T, raw json.RawMessage, want any) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	wb, _ := json.Marshal(want)
	json.Unmarshal(wb, &b)
	return reflect.DeepEqual(a, b)
}
