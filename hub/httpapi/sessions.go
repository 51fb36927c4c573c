package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// Pages of GET /v1/sessions/{sid}/runs and of GET /v1/sessions.
const (
	defaultRunPage = 20
	maxRunPage     = 100
	// A page of GET /v1/sessions: 100 unless ?limit says, at most 1,000
	// (the sessions one watch may name).
	defaultSessionPage = 100
	maxSessionPage     = 1000
)

// listRuns answers GET /v1/sessions/{sid}/runs?before=<rid>&limit=N: the
// session's runs newest first, those before the run named by before (all
// of them without it), at most limit. Whoever may read the session may
// list its runs; anyone else gets not_found.
func (h *api) listRuns(c echo.Context) error {
	ctx := c.Request().Context()
	meta, err := h.core.ReadSession(ctx, h.core.Caller(c), c.Param("sid"))
	if err != nil {
		return h.core.PublicError(err)
	}
	limit, err := httpx.ParseUint(c, "limit", defaultRunPage)
	if err != nil {
		return err
	}
	if limit < 1 || limit > maxRunPage {
		return &protocol.Error{Code: protocol.CodeBadRequest, Field: "limit", Message: "limit: must be 1 to 100"}
	}
	end := len(meta.Runs)
	if before := c.QueryParam("before"); before != "" {
		end = slices.Index(meta.Runs, before)
		if end < 0 {
			return &protocol.Error{Code: protocol.CodeBadRequest, Field: "before", Message: "before: is not a run of this session"}
		}
	}
	out := protocol.RunList{Runs: []protocol.RunSummary{}}
	i := end - 1
	for ; i >= 0 && len(out.Runs) < int(limit); i-- {
		sum, err := h.runSummary(ctx, meta.ID, meta.Runs[i])
		if errors.Is(err, journal.ErrNotFound) {
			continue // trimmed since the session was read
		}
		if err != nil {
			return h.core.PublicError(err)
		}
		out.Runs = append(out.Runs, sum)
	}
	out.More = i >= 0
	return c.JSON(http.StatusOK, out)
}

// runSummary describes one run: from its meta and its terminal event when
// it has ended (one read), else from the fold of its events.
func (h *api) runSummary(ctx context.Context, sid, rid string) (protocol.RunSummary, error) {
	m, err := h.core.Journal().Run(ctx, rid)
	if err != nil {
		return protocol.RunSummary{}, err
	}
	sum := protocol.RunSummary{RunID: rid, SessionID: sid, CreatedAt: m.CreatedAt, LastSeq: m.LastSeq,
		Terminal: m.Terminal, EndedAt: m.TerminalAt}
	var req struct {
		Message string `json:"message"`
		Source  string `json:"source"`
	}
	if len(m.Request) > 0 && json.Unmarshal(m.Request, &req) == nil {
		sum.Message, sum.Source = protocol.Truncate(req.Message, protocol.RunSummaryMessageBytes), req.Source
	}
	if m.Terminal && m.LastSeq > 0 {
		page, err := h.core.Journal().Read(ctx, rid, m.LastSeq-1, 1)
		if err != nil {
			return sum, err
		}
		if len(page) == 1 {
			if s, ok := session.TerminalStatus(&page[0]); ok {
				sum.Status, sum.TerminalState = s, s
				return sum, nil
			}
		}
	}
	r, err := journal.FoldRun(ctx, h.core.Journal(), rid, sid)
	if err != nil {
		return sum, err
	}
	sum.Status, sum.TerminalState, sum.Terminal, sum.LastSeq = r.Status, r.TerminalState, r.Terminal, r.LastSeq
	return sum, nil
}

// maxTitleBytes bounds a session title given over HTTP.
const maxTitleBytes = 512

// renameSession answers PATCH /v1/sessions/{sid} {title}: the owner renames
// the session. The title is journaled in the session's record (every
// replica's watchers see it through the status feed), and no run renames
// the session afterwards.
func (h *api) renameSession(c echo.Context) error {
	var req protocol.RenameSessionRequest
	if err := httpx.Bind(c, &req); err != nil {
		return err
	}
	if req.Title == nil {
		return &protocol.Error{Code: protocol.CodeBadRequest, Field: "title", Message: "title: is required"}
	}
	title := strings.TrimSpace(*req.Title)
	switch {
	case title == "":
		return &protocol.Error{Code: protocol.CodeBadRequest, Field: "title", Message: "title: must not be blank"}
	case len(title) > maxTitleBytes:
		return &protocol.Error{Code: protocol.CodeTooLarge, Field: "title", Message: "title: is over 512 bytes"}
	}
	ctx := c.Request().Context()
	sid := c.Param("sid")
	if _, err := h.core.ReadSession(ctx, h.own(c), sid); err != nil {
		return h.core.PublicError(err)
	}
	meta, err := h.core.Journal().UpdateSession(ctx, sid, func(m *journal.SessionMeta) error {
		m.Title = title
		return nil
	})
	if err != nil {
		return h.core.PublicError(err)
	}
	st, err := journal.FoldSessionMeta(ctx, h.core.Journal(), meta)
	if err != nil {
		return h.core.PublicError(err)
	}
	return c.JSON(http.StatusOK, h.core.StatusOf(&st))
}

// deleteSession answers DELETE /v1/sessions/{sid}: the owner deletes the
// session with its runs. A session with an active run is refused (409
// conflict: stop the run first), atomically with the start of a run.
// Every watching tab gets a last status with deleted: true.
func (h *api) deleteSession(c echo.Context) error {
	ctx := c.Request().Context()
	sid := c.Param("sid")
	if _, err := h.core.ReadSession(ctx, h.own(c), sid); err != nil {
		return h.core.PublicError(err)
	}
	err := h.core.Journal().DeleteSession(ctx, sid)
	if errors.Is(err, journal.ErrConflict) {
		return protocol.Errorf(protocol.CodeConflict, "the session has an active run; stop it first")
	}
	if err != nil {
		return h.core.PublicError(err)
	}
	return c.JSON(http.StatusOK, protocol.DeleteSessionResult{SessionID: sid, Deleted: true})
}
