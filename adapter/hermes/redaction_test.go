package hermes_test

import (
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// noLeak checks the secrets are nowhere in the harness's journal file,
// logs or the events of the run.
func (h *harness) noLeak(evs []protocol.Envelope, wantMarker bool) {
	h.t.Helper()
	raw := drivertest.JournalBytes(h.t, h.dbPath)
	drivertest.NoLeakIn(h.t, raw, h.logs.String(), evs, wantMarker)
}

// A Hermes run that spills real-looking secrets everywhere it can — its
// answer and its reasoning streamed in pieces of a few bytes, tool
// previews (the tool call's arguments), a subagent's goal, an approval's
// command and description, a clarify question, and its final output —
// gets none of them into the journal file, the logs or the events a tab
// is sent; the streamed text is otherwise kept.
func TestRedaction_Secrets(t *testing.T) {
	secretText := drivertest.SecretText()
	for seed := range uint64(4) {
		chunks := drivertest.Chunks(secretText, 4, seed)
		h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
			for _, c := range chunks {
				s.event("reasoning.delta", map[string]any{"text": c})
			}
			for _, sec := range drivertest.Secrets {
				s.event("tool.started", map[string]any{"tool": "terminal", "preview": sec.Context})
				s.event("tool.completed", map[string]any{"tool": "terminal", "duration": 0.1, "error": false})
			}
			s.event("subagent.start", map[string]any{"goal": drivertest.Secrets[0].Context})
			s.event("approval.request", map[string]any{"command": drivertest.Secrets[4].Context, "description": drivertest.Secrets[5].Context,
				"choices": []string{"once", "deny"}})
			time.Sleep(50 * time.Millisecond)
			s.event("approval.responded", map[string]any{"choice": "deny", "resolved": 1})
			s.event("clarify.request", map[string]any{"clarify_id": "clr_1", "question": "Use " + drivertest.Secrets[1].Context + "?", "choices": nil})
			s.event("clarify.retired", map[string]any{"clarify_id": "clr_1"})
			for _, c := range chunks {
				s.event("message.delta", map[string]any{"delta": c})
			}
			completed(s, secretText)
		}, nil)
		res := h.start("", "show me the config")
		evs := h.finish(res.RunID)
		if terminal(evs).Type != protocol.EventDone {
			t.Fatalf("terminal %s:\n%s", terminal(evs).Type, dump(evs))
		}
		h.noLeak(evs, true)
		want := journal.RedactString(secretText)
		if got := text(evs); got != want {
			t.Fatalf("seed %d: text\n got %q\nwant %q", seed, got, want)
		}
		asked := false // the clarify question, journaled as a note (TestClarifyNotRelayed)
		for _, e := range notes(evs) {
			asked = asked || strings.Contains(payload[protocol.ProgressPayload](e).Text, "Use ")
		}
		if len(ofType(evs, protocol.EventToolStarted)) != len(drivertest.Secrets) || len(ofType(evs, protocol.EventApprovalReq)) != 1 || !asked {
			t.Fatalf("seed %d: the run did not map every event:\n%s", seed, dump(evs))
		}
	}
}

// Secrets in Hermes' error text — run.failed, and a refused start's body —
// are redacted from the run's error and appear nowhere.
func TestRedaction_FailureText(t *testing.T) {
	for _, sec := range drivertest.Secrets {
		msg := drivertest.Marker + " " + sec.Context
		t.Run(sec.Name+"/run.failed", func(t *testing.T) {
			h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
				deltas(s, "trying ")
				s.event("run.failed", map[string]any{"error": msg})
			}, nil)
			evs := h.finish(h.start("", "task").RunID)
			wantError(t, evs, protocol.ErrorProviderError)
			h.noLeak(evs, true)
		})
		t.Run(sec.Name+"/start refused", func(t *testing.T) {
			h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) { completed(s, "never") }, nil)
			h.fake.startFail = func(int) (int, string, bool) {
				return 500, `{"error":{"message":` + strings.ReplaceAll(quote(msg), "\n", " ") + `}}`, false
			}
			evs := h.finish(h.start("", "task").RunID)
			wantError(t, evs, protocol.ErrorProviderError)
			h.noLeak(evs, true)
		})
	}
}

func quote(s string) string {
	b := []byte{'"'}
	for _, r := range s {
		switch r {
		case '"', '\\':
			b = append(b, '\\', byte(r))
		default:
			b = append(b, string(r)...)
		}
	}
	return string(append(b, '"'))
}
