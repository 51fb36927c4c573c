package hub

import (
	"context"

	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// StatusOf is s's status as a tab sees it: active_controls offer only
// what the driver of its latest run can do (its run.started profile, else
// provider), or before any run what a start's default can do. The
// runtime answers any other control unsupported.
func (h *Hub) StatusOf(s *session.Session) protocol.SessionStatus {
	st := s.Status()
	if caps, ok := h.capsOf(s); ok {
		st.ActiveControls = protocol.OfferedControls(st.ActiveControls, caps)
	}
	if st.Status == protocol.StatusQueued && !st.Terminal {
		st.Waiting, _ = h.waiting(h.ctx)
	}
	return st
}

// waiting is the Waiting of a run queued now (WaitingRunner when no runner
// process has been alive lately, else "") and the message that says what
// to do.
func (h *Hub) waiting(ctx context.Context) (string, string) {
	if h.cfg.NoRunner == nil {
		return "", ""
	}
	if none, msg := h.cfg.NoRunner(ctx); none {
		return protocol.WaitingRunner, msg
	}
	return "", ""
}

// capsOf is what StatusOf narrows s's controls by: the capabilities of
// its latest run's driver, else a start's default; false: none to go by.
func (h *Hub) capsOf(s *session.Session) ([]string, bool) {
	if h.cfg.Capabilities == nil {
		return nil, false
	}
	profile, provider := "", ""
	if r := s.Latest; r != nil {
		profile, provider = r.Profile, r.Provider
	}
	return h.cfg.Capabilities(profile, provider)
}
