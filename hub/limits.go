package hub

import (
	"context"
	"encoding/json"
	"time"

	"github.com/runhub/runhub/protocol"
)

// refusedControl is the op and id of a control message, read from its
// first level only ("" id: not a control, or no id a control_result could
// name, as DecodeClient would refuse it).
func refusedControl(line []byte) (op, id string) {
	var head struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Op   string `json:"op"`
	}
	if len(line) == 0 || json.Unmarshal(line, &head) != nil || head.Type != protocol.MsgControl || len(head.ID) > protocol.MaxShortBytes {
		return "", ""
	}
	return head.Op, head.ID
}

// claimSocket counts welcomed socket id of subject, refusing one past
// MaxSocketsPerSubject on this hub or, with a SocketCounter, over all hubs.
func (h *Hub) claimSocket(subject, id string) bool {
	n := h.cfg.MaxSocketsPerSubject
	h.mu.Lock()
	if n > 0 && h.sockets[subject] >= n {
		h.mu.Unlock()
		return false
	}
	h.sockets[subject]++
	h.mu.Unlock()
	if sc := h.cfg.SocketCounter; sc != nil && n > 0 {
		ctx, cancel := context.WithTimeout(h.ctx, 2*time.Second)
		ok, err := sc.Claim(ctx, subject, id, n)
		cancel()
		switch {
		case err != nil:
			h.log.Warn("socket count across hubs failed; admitting under this hub's count", "err", err)
		case !ok:
			h.releaseSocket(subject, "")
			return false
		}
	}
	return true
}

// releaseSocket uncounts socket id of subject ("": only on this hub).
func (h *Hub) releaseSocket(subject, id string) {
	h.mu.Lock()
	if h.sockets[subject] <= 1 {
		delete(h.sockets, subject)
	} else {
		h.sockets[subject]--
	}
	h.mu.Unlock()
	if sc := h.cfg.SocketCounter; sc != nil && id != "" && h.cfg.MaxSocketsPerSubject > 0 {
		sc.Release(subject, id)
	}
}

// errTooManyRuns answers a start past MaxRunsPerSubject.
var errTooManyRuns = protocol.Errorf(protocol.CodeLimitExceeded, "too many active runs for this subject; wait for one to end or cancel one")

// runGate checks MaxRunsPerSubject before something that may start a run
// on session sid ("" = a new session) and holds the subject's start lock
// until release is called, so this hub's concurrent starts of one subject
// cannot overshoot. A session that already has an active run is not
// checked: its start is a conflict, its queue and goal controls start
// nothing now.
func (h *Hub) runGate(ctx context.Context, subject, sid string) (release func(), err error) {
	limit := h.cfg.MaxRunsPerSubject
	if limit <= 0 {
		return func() {}, nil
	}
	unlock := h.starts.Lock(subject)
	metas, err := h.store.Sessions(ctx, subject)
	if err != nil {
		unlock()
		return nil, h.PublicError(err)
	}
	active := 0
	for _, m := range metas {
		if m.ActiveRun == "" {
			continue
		}
		if m.ID == sid {
			return unlock, nil
		}
		active++
	}
	if active >= limit {
		unlock()
		return nil, errTooManyRuns
	}
	return unlock, nil
}
