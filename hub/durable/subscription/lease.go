package subscription

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

func (m *Manager) claim(w http.ResponseWriter, r *http.Request, id string, p Caller) *Error {
	var body struct {
		Worker json.RawMessage `json:"worker"`
	}
	if e := readJSON(r, &body); e != nil {
		return e
	}
	var worker string
	if json.Unmarshal(body.Worker, &worker) != nil || worker == "" || len(worker) > 256 {
		return invalid("worker must be a non-empty string (at most 256 bytes)")
	}
	ctx := r.Context()
	if _, e := m.visible(ctx, id, p, true); e != nil {
		return e
	}
	k, err := m.keyring(ctx)
	if err != nil {
		return internal(err)
	}
	var tok string
	s, tails, err := m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) {
		if s.Config.Type != TypePullWake {
			return false, invalid("Subscription is not pull-wake")
		}
		now := m.now()
		s.sync(tails)
		s.lapse(now)
		if s.Holder != "" {
			return false, &Error{Status: http.StatusConflict, Code: CodeAlreadyClaimed, Message: "Subscription is claimed by another worker",
				CurrentHolder: s.Holder, Generation: s.Gen}
		}
		if s.WakeID == "" && s.pending(tails) == "" {
			return false, errf(http.StatusConflict, CodeNoPendingWork, "Subscription has no pending work")
		}
		s.wake(tails, k, now)
		s.Holder = worker
		tok, s.JTI = k.mint(s.ID, s.Gen, now)
		s.LeaseUntil = now.UnixMilli() + s.Config.LeaseTTLms
		return true, nil
	})
	if err != nil {
		return internal(err)
	}
	writeJSON(w, http.StatusOK, struct {
		WakeID     string       `json:"wake_id"`
		Generation uint64       `json:"generation"`
		Token      string       `json:"token"`
		Streams    []streamInfo `json:"streams"`
		LeaseTTLms int64        `json:"lease_ttl_ms"`
	}{s.WakeID, s.Gen, tok, s.infos(tails), s.Config.LeaseTTLms})
	return nil
}

// token answers a token-authenticated request: a webhook's callback, a
// pull-wake's ack or release.
func (m *Manager) token(w http.ResponseWriter, r *http.Request, id, action string) *Error {
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || bearer == "" {
		return errf(http.StatusUnauthorized, CodeTokenInvalid, "Missing or malformed Authorization header")
	}
	var req ackReq
	if e := readJSON(r, &req); e != nil {
		return e
	}
	ctx := r.Context()
	k, err := m.keyring(ctx)
	if err != nil {
		return internal(err)
	}
	t, e := k.verify(bearer, id, m.now())
	if e != nil {
		return e
	}
	next := false
	_, _, err = m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) {
		next = false
		if action != "callback" && s.Config.Type != TypePullWake {
			return false, invalid("Subscription is not pull-wake")
		}
		now := m.now()
		s.sync(tails)
		s.lapse(now) // a lease that ran out fences its holder
		if e := s.fence(t, &req); e != nil {
			return false, e
		}
		if action == "release" {
			s.clearWake()
			s.wake(tails, k, now)
			return true, nil
		}
		if e := s.applyAcks(&req, tails); e != nil {
			return false, e
		}
		if !req.Done {
			s.LeaseUntil = now.Add(time.Duration(s.Config.LeaseTTLms) * time.Millisecond).UnixMilli()
			return true, nil
		}
		s.clearWake()
		next = s.wake(tails, k, now)
		return true, nil
	})
	if err != nil {
		return internal(err)
	}
	if action == "release" {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	writeJSON(w, http.StatusOK, struct {
		OK       bool `json:"ok"`
		NextWake bool `json:"next_wake"`
	}{true, next})
	return nil
}
