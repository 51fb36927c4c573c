package hub

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// Pages of GET /v1/sessions/{sid}/runs.
const (
	defaultRunPage = 20
	maxRunPage     = 100
)

// listRuns answers GET /v1/sessions/{sid}/runs?before=<rid>&limit=N: the
// session's runs newest first, those before the run named by before (all
// of them without it), at most limit. Whoever may read the session may
// list its runs; anyone else gets not_found.
func (h *Hub) listRuns(c echo.Context) error {
	ctx := c.Request().Context()
	meta, err := h.readSession(ctx, h.principal(c), c.Param("sid"))
	if err != nil {
		return h.publicError(err)
	}
	limit, err := parseUint(c, "limit", defaultRunPage)
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
			return h.publicError(err)
		}
		out.Runs = append(out.Runs, sum)
	}
	out.More = i >= 0
	return c.JSON(http.StatusOK, out)
}

// runSummary describes one run: from its meta and its terminal event when
// it has ended (one read), else from the fold of its events.
func (h *Hub) runSummary(ctx context.Context, sid, rid string) (protocol.RunSummary, error) {
	m, err := h.store.Run(ctx, rid)
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
		page, err := h.store.Read(ctx, rid, m.LastSeq-1, 1)
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
	r, err := journal.FoldRun(ctx, h.store, rid, sid)
	if err != nil {
		return sum, err
	}
	sum.Status, sum.TerminalState, sum.Terminal, sum.LastSeq = r.Status, r.TerminalState, r.Terminal, r.LastSeq
	return sum, nil
}
