package hub

import (
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// StatusOf is s's status as a tab sees it: active_controls offer only
// what the driver of its latest run can do (its run.started profile, else
// provider), or before any run what a start's default can do. The
// runtime answers any other control unsupported.
func (h *Hub) StatusOf(s *session.Session) protocol.SessionStatus {
	st := s.Status()
	if h.cfg.Capabilities == nil {
		return st
	}
	profile, provider := "", ""
	if r := s.Latest; r != nil {
		profile, provider = r.Profile, r.Provider
	}
	if caps, ok := h.cfg.Capabilities(profile, provider); ok {
		st.ActiveControls = protocol.OfferedControls(st.ActiveControls, caps)
	}
	return st
}
