package session_test

import (
	"encoding/json"
	"testing"

	"github.com/runhub/runhub/protocol"
)

// The fold keeps done's result and a terminal error's code and message;
// RunStatus shows the result of a completed run and the error of a run that
// ended in error, and neither for a live or cancelled run.
func TestRun_FoldResultAndError(t *testing.T) {
	doneWith := step{protocol.EventDone, protocol.DonePayload{Status: "completed", Result: "the build is fixed", Truncated: true, LastSeq: 2}}
	r := play(t, started, token, doneWith)
	if r.Result != "the build is fixed" || !r.ResultTruncated {
		t.Errorf("folded result %q truncated %v", r.Result, r.ResultTruncated)
	}
	if s := r.RunStatus(); s.Result != "the build is fixed" || !s.ResultTruncated || s.Error != nil {
		t.Errorf("completed run status: %+v", s)
	}

	// done journaled before result existed: no result, no error.
	r = play(t, started, token)
	legacy := ev(t, "r1", r.LastSeq+1, protocol.EventDone, map[string]any{"status": "completed", "usage": nil})
	if err := r.Apply(&legacy); err != nil {
		t.Fatal(err)
	}
	if s := r.RunStatus(); s.TerminalState != protocol.StatusCompleted || s.Result != "" || s.ResultTruncated || s.Error != nil {
		t.Errorf("legacy done run status: %+v", s)
	}

	for _, tt := range []struct {
		code  string
		state protocol.Status
	}{
		{protocol.ErrorProviderError, protocol.StatusFailed},
		{protocol.ErrorInterrupted, protocol.StatusInterrupted},
		{protocol.ErrorTimeout, protocol.StatusExpired},
	} {
		r := play(t, started, token,
			step{protocol.EventError, protocol.ErrorPayload{Code: "provider_error", Message: "a passing hiccup", Terminal: false}},
			step{protocol.EventError, protocol.ErrorPayload{Code: tt.code, Message: "it ended: " + tt.code, Terminal: true}})
		s := r.RunStatus()
		if s.TerminalState != tt.state || s.Result != "" || s.Error == nil ||
			*s.Error != (protocol.RunError{Code: tt.code, Message: "it ended: " + tt.code}) {
			t.Errorf("%s: run status %+v error %+v", tt.code, s, s.Error)
		}
	}

	// A non-terminal error leaves a live run without error; a cancelled
	// run has neither.
	live := play(t, started, step{protocol.EventError, protocol.ErrorPayload{Code: "provider_error", Message: "retrying", Terminal: false}})
	cancelled := play(t, started, token, step{protocol.EventCancelled, protocol.CancelledPayload{Reason: "user", Partial: true}})
	for name, r := range map[string]protocol.RunStatus{"live": live.RunStatus(), "cancelled": cancelled.RunStatus()} {
		b, _ := json.Marshal(r)
		if r.Result != "" || r.Error != nil {
			t.Errorf("%s run status has a result or error: %s", name, b)
		}
	}
}
