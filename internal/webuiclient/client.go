// Package webuiclient holds stand-ins of hermes-webui for tests: state
// directories as it writes them (statedir.go), and its runner client: the calls of its HttpRunnerClient (api/runner_client.py), the
// normalization of its RunnerRuntimeAdapter (api/runtime_adapter.py) and
// the relay loop of its /api/chat/stream route, read from its source
// (docs/hermes-webui.md names the version). Quirks kept on purpose: a
// non-2xx answer is an error carrying the status and up to 500 bytes of
// the body; a control answer without "ok" counts as accepted; the cursor
// of an answer without one is the last event's bare seq; and after an
// empty poll the relay asks for the run's status and, unless it ended,
// sleeps 5 s before polling again.
package webuiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client is one WebUI process's runner client. It holds no run state: a
// new Client is a restarted WebUI.
type Client struct {
	BaseURL string // HERMES_WEBUI_RUNNER_BASE_URL
	APIKey  string // HERMES_WEBUI_RUNNER_API_KEY

	// HeartbeatInterval is the relay's sleep after an empty poll (WebUI:
	// 5 s).
	HeartbeatInterval time.Duration

	http *http.Client

	mu     sync.Mutex
	sleeps int
}

// New returns a client of the runner at baseURL.
func New(baseURL, apiKey string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), APIKey: apiKey, HeartbeatInterval: 5 * time.Second,
		http: &http.Client{Timeout: 60 * time.Second, // urlopen(timeout=60)
			CheckRedirect: func(*http.Request, []*http.Request) error { return errors.New("redirect refused") }}}
}

// Sleeps counts the relay's sleeps after an empty poll.
func (c *Client) Sleeps() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sleeps
}

// Error is RunnerClientError.
type Error struct {
	Status int // the HTTP status (0: the request failed)
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// StartRunRequest is WebUI's StartRunRequest.
type StartRunRequest struct {
	SessionID   string
	Message     string
	Attachments []map[string]any
	Workspace   *string
	Profile     *string
	Provider    *string
	Model       *string
	Toolsets    []string
	Source      string // default "webui"
	Metadata    map[string]any
	// OwnerFence, when set, is sent as a newer WebUI sends it; the start
	// then fails unless the runner echoes it with the same session_id and
	// generation.
	OwnerFence map[string]any
	// ReasoningEffort, when set, is sent (some builds add it).
	ReasoningEffort *string
}

// RunStartResult is what RunnerRuntimeAdapter.start_run keeps.
type RunStartResult struct {
	RunID, SessionID, StreamID, Status string
	StartedAt                          any
	Cursor                             any
	ActiveControls                     []any
	Payload                            map[string]any
}

// StartRun is start_run: POST /v1/runs.
func (c *Client) StartRun(ctx context.Context, r StartRunRequest) (RunStartResult, error) {
	if r.Source == "" {
		r.Source = "webui"
	}
	body := map[string]any{
		"session_id": r.SessionID, "message": r.Message, "attachments": list(r.Attachments),
		"workspace": r.Workspace, "profile": r.Profile, "provider": r.Provider, "model": r.Model,
		"toolsets": strs(r.Toolsets), "source": r.Source, "metadata": dict(r.Metadata),
	}
	if r.ReasoningEffort != nil {
		body["reasoning_effort"] = *r.ReasoningEffort
	}
	if r.OwnerFence != nil {
		body["owner_fence"] = r.OwnerFence
	}
	p, err := c.post(ctx, "/v1/runs", body)
	if err != nil {
		return RunStartResult{}, err
	}
	if r.OwnerFence != nil {
		acc, _ := p["owner_fence"].(map[string]any)
		if acc == nil || text(acc["session_id"]) != text(r.OwnerFence["session_id"]) || text(acc["generation"]) != text(r.OwnerFence["generation"]) {
			return RunStartResult{}, &Error{Msg: "runner did not compare-and-accept the owner fence; run not started"}
		}
	}
	runID := or(text(p["run_id"]), text(p["stream_id"]))
	res := RunStartResult{RunID: runID, StreamID: or(text(p["stream_id"]), runID),
		SessionID: or(text(p["session_id"]), r.SessionID), Status: or(text(p["status"]), "started"),
		StartedAt: p["started_at"], Cursor: p["cursor"], Payload: p}
	if ac, ok := p["active_controls"].([]any); ok {
		res.ActiveControls = ac
	}
	return res, nil
}

// RunEventStream is what RunnerRuntimeAdapter.observe_run keeps.
type RunEventStream struct {
	RunID       string
	Events      []map[string]any
	Cursor      *string
	LastEventID any
}

// ObserveRun is observe_run: GET /v1/runs/{id}/events[?cursor=].
func (c *Client) ObserveRun(ctx context.Context, runID string, cursor *string) (RunEventStream, error) {
	q := ""
	if cursor != nil && *cursor != "" {
		q = "?cursor=" + url.QueryEscape(*cursor)
	}
	p, err := c.get(ctx, "/v1/runs/"+url.PathEscape(runID)+"/events"+q)
	if err != nil {
		return RunEventStream{}, err
	}
	var events []map[string]any
	if raw, ok := p["events"].([]any); ok {
		for _, e := range raw {
			m, _ := e.(map[string]any)
			events = append(events, m) // a non-object entry stays (the relay skips it)
		}
	}
	out := RunEventStream{RunID: or(text(p["run_id"]), runID), Events: events, Cursor: cursor}
	out.LastEventID = p["last_event_id"]
	if falsy(out.LastEventID) && len(events) > 0 && events[len(events)-1] != nil {
		out.LastEventID = events[len(events)-1]["event_id"]
	}
	next, has := p["cursor"]
	if (!has || next == nil) && len(events) > 0 {
		s := ""
		if last := events[len(events)-1]; last != nil && !falsy(last["seq"]) {
			s = text(last["seq"])
		}
		next, has = s, true
	}
	if has && next != nil {
		s := text(next)
		out.Cursor = &s
	}
	return out, nil
}

// RunStatus is what RunnerRuntimeAdapter.get_run keeps.
type RunStatus struct {
	RunID, SessionID, Status string
	LastEventID              any
	TerminalState            any
	ActiveControls           []any
	PendingApprovalID        any
	PendingClarifyID         any
}

// GetRun is get_run: GET /v1/runs/{id}.
func (c *Client) GetRun(ctx context.Context, runID string) (RunStatus, error) {
	p, err := c.get(ctx, "/v1/runs/"+url.PathEscape(runID))
	if err != nil {
		return RunStatus{}, err
	}
	st := RunStatus{RunID: or(text(p["run_id"]), runID), SessionID: text(p["session_id"]), Status: or(text(p["status"]), "unknown"),
		LastEventID: p["last_event_id"], TerminalState: p["terminal_state"],
		PendingApprovalID: p["pending_approval_id"], PendingClarifyID: p["pending_clarify_id"]}
	if ac, ok := p["active_controls"].([]any); ok {
		st.ActiveControls = ac
	}
	return st, nil
}

// ControlResult is WebUI's ControlResult, as _active_control_result makes
// it from a runner's answer.
type ControlResult struct {
	Accepted    bool
	Status      string
	SafeMessage any
	Payload     map[string]any
}

func controlResult(p map[string]any) ControlResult {
	accepted := true
	if v, ok := p["ok"]; ok {
		accepted = truthy(v)
	}
	status := or(text(p["status"]), text(p["action"]))
	if status == "" {
		status = "not-active"
		if accepted {
			status = "accepted"
		}
	}
	r := ControlResult{Accepted: accepted, Status: status, Payload: p}
	if !accepted {
		r.SafeMessage = p["message"]
	}
	return r
}

// CancelRun is cancel_run: POST /v1/runs/{id}/cancel {}.
func (c *Client) CancelRun(ctx context.Context, runID string) (ControlResult, error) {
	return c.control(ctx, "/v1/runs/"+url.PathEscape(runID)+"/cancel", map[string]any{})
}

// RespondApproval is respond_approval.
func (c *Client) RespondApproval(ctx context.Context, runID, approvalID, choice string) (ControlResult, error) {
	return c.control(ctx, "/v1/runs/"+url.PathEscape(runID)+"/approval", map[string]any{"choice": choice, "approval_id": approvalID})
}

// RespondClarify is respond_clarify.
func (c *Client) RespondClarify(ctx context.Context, runID, clarifyID, response string) (ControlResult, error) {
	return c.control(ctx, "/v1/runs/"+url.PathEscape(runID)+"/clarifications/"+url.PathEscape(clarifyID)+"/respond",
		map[string]any{"response": response})
}

// QueueMessage is queue_message (mode "queue" by default).
func (c *Client) QueueMessage(ctx context.Context, runID, message, mode string) (ControlResult, error) {
	if mode == "" {
		mode = "queue"
	}
	return c.control(ctx, "/v1/runs/"+url.PathEscape(runID)+"/messages", map[string]any{"message": message, "mode": mode})
}

// UpdateGoal is update_goal.
func (c *Client) UpdateGoal(ctx context.Context, sessionID, action, text string) (ControlResult, error) {
	return c.control(ctx, "/v1/sessions/"+url.PathEscape(sessionID)+"/goal", map[string]any{"action": action, "text": text})
}

func (c *Client) control(ctx context.Context, path string, body map[string]any) (ControlResult, error) {
	p, err := c.post(ctx, path, body)
	if err != nil {
		return ControlResult{}, err
	}
	return controlResult(p), nil
}

// Frame is one SSE frame the relay writes to the browser.
type Frame struct {
	Event string
	Data  any
	ID    string // "" : written without an id line
}

// Relay is the /api/chat/stream loop of a runner-owned run: poll, write
// each event as a frame, stop after stream_end, error, cancel or apperror,
// or when an empty poll finds the run ended (a synthetic stream_end). It
// returns when the loop ends or ctx ends (a browser that left).
func (c *Client) Relay(ctx context.Context, runID string, cursor *string, write func(Frame)) error {
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		es, err := c.ObserveRun(ctx, runID, cursor)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			write(Frame{Event: "error", Data: map[string]any{"error": err.Error()}})
			return err
		}
		emitted, terminal := false, false
		for _, e := range es.Events {
			if e == nil {
				continue
			}
			name := or(text(e["event"]), text(e["type"]))
			if name == "" {
				name = "message"
			}
			var data any = e
			if v, ok := e["payload"]; ok {
				data = v
			} else if v, ok := e["data"]; ok {
				data = v
			}
			write(Frame{Event: name, Data: data, ID: eventID(runID, e)})
			emitted = true
			switch name {
			case "stream_end", "error", "cancel", "apperror":
				terminal = true
			}
		}
		if es.Cursor != nil && *es.Cursor != "" {
			cursor = es.Cursor
		}
		if terminal {
			return nil
		}
		if !emitted {
			st, err := c.GetRun(ctx, runID)
			state := ""
			if err == nil {
				state = strings.ToLower(or(text(st.TerminalState), st.Status))
			}
			switch state {
			case "completed", "complete", "failed", "error", "cancelled", "canceled":
				write(Frame{Event: "stream_end", Data: map[string]any{"run_id": runID, "status": state}})
				return nil
			}
			c.mu.Lock()
			c.sleeps++
			c.mu.Unlock()
			select {
			case <-time.After(c.HeartbeatInterval):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

func eventID(runID string, e map[string]any) string {
	if id := or(text(e["event_id"]), text(e["id"])); id != "" {
		return id
	}
	if !falsy(e["seq"]) {
		return runID + ":" + text(e["seq"])
	}
	return ""
}

func (c *Client) headers(r *http.Request) {
	r.Header.Set("Accept", "application/json")
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("User-Agent", "Hermes-WebUI-RunnerClient")
	if c.APIKey != "" {
		r.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
}

func (c *Client) get(ctx context.Context, path string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return nil, err
	}
	return c.do(req)
}

func (c *Client) post(ctx context.Context, path string, body map[string]any) (map[string]any, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+path, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return c.do(req)
}

// Post sends body to path as the client's POSTs are sent (for tests of
// bodies the client itself never makes).
func (c *Client) Post(ctx context.Context, path string, body []byte) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	return c.do(req)
}

func (c *Client) do(req *http.Request) (map[string]any, error) {
	c.headers(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &Error{Msg: "Runner request failed: " + err.Error()}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		detail, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		if len(detail) > 500 {
			detail = detail[:500]
		}
		return nil, &Error{Status: resp.StatusCode, Msg: fmt.Sprintf("Runner returned HTTP %d: %s", resp.StatusCode, detail)}
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, &Error{Msg: "Runner request failed: " + err.Error()}
	}
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, &Error{Msg: "Runner returned invalid JSON"}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Msg: "Runner returned a non-object JSON payload"}
	}
	return m, nil
}

// text is Python's str(v or "") for the JSON values the client meets.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		if x {
			return "True"
		}
		return ""
	case float64:
		if x == 0 {
			return ""
		}
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func falsy(v any) bool { return !truthy(v) }

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func list(v []map[string]any) []map[string]any {
	if v == nil {
		return []map[string]any{}
	}
	return v
}

func strs(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func dict(v map[string]any) map[string]any {
	if v == nil {
		return map[string]any{}
	}
	return v
}
