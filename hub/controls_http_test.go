package hub_test

// The control acceptance properties (controls_ws_test.go) over the HTTP
// endpoints of protocol.md §3, plus what only HTTP has: the status code of
// every answer and the Idempotency-Key header.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/protocol"
)

// httpTransport sends controls to the HTTP endpoints and reads statuses
// with GET /v1/sessions/{sid}.
type httpTransport struct{ th *testHub }

func newHTTP(t testing.TB, th *testHub) transport { return &httpTransport{th: th} }

func (h *httpTransport) Name() string { return "http" }

// call does one request; it never stops the test (it may run on any
// goroutine).
func (h *httpTransport) call(method, path string, body any, hdr map[string]string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, h.th.URL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return resp.StatusCode, data, fmt.Errorf("content type %q, body %s", ct, data)
	}
	return resp.StatusCode, data, nil
}

// resultStatus is the HTTP status protocol.md gives a ControlResult.
func resultStatus(res protocol.ControlResult, ok int) int {
	switch res.Status {
	case protocol.ResultNotActive, protocol.ResultExpired, protocol.ResultConflict:
		return http.StatusConflict
	case protocol.ResultUnsupported:
		return http.StatusNotImplemented
	}
	return ok
}

func (h *httpTransport) Control(t testing.TB, m protocol.Control, key string) (protocol.ControlResult, *protocol.Error) {
	fail := func(format string, args ...any) (protocol.ControlResult, *protocol.Error) {
		msg := fmt.Sprintf(format, args...)
		t.Errorf("http %s: %s", m.Op, msg)
		return protocol.ControlResult{}, &protocol.Error{Code: "transport", Message: msg}
	}
	var hdr map[string]string
	if key != "" {
		hdr = map[string]string{"Idempotency-Key": key}
	}
	esc := url.PathEscape
	var path string
	var body any
	ok := http.StatusOK
	switch m.Op {
	case protocol.OpStart:
		sid := m.SessionID
		if sid == "" {
			code, data, err := h.call("POST", "/v1/sessions", map[string]string{}, nil)
			var cs protocol.CreateSessionResult
			if err != nil || code != http.StatusCreated || json.Unmarshal(data, &cs) != nil {
				return fail("create session: %d %s %v", code, data, err)
			}
			sid = cs.SessionID
		}
		path, ok = "/v1/sessions/"+esc(sid)+"/runs", http.StatusAccepted
		body = protocol.StartRunRequest{Message: m.Message, Attachments: m.Attachments, Workspace: m.Workspace, Profile: m.Profile,
			Provider: m.Provider, Metadata: m.Metadata}
	case protocol.OpCancel:
		if m.RunID == "" {
			return fail("HTTP cancels name a run")
		}
		path = "/v1/runs/" + esc(m.RunID) + "/cancel"
	case protocol.OpApprove:
		path, body = "/v1/runs/"+esc(m.RunID)+"/approvals/"+esc(m.ApprovalID), protocol.ApprovalRequest{Choice: m.Choice}
	case protocol.OpClarify:
		path, body = "/v1/runs/"+esc(m.RunID)+"/clarifications/"+esc(m.ClarifyID), protocol.ClarifyRequest{Response: m.Response}
	case protocol.OpQueue:
		path, body = "/v1/sessions/"+esc(m.SessionID)+"/queue", protocol.QueueRequest{Message: m.Message, Mode: m.Mode}
	case protocol.OpGoal:
		path, body = "/v1/sessions/"+esc(m.SessionID)+"/goal", protocol.GoalRequest{Action: m.Action, Text: m.Text}
	default:
		return fail("no endpoint")
	}
	code, data, err := h.call("POST", path, body, hdr)
	if err != nil {
		return fail("%v", err)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return fail("body %s: %v", data, err)
	}
	if _, isErr := probe["error"]; isErr {
		var eb protocol.ErrorBody
		if err := json.Unmarshal(data, &eb); err != nil || eb.Error == nil {
			return fail("error body %s", data)
		}
		checkSafe(t, "http error "+string(eb.Error.Code), eb.Error.Message)
		if want := httpx.HTTPStatus(eb.Error.Code); code != want {
			t.Errorf("http %s: error %s answered %d, want %d", m.Op, eb.Error.Code, code, want)
		}
		return protocol.ControlResult{}, eb.Error
	}
	var res protocol.ControlResult
	if m.Op == protocol.OpStart && code == http.StatusAccepted {
		var rs protocol.RunStartResult
		if err := json.Unmarshal(data, &rs); err != nil {
			return fail("start body %s: %v", data, err)
		}
		if rs.Status != protocol.StatusRunning || rs.StreamID != rs.RunID || !slices.Equal(rs.ActiveControls, []string{protocol.OpCancel}) {
			t.Errorf("http start: RunStartResult %+v", rs)
		}
		res = protocol.ControlResult{Accepted: true, Status: protocol.ResultAccepted, Message: "started",
			RunID: rs.RunID, SessionID: rs.SessionID, EventID: rs.Cursor}
	} else if err := json.Unmarshal(data, &res); err != nil {
		return fail("result body %s: %v", data, err)
	}
	checkResult(t, "http "+m.Op, res)
	if want := resultStatus(res, ok); code != want {
		t.Errorf("http %s: %s answered %d, want %d", m.Op, res.Status, code, want)
	}
	return res, nil
}

func (h *httpTransport) Session(t testing.TB, sid, what string, cond func(protocol.SessionStatus) bool) protocol.SessionStatus {
	t.Helper()
	var st protocol.SessionStatus
	waitFor(t, 20*time.Second, what, func() bool {
		st = getSessionStatus(t, h.th, sid)
		return cond(st)
	})
	return st
}

// --- the HTTP entry points ----------------------------------------------

func TestControlsHTTP_CancelOneTerminal(t *testing.T)     { testCancelOneTerminal(t, newHTTP) }
func TestControlsHTTP_CancelConcurrent(t *testing.T)      { testCancelConcurrent(t, newHTTP) }
func TestControlsHTTP_CancelRepeat(t *testing.T)          { testCancelRepeat(t, newHTTP) }
func TestControlsHTTP_CancelDuringTool(t *testing.T)      { testCancelDuringTool(t, newHTTP) }
func TestControlsHTTP_CancelDuringReasoning(t *testing.T) { testCancelDuringReasoning(t, newHTTP) }
func TestControlsHTTP_CancelNotStarted(t *testing.T)      { testCancelNotStarted(t, newHTTP) }
func TestControlsHTTP_CancelDuringPrompt(t *testing.T)    { testCancelDuringPrompt(t, newHTTP) }
func TestControlsHTTP_ApprovalApprove(t *testing.T)       { testApprovalApprove(t, newHTTP) }
func TestControlsHTTP_ApprovalDeny(t *testing.T)          { testApprovalDeny(t, newHTTP) }
func TestControlsHTTP_ApprovalDuplicate(t *testing.T)     { testApprovalDuplicate(t, newHTTP) }
func TestControlsHTTP_PromptUnknownIDs(t *testing.T)      { testPromptUnknownIDs(t, newHTTP) }
func TestControlsHTTP_ClarifyAnswered(t *testing.T)       { testClarifyAnswered(t, newHTTP) }
func TestControlsHTTP_ClarifyExpiry(t *testing.T)         { testClarifyExpiry(t, newHTTP) }
func TestControlsHTTP_ClarifyRaceExpiry(t *testing.T)     { testClarifyRaceExpiry(t, newHTTP) }
func TestControlsHTTP_QueueOnActive(t *testing.T)         { testQueueOnActive(t, newHTTP) }
func TestControlsHTTP_QueueThreeInOrder(t *testing.T)     { testQueueThreeInOrder(t, newHTTP) }
func TestControlsHTTP_QueueOnIdle(t *testing.T)           { testQueueOnIdle(t, newHTTP) }
func TestControlsHTTP_QueueIdempotent(t *testing.T)       { testQueueIdempotent(t, newHTTP) }
func TestControlsHTTP_Steer(t *testing.T)                 { testSteer(t, newHTTP) }
func TestControlsHTTP_GoalTurns(t *testing.T)             { testGoalTurns(t, newHTTP) }
func TestControlsHTTP_GoalPauseResume(t *testing.T)       { testGoalPauseResume(t, newHTTP) }
func TestControlsHTTP_GoalClearStatus(t *testing.T)       { testGoalClearStatus(t, newHTTP) }
func TestControlsHTTP_GoalMaxContinuations(t *testing.T)  { testGoalMaxContinuations(t, newHTTP) }
func TestControlsHTTP_ControlsLists(t *testing.T)         { testControlsLists(t, newHTTP) }
func TestControlsHTTP_ReplayHistory(t *testing.T)         { testReplayHistory(t, newHTTP) }
func TestControlsHTTP_SafeResults(t *testing.T)           { testSafeResults(t, newHTTP) }
