package hermes_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Hermes 0.18.x's /v1/runs keeps no history it reads back, so the next
// run of a session is sent the session's earlier turns as
// conversation_history, with the tool calls of those turns and their ends
// as text in the assistant's turn (the API keeps only role and content),
// and runhub's session id as session_id.
func TestHistory_RebuiltWithTools(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		if n == 1 {
			s.event("tool.started", map[string]any{"tool": "terminal", "preview": "ls build"})
			s.event("tool.completed", map[string]any{"tool": "terminal", "duration": 0.2, "error": false})
			deltas(s, "two files")
			completed(s, "two files")
			return
		}
		deltas(s, "ok")
		completed(s, "ok")
	}, nil)
	first := h.start("", "what is in build?")
	h.finish(first.RunID)
	h.finish(h.start(first.SessionID, "delete them").RunID)
	body := h.fake.startCalls()[1].Body
	if body["session_id"] != first.SessionID {
		t.Errorf("session_id %v, want %s", body["session_id"], first.SessionID)
	}
	hist, _ := body["conversation_history"].([]any)
	if len(hist) != 2 {
		t.Fatalf("conversation_history %v, want the user's turn and the assistant's", body["conversation_history"])
	}
	user, _ := hist[0].(map[string]any)
	asst, _ := hist[1].(map[string]any)
	content, _ := asst["content"].(string)
	if user["role"] != "user" || user["content"] != "what is in build?" || asst["role"] != "assistant" ||
		!strings.Contains(content, `[tool terminal {"preview":"ls build"}]`) ||
		!strings.Contains(content, "[tool terminal ok]") || !strings.HasSuffix(content, "two files") {
		t.Errorf("conversation_history %v", hist)
	}
}

// A server that owns a session's history (managed_run_sessions,
// managed_run_history_authority hermes_session_db) is sent the session id
// only: no conversation_history replays runhub's copy.
func TestHistory_OwnedByTheServer(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, "ok")
		completed(s, "ok")
	}, nil)
	h.fake.setFeatures(func(f map[string]any) {
		f["managed_run_sessions"] = true
		f["managed_run_history_authority"] = "hermes_session_db"
	})
	first := h.start("", "hello")
	h.finish(first.RunID)
	evs := h.finish(h.start(first.SessionID, "again").RunID)
	if terminal(evs).Type != protocol.EventDone {
		t.Fatalf("terminal %s", terminal(evs).Type)
	}
	body := h.fake.startCalls()[1].Body
	if body["session_id"] != first.SessionID {
		t.Errorf("session_id %v, want %s", body["session_id"], first.SessionID)
	}
	if _, ok := body["conversation_history"]; ok {
		t.Errorf("conversation_history sent to a server that owns the history: %v", body["conversation_history"])
	}
}

// An imported session (hermes-webui's context_messages, under the start
// request's history key) has its earlier turns only in runhub's journal:
// its first run sends them as conversation_history, also to a server that
// owns the history; the next run sends the server that owns it none, and
// a 0.18.x server the imported turns with the first run's.
func TestHistory_ImportedReachesHermes(t *testing.T) {
	for _, owns := range []bool{false, true} {
		h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
			deltas(s, "ok")
			completed(s, "ok")
		}, nil)
		if owns {
			h.fake.setFeatures(func(f map[string]any) {
				f["managed_run_sessions"] = true
				f["managed_run_history_authority"] = "hermes_session_db"
			})
		}
		ctx := context.Background()
		sid, rid := "s_imported", "r_imported"
		req, _ := json.Marshal(map[string]any{"session_id": sid, "message": "earlier question", "source": "import",
			"history": []map[string]string{{"role": "user", "content": "earlier question"}, {"role": "assistant", "content": "earlier answer"}}})
		done, err := protocol.NewEvent(rid, sid, protocol.EventDone, protocol.DonePayload{Status: "completed"})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.store.CreateSession(ctx, journal.SessionMeta{ID: sid, Owner: "local"}); err != nil {
			t.Fatal(err)
		}
		if err := h.store.BeginRun(ctx, journal.RunMeta{ID: rid, SessionID: sid, Owner: "local", Request: req}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.store.Append(ctx, done, ""); err != nil {
			t.Fatal(err)
		}
		h.finish(h.start(sid, "first here").RunID)
		h.finish(h.start(sid, "second here").RunID)
		calls := h.fake.startCalls()
		hist := func(i int) string {
			b, _ := json.Marshal(calls[i].Body["conversation_history"])
			return string(b)
		}
		imported := `[{"content":"earlier question","role":"user"},{"content":"earlier answer","role":"assistant"}]`
		if got := hist(0); got != imported {
			t.Errorf("owns history %v: the imported session's first run sent %s, want %s", owns, got, imported)
		}
		want := strings.TrimSuffix(imported, "]") + `,{"content":"first here","role":"user"},{"content":"ok","role":"assistant"}]`
		if owns {
			want = "null"
		}
		if got := hist(1); got != want {
			t.Errorf("owns history %v: the next run sent %s, want %s", owns, got, want)
		}
	}
}
