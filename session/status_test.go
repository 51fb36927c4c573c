package session_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// sessionPlay applies steps of run rid to s, numbering them after the run's
// last seq (1 for a run s has not seen).
func sessionPlay(t *testing.T, s *session.Session, rid string, steps ...step) {
	t.Helper()
	for _, st := range steps {
		seq := uint64(1)
		if s.Latest != nil && s.Latest.RunID == rid {
			seq = s.Latest.LastSeq + 1
		}
		e := ev(t, rid, seq, st.typ, st.payload)
		if err := s.Apply(&e); err != nil {
			t.Fatalf("Session.Apply(%s %s:%d): %v", st.typ, rid, seq, err)
		}
	}
}

var (
	title     = step{protocol.EventTitleUpdated, protocol.TitleUpdatedPayload{Title: "Fix the build", Source: "model"}}
	queued2   = step{protocol.EventQueueUpdated, protocol.QueueUpdatedPayload{Depth: 2, Items: []protocol.QueueItem{{ID: "q1", Preview: "a"}, {ID: "q2", Preview: "b"}}}}
	goalSet   = step{protocol.EventGoalUpdated, protocol.GoalUpdatedPayload{State: "active", Text: "green CI"}}
	usageStep = step{protocol.EventUsageUpdated, protocol.Usage{InputTokens: 4, OutputTokens: 2, Model: "m", Provider: "p", DurationMS: 10}}
)

func TestSession_StatusWithoutRuns(t *testing.T) {
	s := session.NewSession("s1", "New chat")
	got := s.Status()
	want := protocol.SessionStatus{SessionID: "s1", Title: "New chat", ActiveControls: []string{"start", "queue", "goal"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Status() = %+v\nwant %+v", got, want)
	}
	if got := s.Controls(); !slices.Equal(got, []string{"start", "queue", "goal"}) {
		t.Errorf("Controls() = %v", got)
	}
}

// Status derivation at each point of a run, with the run's fields carried
// into the SessionStatus.
func TestSession_Status(t *testing.T) {
	s := session.NewSession("s1", "")
	sessionPlay(t, &s, "r1", started, title, queued2, goalSet, token, token, usageStep, askA1)

	got := s.Status()
	want := protocol.SessionStatus{
		SessionID: "s1", Title: "Fix the build", RunID: "r1", Status: protocol.StatusAwaitingApproval,
		LastSeq: 8, LastEventID: "r1:8", ActiveControls: []string{"cancel", "approve", "queue", "goal"},
		PendingApproval: &protocol.PendingApproval{ApprovalID: "a1", Summary: "run make", Risk: "low", Choices: []string{"once", "session", "always", "deny"}},
		Progress:        "approval: run make", Tokens: 2,
		Usage:      &protocol.Usage{InputTokens: 4, OutputTokens: 2, Model: "m", Provider: "p", DurationMS: 10},
		QueueDepth: 2, Goal: &protocol.GoalUpdatedPayload{State: "active", Text: "green CI"},
		UpdatedAt: 1778750008,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Status()\n got %s\nwant %s", js(got), js(want))
	}

	sessionPlay(t, &s, "r1", resolveA1, askQ1)
	got = s.Status()
	if got.Status != protocol.StatusAwaitingClarify || got.PendingApproval != nil || got.PendingClarify == nil ||
		got.PendingClarify.ClarifyID != "q1" || !slices.Equal(got.ActiveControls, []string{"cancel", "clarify", "queue", "goal"}) {
		t.Errorf("with a question pending: %s", js(got))
	}

	sessionPlay(t, &s, "r1", resolveQ1, token, done)
	got = s.Status()
	if got.Status != protocol.StatusCompleted || !got.Terminal || got.TerminalState != protocol.StatusCompleted ||
		got.PendingClarify != nil || got.Tokens != 3 || got.LastEventID != "r1:13" || got.Progress != "completed" ||
		!slices.Equal(got.ActiveControls, []string{"start", "queue", "goal"}) || got.Usage.OutputTokens != 3 {
		t.Errorf("completed: %s", js(got))
	}

	// The JSON form has every field of protocol.md, prompts as null.
	b, _ := json.Marshal(got)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"session_id", "title", "run_id", "status", "last_seq", "last_event_id", "terminal",
		"terminal_state", "active_controls", "pending_approval", "pending_clarify", "progress", "tokens", "usage",
		"queue_depth", "goal", "updated_at"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("SessionStatus JSON lacks %s: %s", f, b)
		}
	}
	if string(fields["pending_approval"]) != "null" || string(fields["pending_clarify"]) != "null" {
		t.Errorf("resolved prompts are not null: %s", b)
	}
}

func TestSession_StatusTerminalStates(t *testing.T) {
	for _, tt := range []struct {
		end  step
		want protocol.Status
	}{
		{done, protocol.StatusCompleted},
		{cancelled, protocol.StatusCancelled},
		{errorEvent("provider_error", "p", true), protocol.StatusFailed},
		{errorEvent("timeout", "t", true), protocol.StatusExpired},
		{errorEvent("interrupted", "i", true), protocol.StatusInterrupted},
	} {
		s := session.NewSession("s1", "")
		sessionPlay(t, &s, "r1", started, tt.end)
		st := s.Status()
		if st.Status != tt.want || st.TerminalState != tt.want || !st.Terminal || !slices.Equal(st.ActiveControls, []string{"start", "queue", "goal"}) {
			t.Errorf("after %s: %s", tt.end.typ, js(st))
		}
	}
}

func TestSession_ApplyAcrossRuns(t *testing.T) {
	s := session.NewSession("s1", "")
	sessionPlay(t, &s, "r1", started, title, queued2, goalSet, token, token, done)
	sessionPlay(t, &s, "r2", status("queued", "cancel"))

	if s.Latest == nil || s.Latest.RunID != "r2" || s.Latest.LastSeq != 1 {
		t.Fatalf("latest = %+v, want r2 at seq 1", s.Latest)
	}
	st := s.Status()
	if st.RunID != "r2" || st.Status != protocol.StatusQueued || st.Terminal || st.TerminalState != "" ||
		st.LastEventID != "r2:1" || st.Tokens != 0 || st.Usage != nil || st.Progress != "" ||
		!slices.Equal(st.ActiveControls, []string{"cancel", "queue", "goal"}) {
		t.Errorf("new run's status carries the old run's: %s", js(st))
	}
	// Title, queue depth and goal carry over.
	if st.Title != "Fix the build" || st.QueueDepth != 2 || st.Goal == nil || st.Goal.Text != "green CI" {
		t.Errorf("session fields did not carry over: %s", js(st))
	}

	sessionPlay(t, &s, "r2", started, token,
		step{protocol.EventQueueUpdated, protocol.QueueUpdatedPayload{Depth: 1, Items: []protocol.QueueItem{{ID: "q2", Preview: "b"}}}},
		step{protocol.EventGoalUpdated, protocol.GoalUpdatedPayload{State: "paused", Text: "green CI"}})
	st = s.Status()
	if st.QueueDepth != 1 || st.Goal.State != "paused" || st.Tokens != 1 || st.Title != "Fix the build" {
		t.Errorf("updates in the second run: %s", js(st))
	}
	// A later run's title does not rename the session.
	sessionPlay(t, &s, "r2", step{protocol.EventTitleUpdated, protocol.TitleUpdatedPayload{Title: "Build fixed", Source: "model"}}, cancelled)
	sessionPlay(t, &s, "r3", started)
	if st := s.Status(); st.Title != "Fix the build" || st.RunID != "r3" || st.Status != protocol.StatusRunning {
		t.Errorf("third run: %s", js(st))
	}
}

// sessionFails applies event e to s and wants target with s unchanged.
func sessionFails(t *testing.T, s *session.Session, e protocol.Envelope, target error) {
	t.Helper()
	before := *s
	var latest session.Run
	if s.Latest != nil {
		latest = *s.Latest
	}
	err := s.Apply(&e)
	if !errors.Is(err, target) {
		t.Errorf("Session.Apply(%s %s): err = %v, want %v", e.EventID, e.Type, err, target)
	}
	if !reflect.DeepEqual(*s, before) || (s.Latest != nil && !reflect.DeepEqual(*s.Latest, latest)) {
		t.Errorf("Session.Apply(%s %s) changed the session", e.EventID, e.Type)
	}
}

func TestSession_ApplyNewRunStartsAtSeqOne(t *testing.T) {
	s := session.NewSession("s1", "")
	sessionFails(t, &s, ev(t, "r1", 2, started.typ, started.payload), session.ErrSeq)
	sessionPlay(t, &s, "r1", started, done)
	sessionFails(t, &s, ev(t, "r2", 2, started.typ, started.payload), session.ErrSeq)
	sessionFails(t, &s, ev(t, "r2", 0, started.typ, started.payload), session.ErrSeq)
}

func TestSession_ApplyOtherSession(t *testing.T) {
	s := session.NewSession("s1", "")
	sessionPlay(t, &s, "r1", started)
	e := ev(t, "r1", 2, token.typ, token.payload)
	e.SessionID = "s2"
	sessionFails(t, &s, e, session.ErrWrongRun)
	e = ev(t, "r9", 1, started.typ, started.payload)
	e.SessionID = "s2"
	sessionFails(t, &s, e, session.ErrWrongRun)
}

// An event of an earlier run never takes the session back to that run.
func TestSession_ApplyOlderRun(t *testing.T) {
	s := session.NewSession("s1", "")
	sessionPlay(t, &s, "r1", started, token, done)
	sessionPlay(t, &s, "r2", started)
	sessionFails(t, &s, ev(t, "r1", 1, started.typ, started.payload), session.ErrWrongRun)
	sessionFails(t, &s, ev(t, "r1", 3, done.typ, done.payload), session.ErrWrongRun)
	sessionFails(t, &s, ev(t, "r1", 4, token.typ, token.payload), session.ErrWrongRun)
	if s.Latest.RunID != "r2" {
		t.Fatalf("latest run is %s", s.Latest.RunID)
	}
	// Copies of a session keep their own history.
	c := s
	sessionPlay(t, &c, "r3", started)
	sessionPlay(t, &s, "r4", started)
	sessionPlay(t, &s, "r3", started) // r3 is new to s, r4 earlier
	sessionPlay(t, &c, "r4", started) // r4 is new to c, r3 earlier
	sessionFails(t, &s, ev(t, "r4", 1, started.typ, started.payload), session.ErrWrongRun)
	sessionFails(t, &c, ev(t, "r3", 1, started.typ, started.payload), session.ErrWrongRun)
	if s.Latest.RunID != "r3" || c.Latest.RunID != "r4" {
		t.Errorf("latest runs %s and %s, want r3 and r4", s.Latest.RunID, c.Latest.RunID)
	}

	// A run loaded with SetLatest retires the one before it.
	sessionPlay(t, &s, "r3", done)
	s.SetLatest(session.NewRun("r6", "s1"))
	sessionFails(t, &s, ev(t, "r3", 1, started.typ, started.payload), session.ErrWrongRun)
}

// The illegal sequences of a run are illegal through the session too, and
// leave it unchanged.
func TestSession_ApplyIllegal(t *testing.T) {
	s := session.NewSession("s1", "")
	sessionPlay(t, &s, "r1", started, askA1)
	sessionFails(t, &s, ev(t, "r1", 4, token.typ, token.payload), session.ErrSeq)
	sessionFails(t, &s, ev(t, "r1", 3, resolveQ1.typ, resolveQ1.payload), session.ErrUnknownPrompt)
	sessionFails(t, &s, protocol.Envelope{EventID: "r1:3", Seq: 3, RunID: "r1", SessionID: "s1", Type: protocol.EventStatus,
		Payload: json.RawMessage(`{"status":"completed","controls":[]}`)}, session.ErrBadStatus)
	sessionPlay(t, &s, "r1", resolveA1, done)
	sessionFails(t, &s, ev(t, "r1", 5, token.typ, token.payload), session.ErrAfterTerminal)
	sessionFails(t, &s, ev(t, "r1", 5, cancelled.typ, cancelled.payload), session.ErrAfterTerminal)
	// A failed first event of a new run leaves the old run latest.
	sessionFails(t, &s, ev(t, "r2", 1, resolveA1.typ, resolveA1.payload), session.ErrUnknownPrompt)
	if s.Latest.RunID != "r1" {
		t.Errorf("latest run is %s after a failed start of r2", s.Latest.RunID)
	}
}

func TestSession_Controls(t *testing.T) {
	s := session.NewSession("s1", "")
	check := func(want ...string) {
		t.Helper()
		if got := s.Controls(); !slices.Equal(got, want) {
			t.Errorf("Controls() = %v, want %v", got, want)
		}
		if got := s.Status().ActiveControls; !slices.Equal(got, want) {
			t.Errorf("Status().ActiveControls = %v, want %v", got, want)
		}
	}
	check("start", "queue", "goal")
	sessionPlay(t, &s, "r1", status("queued"))
	check("cancel", "queue", "goal")
	sessionPlay(t, &s, "r1", started, askA1)
	check("cancel", "approve", "queue", "goal")
	sessionPlay(t, &s, "r1", resolveA1, status("paused"))
	check("cancel", "queue", "goal")
	sessionPlay(t, &s, "r1", status("cancelling"))
	check("queue", "goal")
	sessionPlay(t, &s, "r1", cancelled)
	check("start", "queue", "goal")
}

func TestSession_SetLatest(t *testing.T) {
	r := play(t, started, title, goalSet, queued2, token)
	s := session.NewSession("s1", "")
	s.SetLatest(r)
	st := s.Status()
	if st.RunID != "r1" || st.Title != "Fix the build" || st.Goal == nil || st.QueueDepth != 2 || st.Tokens != 1 ||
		st.LastEventID != "r1:5" || st.UpdatedAt != r.UpdatedAt {
		t.Errorf("after SetLatest: %s", js(st))
	}
	// Events continue from the loaded state.
	sessionPlay(t, &s, "r1", done)
	if s.Latest.LastSeq != 6 || !s.Latest.Terminal {
		t.Errorf("latest after done: %+v", s.Latest)
	}
	// The loaded run is a copy: changing it does not change the session.
	r.Title = "changed"
	if s.Latest.Title == "changed" {
		t.Errorf("SetLatest kept a reference to the caller's run")
	}
	// A run without a title keeps the session's.
	s2 := session.NewSession("s2", "Kept")
	s2.SetLatest(session.NewRun("r9", "s2"))
	if s2.Status().Title != "Kept" {
		t.Errorf("title = %q", s2.Status().Title)
	}
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return strings.ReplaceAll(string(b), `,"`, `, "`)
}

// A session keeps the title it was given: a run's title.updated names only
// a session without a title, whether the run is folded event by event or
// loaded whole.
func TestSession_KeepsItsTitle(t *testing.T) {
	s := session.NewSession("s1", "My session")
	sessionPlay(t, &s, "r1", started, title, token)
	if got := s.Status().Title; got != "My session" {
		t.Errorf("after a titled run: title %q, want the given one", got)
	}
	loaded := session.NewSession("s1", "My session")
	loaded.SetLatest(play(t, started, title, token))
	if got := loaded.Status().Title; got != "My session" {
		t.Errorf("after SetLatest of a titled run: title %q, want the given one", got)
	}
	untitled := session.NewSession("s1", "")
	sessionPlay(t, &untitled, "r1", started, title)
	if got := untitled.Status().Title; got != "Fix the build" {
		t.Errorf("untitled session after a titled run: %q", got)
	}
}
