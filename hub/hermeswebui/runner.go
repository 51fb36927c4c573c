package hermeswebui

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// hermes-webui's runner API (docs/hermes-webui.md): the calls its
// RunnerRuntimeAdapter makes when HERMES_WEBUI_RUNTIME_ADAPTER=runner-local,
// under a base path, answered in its own event dialect (hub/hermeswebui).
// Every start and control goes through Hub.Control, the hub's single
// authorizing entry point; reads check ownership like the rest of the API.

// RunnerOptions configures the runner API's edge (Runner).
type RunnerOptions struct {
	// Base is the path the API is mounted under (HERMES_WEBUI_RUNNER_BASE_URL
	// is the hub's URL plus Base), e.g. "/compat/hermes-webui".
	Base string
	// Keys maps a static runner key (HERMES_WEBUI_RUNNER_API_KEY) to the
	// subject it acts as. A bearer token that is no such key is checked as
	// any API token (a runhub JWT; open mode: subject local).
	Keys map[string]string
	// Profiles are the runhub profiles a start may name. WebUI's profile
	// "default" means runhub's default profile unless one is named so.
	Profiles []profile.Info
	// PollHold is how long an events poll with nothing new waits for the
	// next event (default 20 s): WebUI's relay sleeps 5 s after an empty
	// poll, so an answer held until the next event keeps its browser live.
	PollHold time.Duration
}

// webui serves the runner API over one core.
type webui struct {
	core     hub.API
	log      *slog.Logger
	caps     adapter.Capabilities
	keys     []webuiKey
	profiles map[string]bool
	hold     time.Duration
}

type webuiKey struct {
	sum     [sha256.Size]byte
	subject string
}

// errors renders an error as WebUI's clients read one: {"error": message}
// (plus runhub's code and field) with the status of its code.
func (w *webui) errors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if err == nil || c.Response().Committed {
			return err
		}
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			var he *echo.HTTPError
			if errors.As(err, &he) {
				return err // routing: the hub's error handler
			}
			pe = protocol.Errorf(protocol.CodeInternal, "internal error")
		}
		body := map[string]any{"error": pe.Message, "code": pe.Code}
		if pe.Field != "" {
			body["field"] = pe.Field
		}
		status := httpx.HTTPStatus(pe.Code)
		if status == http.StatusServiceUnavailable {
			c.Response().Header().Set("Retry-After", httpx.RetryAfter)
		}
		return c.JSON(status, body)
	}
}

// auth admits a static runner key as its subject, else any API token.
func (w *webui) auth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		token, _ := httpx.Bearer(c.Request())
		if token != "" && len(w.keys) > 0 {
			sum := sha256.Sum256([]byte(token))
			subject := ""
			for _, k := range w.keys {
				if subtle.ConstantTimeCompare(sum[:], k.sum[:]) == 1 {
					subject = k.subject
				}
			}
			if subject != "" {
				hub.SetCaller(c, hub.Principal{Subject: subject})
				return next(c)
			}
		}
		return w.core.RequireAuth(next)(c)
	}
}

// webuiStart is the body of POST /v1/runs. Unknown fields (owner_fence
// aside, reasoning_effort, …) are ignored.
type webuiStart struct {
	SessionID   *string           `json:"session_id"`
	Message     *string           `json:"message"`
	Attachments []json.RawMessage `json:"attachments"`
	Workspace   *string           `json:"workspace"`
	Profile     *string           `json:"profile"`
	Provider    *string           `json:"provider"`
	Model       *string           `json:"model"`
	Toolsets    []string          `json:"toolsets"`
	Source      *string           `json:"source"`
	Metadata    json.RawMessage   `json:"metadata"`
	OwnerFence  json.RawMessage   `json:"owner_fence"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// start answers POST /v1/runs: the WebUI session becomes a runhub session
// of the caller on first use, and a run starts in it. A refusal is logged:
// WebUI shows its browser only a bare 500.
func (w *webui) start(c echo.Context) (err error) {
	ctx := c.Request().Context()
	subject := w.core.Caller(c).Subject
	defer func() {
		if err != nil {
			w.log.Warn("hermes-webui start refused", "subject", subject, "code", protocol.CodeOf(err), "err", httpx.SafeMessage(err))
		}
	}()
	var req webuiStart
	if err := httpx.Bind(c, &req); err != nil {
		return err
	}
	sid := str(req.SessionID)
	switch {
	case sid == "":
		return &protocol.Error{Code: protocol.CodeBadRequest, Field: "session_id", Message: "session_id: is required"}
	case str(req.Message) == "":
		return &protocol.Error{Code: protocol.CodeBadRequest, Field: "message", Message: "message: is required"}
	}
	if err := protocol.ValidID(sid); err != nil {
		return &protocol.Error{Code: protocol.CodeOf(err), Field: "session_id", Message: "session_id: " + httpx.SafeMessage(err)}
	}
	prof := str(req.Profile)
	if prof != "" && !w.profiles[prof] {
		if prof != "default" {
			return &protocol.Error{Code: protocol.CodeNotFound, Field: "profile", Message: "profile: unknown profile " + strconv.Quote(protocol.Truncate(prof, 64))}
		}
		prof = "" // WebUI's default profile: runhub's default
	}
	// WebUI sends its default workspace with every start: a profile whose
	// driver takes none runs without it (not refused), and the workspace
	// stays in the run's request, metadata.hermes_webui.workspace.
	ws, kept := str(req.Workspace), ""
	if ws != "" && w.caps.Resolve(prof, "").Lacks(protocol.CapWorkspace) {
		ws, kept = "", ws
	}
	md, err := webuiMetadata(req.Metadata, str(req.Provider), str(req.Source), kept)
	if err != nil {
		return err
	}
	// WebUI's provider is the model's (openai, anthropic, …), not a runhub
	// runtime driver: the profile picks the driver, the provider travels
	// in the metadata.
	m := protocol.Control{Type: protocol.MsgControl, ID: "hermes-webui", Op: protocol.OpStart, SessionID: sid,
		Message: str(req.Message), Attachments: attachments(req.Attachments), Workspace: str(req.Workspace),
		Profile: prof, Model: str(req.Model), Toolsets: req.Toolsets, Metadata: md}
	if err := protocol.ValidateControl(&m); err != nil { // the workspace's bounds hold, kept or not
		return err
	}
	m.Workspace = ws
	// Refused before the WebUI session is made: a profile whose driver
	// takes no attachments (the executor answers the same, later).
	if len(m.Attachments) > 0 {
		if caps := w.caps.Resolve(prof, ""); caps.Lacks(protocol.CapAttachments) {
			res := caps.Unsupported(protocol.CapAttachments, "", sid)
			return &protocol.Error{Code: protocol.CodeUnsupported, Field: "attachments", Message: res.Message}
		}
	}
	meta, created, err := w.session(ctx, subject, sid)
	if err != nil {
		return err
	}
	res, err := w.core.Control(ctx, subject, &m, "")
	if created && (err != nil || !res.Accepted) {
		w.core.DiscardSession(ctx, sid) // a refused start leaves no session behind
	}
	if err != nil {
		return err
	}
	if !res.Accepted {
		if res.Status == protocol.ResultConflict {
			if cur, err := w.core.Journal().Session(ctx, sid); err == nil {
				meta = cur
			}
			w.log.Warn("hermes-webui start refused", "subject", subject, "session_id", sid, "status", res.Status, "active_run", meta.ActiveRun)
			return c.JSON(http.StatusConflict, map[string]any{"error": "session already has an active stream",
				"active_stream_id": meta.ActiveRun, "code": protocol.CodeConflict})
		}
		if res.Status == protocol.ResultUnsupported {
			return &protocol.Error{Code: protocol.CodeUnsupported, Message: res.Message}
		}
		return protocol.Errorf(protocol.CodeNotActive, "%s", res.Message)
	}
	now := protocol.Timestamp(time.Now())
	out := map[string]any{"run_id": res.RunID, "stream_id": res.RunID, "session_id": sid, "status": "started",
		"started_at": now, "pending_started_at": now, "turn_id": res.RunID, "cursor": protocol.EventID(res.RunID, 0),
		"active_controls": startControls(w.caps, prof), "title": meta.Title}
	if fence := acceptFence(req.OwnerFence); fence != nil {
		out["owner_fence"] = fence
	}
	return c.JSON(http.StatusOK, out)
}

// webuiMetadata is a start's metadata: WebUI's, with its model provider,
// source and a workspace the driver does not take under hermes_webui.
func webuiMetadata(raw json.RawMessage, provider, source, workspace string) (json.RawMessage, error) {
	md := map[string]json.RawMessage{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &md); err != nil || md == nil {
			return nil, &protocol.Error{Code: protocol.CodeBadRequest, Field: "metadata", Message: "metadata: must be an object"}
		}
	}
	if provider == "" && source == "" && workspace == "" {
		return raw, nil
	}
	extra, _ := json.Marshal(struct {
		Provider  string `json:"provider"`
		Source    string `json:"source"`
		Workspace string `json:"workspace,omitempty"`
	}{provider, source, workspace})
	md["hermes_webui"] = extra
	return json.Marshal(md)
}

// acceptFence echoes a newer WebUI's owner fence marked accepted: runhub
// serializes a session's runs itself (one active run per session,
// decided atomically in the journal), so the claim it names holds.
func acceptFence(raw json.RawMessage) map[string]any {
	var f map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &f) != nil || f == nil {
		return nil
	}
	f["accepted"] = true
	return f
}

// session loads the WebUI session sid of subject, creating it on first use
// under the same id (created). A session of another subject reads as
// unknown.
func (w *webui) session(ctx context.Context, subject, sid string) (journal.SessionMeta, bool, error) {
	meta, created, err := w.core.OpenSession(ctx, subject, sid)
	if err != nil {
		return meta, false, err
	}
	if meta.Owner != subject {
		return meta, false, hub.ErrUnknown
	}
	return meta, created, nil
}

// parseWebUICursor reads an events cursor: "" (from the start), a bare seq
// (what WebUI sends on re-attach) or "run:seq" of this run.
func parseWebUICursor(s, rid string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	if !strings.Contains(s, ":") {
		seq, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, &protocol.Error{Code: protocol.CodeBadCursor, Field: "cursor", Message: "cursor: want a seq or run_id:seq"}
		}
		return seq, nil
	}
	cur, err := protocol.ParseCursor(s)
	if err != nil {
		return 0, err
	}
	if cur.RunID != rid {
		return 0, &protocol.Error{Code: protocol.CodeBadCursor, Field: "cursor", Message: "cursor: is not of run " + protocol.Truncate(rid, 80)}
	}
	return cur.Seq, nil
}

// webuiPage bounds the journal events one poll reads.
const webuiPage = 256

// events answers GET /v1/runs/{id}/events?cursor=: the run's events after
// the cursor in WebUI's dialect. With nothing new on a live run it waits
// for the next event (or the hold, or the client leaving); events WebUI
// has no name for advance the cursor without ending the wait.
func (w *webui) events(c echo.Context) error {
	ctx := c.Request().Context()
	rid := c.Param("rid")
	meta, err := w.core.ReadRun(ctx, w.core.Caller(c), rid)
	if err != nil {
		return w.core.PublicError(err)
	}
	after, err := parseWebUICursor(c.QueryParam("cursor"), rid)
	if err != nil {
		return err
	}
	wake := make(chan struct{}, 1)
	unsubscribe := w.core.Journal().SubscribeRun(rid, func(protocol.Envelope) {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	defer unsubscribe()
	hold := time.NewTimer(w.hold)
	defer hold.Stop()
	m := &Mapper{Session: func(sid string) any { return w.transcript(ctx, sid) }}
	primed := after == 0
	out := []Event{}
	terminal := meta.Terminal && meta.LastSeq <= after
	lastID := ""
	for !terminal {
		page, err := w.core.Journal().Read(ctx, rid, after, webuiPage)
		if err != nil {
			return w.core.PublicError(err)
		}
		for i := range page {
			e := &page[i]
			if !primed && m.NeedsHistory(e) {
				if err := w.prime(ctx, m, rid, after); err != nil {
					return w.core.PublicError(err)
				}
				primed = true
			}
			out = append(out, m.Map(e)...)
			after, lastID = e.Seq, e.EventID
			terminal = terminal || e.Terminal
		}
		if len(out) > 0 || terminal {
			break
		}
		if len(page) == webuiPage {
			continue // only events WebUI has no name for: read on
		}
		if len(page) == 0 {
			cur, err := w.core.Journal().Run(ctx, rid)
			if err != nil {
				return w.core.PublicError(err)
			}
			if cur.Terminal && cur.LastSeq <= after {
				break
			}
		}
		select {
		case <-wake:
			continue
		case <-hold.C:
		case <-ctx.Done():
		case <-w.core.Context().Done():
		}
		break
	}
	if lastID == "" && after > 0 {
		lastID = protocol.EventID(rid, after)
	}
	for i := len(out) - 1; i >= 0; i-- {
		if out[i].EventID != "" {
			lastID = out[i].EventID
			break
		}
	}
	body := map[string]any{"run_id": rid, "events": out, "cursor": protocol.EventID(rid, after), "terminal": terminal}
	if lastID != "" {
		body["last_event_id"] = lastID
	}
	return c.JSON(http.StatusOK, body)
}

// errPrimed stops a priming read.
var errPrimed = errors.New("primed")

// prime feeds m the run's events up to seq upto (a poll that starts
// mid-run and meets a tool's end whose start came before the cursor).
func (w *webui) prime(ctx context.Context, m *Mapper, rid string, upto uint64) error {
	err := journal.ReadAll(ctx, w.core.Journal(), rid, 0, func(e protocol.Envelope) error {
		if e.Seq > upto {
			return errPrimed
		}
		m.Note(&e)
		return nil
	})
	if errors.Is(err, errPrimed) {
		return nil
	}
	return err
}

// run answers GET /v1/runs/{id}: the status RunnerRuntimeAdapter.get_run
// reads. terminal_state uses the words WebUI's relay ends on (completed,
// failed, cancelled).
func (w *webui) run(c echo.Context) error {
	ctx := c.Request().Context()
	rid := c.Param("rid")
	meta, err := w.core.ReadRun(ctx, w.core.Caller(c), rid)
	if err != nil {
		return w.core.PublicError(err)
	}
	r, err := journal.FoldRun(ctx, w.core.Journal(), rid, meta.SessionID)
	if err != nil {
		return w.core.PublicError(err)
	}
	st := adapter.OfferedRunStatus(&r, w.caps)
	body := map[string]any{"run_id": rid, "session_id": meta.SessionID, "status": string(st.Status),
		"terminal_state": nil, "last_event_id": nil, "active_controls": nonNilStrings(st.ActiveControls),
		"pending_approval_id": nil, "pending_clarify_id": nil, "terminal": st.Terminal}
	if st.Terminal {
		ts := "failed"
		switch st.Status {
		case protocol.StatusCompleted:
			ts = "completed"
		case protocol.StatusCancelled:
			ts = "cancelled"
		}
		body["terminal_state"] = ts
	}
	if st.LastEventID != "" {
		body["last_event_id"] = st.LastEventID
	}
	if st.PendingApprovalID != "" {
		body["pending_approval_id"] = st.PendingApprovalID
	}
	if st.PendingClarifyID != "" {
		body["pending_clarify_id"] = st.PendingClarifyID
	}
	return c.JSON(http.StatusOK, body)
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// maxTranscriptRuns bounds the runs done's session transcript carries (the
// newest ones).
const maxTranscriptRuns = 200

// transcript is done's payload.session: the session's conversation as
// WebUI's browser renders it on done ({session_id, title, messages,
// tool_calls, message_count}), a user and an assistant message per run.
func (w *webui) transcript(ctx context.Context, sid string) any {
	out := map[string]any{"session_id": sid}
	meta, err := w.core.Journal().Session(ctx, sid)
	if err != nil {
		return out
	}
	out["title"] = meta.Title
	runs := meta.Runs
	if len(runs) > maxTranscriptRuns {
		runs = runs[len(runs)-maxTranscriptRuns:]
	}
	msgs := []map[string]any{}
	for _, rid := range runs {
		t, err := ReadTurn(ctx, w.core.Journal(), rid)
		if err != nil {
			continue
		}
		msgs = append(msgs, t.Messages()...)
	}
	out["messages"], out["tool_calls"], out["message_count"] = msgs, []any{}, len(msgs)
	return out
}
