package journaltest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

var redactionTests = []subtest{
	{"EventPayloads", testRedactEventPayloads},
	{"RunRequest", testRedactRunRequest},
	{"SessionRecord", testRedactSessionRecord},
}

// Secrets that must never be stored, and how each reaches a payload.
const (
	secretBearer   = "abcDEF0123456789ghiJKL"
	secretSK       = "sk-proj-Q1w2E3r4T5y6U7i8O9p0AaSsDd"
	secretJWT      = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	secretAPIKey   = "live-api-key-9f8e7d6c5b4a"
	secretToken    = "tok-7a6b5c4d3e2f1a0b"
	secretPassword = "correct-horse-battery-staple"
)

var secrets = []string{secretBearer, secretSK, secretJWT, secretAPIKey, secretToken, secretPassword}

// Payload secrets are redacted before they are stored or delivered; token
// counts and ordinary text survive.
func testRedactEventPayloads(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	var live collector
	cancel := f.s.SubscribeRun(rid, live.add)
	defer cancel()

	args, _ := json.Marshal(map[string]any{
		"url":      "https://api.example.com/v1",
		"headers":  map[string]string{"Authorization": "Bearer " + secretBearer},
		"api_key":  secretAPIKey,
		"token":    secretToken,
		"password": secretPassword,
		"nested":   []any{map[string]any{"note": "key " + secretSK}},
		"limits":   map[string]int{"max_tokens": 4096},
	})
	inputs := []protocol.Envelope{
		progressEvent(t, sid, rid, "curl -H 'Authorization: Bearer "+secretBearer+"' https://x"),
		tokenEvent(t, sid, rid, "use "+secretSK+" for the call"),
		tokenEvent(t, sid, rid, "session cookie "+secretJWT),
		event(t, sid, rid, protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: "c1", Name: "http", Args: args}),
		event(t, sid, rid, protocol.EventUsageUpdated, protocol.Usage{InputTokens: 1234, OutputTokens: 567, Model: "m", Provider: "p"}),
		event(t, sid, rid, protocol.EventToolDone, protocol.ToolDonePayload{ToolCallID: "c1", Status: "ok",
			Result: json.RawMessage(`{"input_tokens":77,"access_token":"` + secretToken + `","text":"plain words"}`)}),
	}
	var returned []protocol.Envelope
	for _, e := range inputs {
		returned = append(returned, f.append(e, ""))
	}
	stored := f.readAll(rid, 100)
	waitFor(t, "live delivery", func() bool { return live.len() >= len(inputs) })
	for what, events := range map[string][]protocol.Envelope{"returned": returned, "stored": stored, "delivered": live.snapshot()} {
		for _, e := range events {
			for _, s := range secrets {
				if strings.Contains(string(e.Payload), s) {
					t.Fatalf("%s event %d (%s) holds secret %q: %s", what, e.Seq, e.Type, s, e.Payload)
				}
			}
		}
	}

	var started struct{ Args map[string]any }
	if err := json.Unmarshal(stored[3].Payload, &started); err != nil {
		t.Fatalf("tool.started payload: %v", err)
	}
	for _, k := range []string{"api_key", "token", "password"} {
		if started.Args[k] != journal.Redacted {
			t.Fatalf("args.%s stored as %v, want %q", k, started.Args[k], journal.Redacted)
		}
	}
	if started.Args["url"] != "https://api.example.com/v1" {
		t.Fatalf("args.url stored as %v", started.Args["url"])
	}
	if lim, _ := started.Args["limits"].(map[string]any); lim["max_tokens"] != 4096.0 {
		t.Fatalf("args.limits.max_tokens stored as %v, want 4096", started.Args["limits"])
	}
	var usage protocol.Usage
	if err := json.Unmarshal(stored[4].Payload, &usage); err != nil || usage.InputTokens != 1234 || usage.OutputTokens != 567 {
		t.Fatalf("usage stored as %s (%v), want input 1234 output 567", stored[4].Payload, err)
	}
	var done struct {
		Result struct {
			InputTokens int    `json:"input_tokens"`
			Text        string `json:"text"`
		}
	}
	if err := json.Unmarshal(stored[5].Payload, &done); err != nil || done.Result.InputTokens != 77 || done.Result.Text != "plain words" {
		t.Fatalf("tool.done stored as %s (%v)", stored[5].Payload, err)
	}
	if !strings.Contains(string(stored[0].Payload), "curl -H") {
		t.Fatalf("progress text lost its ordinary words: %s", stored[0].Payload)
	}
}

// The run's request is stored redacted.
func testRedactRunRequest(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid := f.session("alice")
	req := json.RawMessage(`{"message":"hello","model":"m","api_key":"` + secretAPIKey + `","headers":{"Authorization":"Bearer ` + secretBearer + `"},"max_tokens":300}`)
	if err := f.s.BeginRun(f.ctx, journal.RunMeta{ID: "r1", SessionID: sid, Request: req}); err != nil {
		t.Fatalf("BeginRun: %v", err)
	}
	m := f.runMeta("r1")
	for _, s := range secrets {
		if strings.Contains(string(m.Request), s) {
			t.Fatalf("stored request holds secret %q: %s", s, m.Request)
		}
	}
	var got struct {
		Message   string `json:"message"`
		MaxTokens int    `json:"max_tokens"`
	}
	if err := json.Unmarshal(m.Request, &got); err != nil || got.Message != "hello" || got.MaxTokens != 300 {
		t.Fatalf("stored request %s (%v), want message and max_tokens kept", m.Request, err)
	}
}

// A session's title, goal and queued messages are stored redacted, on
// creation and on every update, and their ordinary words survive.
func testRedactSessionRecord(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid := f.id("s")
	if err := f.s.CreateSession(f.ctx, journal.SessionMeta{ID: sid, Owner: "alice", Title: "deploy with " + secretSK}); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	_, err := f.s.UpdateSession(f.ctx, sid, func(m *journal.SessionMeta) error {
		m.Goal = &protocol.GoalUpdatedPayload{State: protocol.GoalActive, Text: "ship with Bearer " + secretBearer, Reason: "token " + secretJWT}
		m.Queue = append(m.Queue, journal.QueuedMessage{ID: "q1", Message: "then use password=" + secretPassword})
		return nil
	})
	if err != nil {
		t.Fatalf("UpdateSession: %v", err)
	}
	m := f.sessionMeta(sid)
	raw, _ := json.Marshal(m)
	for _, s := range secrets {
		if strings.Contains(string(raw), s) {
			t.Fatalf("stored session holds secret %q: %s", s, raw)
		}
	}
	if !strings.HasPrefix(m.Title, "deploy with ") {
		t.Fatalf("title %q lost its words", m.Title)
	}
	if m.Goal == nil || !strings.HasPrefix(m.Goal.Text, "ship with ") || len(m.Queue) != 1 || !strings.HasPrefix(m.Queue[0].Message, "then use ") {
		t.Fatalf("goal %+v queue %+v", m.Goal, m.Queue)
	}
}
