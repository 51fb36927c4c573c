package subscription

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Caller is who makes a request the hub authenticated.
type Caller struct {
	Subject string
	Admin   bool
}

// route is a request to the reserved APIs, parsed: rest is the path after
// "{stream root}/__ds/".
type route struct {
	jwks   bool
	id     string
	action string // "", "streams", "stream", "callback", "claim", "ack", "release"
	stream string
}

func parseRoute(rest string) (route, bool) {
	if rest == "jwks.json" {
		return route{jwks: true}, true
	}
	r, ok := strings.CutPrefix(rest, "subscriptions/")
	if !ok {
		return route{}, false
	}
	id, tail, _ := strings.Cut(r, "/")
	if id == "" {
		return route{}, false
	}
	rt := route{id: id}
	switch {
	case tail == "":
	case tail == "streams":
		rt.action = "streams"
	case strings.HasPrefix(tail, "streams/"):
		rt.action, rt.stream = "stream", normalize(strings.TrimPrefix(tail, "streams/"))
	case tail == "callback" || tail == "claim" || tail == "ack" || tail == "release":
		rt.action = tail
	default:
		return route{}, false
	}
	return rt, true
}

// Authenticated reports whether the request to rest needs the hub's
// authentication (every one but the JWK Set and the token-authenticated
// callback, ack and release).
func Authenticated(rest string) bool {
	rt, ok := parseRoute(rest)
	if !ok {
		return true
	}
	return !(rt.jwks || rt.action == "callback" || rt.action == "ack" || rt.action == "release")
}

// maxBody bounds a request's body.
const maxBody = 1 << 20

// maxIDLen bounds a subscription id.
const maxIDLen = 256

// Serve answers a request to the reserved APIs: rest is the path after
// "{stream root}/__ds/", root the stream root's absolute URL (ending in
// "/"), p the caller when Authenticated(rest).
func (m *Manager) Serve(w http.ResponseWriter, r *http.Request, rest, root string, p Caller) {
	rt, ok := parseRoute(rest)
	if !ok {
		writeError(w, errf(http.StatusNotFound, CodeNotFound, "Durable Streams control route not found"))
		return
	}
	if rt.jwks {
		m.serveJWKS(w, r)
		return
	}
	if e := checkID(rt.id); e != nil {
		writeError(w, e)
		return
	}
	var e *Error
	switch rt.action {
	case "":
		switch r.Method {
		case http.MethodPut:
			e = m.put(w, r, rt.id, root, p)
		case http.MethodGet, http.MethodHead:
			e = m.get(w, r, rt.id, root, p)
		case http.MethodDelete:
			e = m.remove(w, r, rt.id, p)
		default:
			e = notAllowed(w, "GET, HEAD, PUT, DELETE")
		}
	case "streams":
		if r.Method != http.MethodPost {
			e = notAllowed(w, "POST")
			break
		}
		e = m.addStreams(w, r, rt.id, p)
	case "stream":
		if r.Method != http.MethodDelete {
			e = notAllowed(w, "DELETE")
			break
		}
		e = m.removeStream(w, r, rt.id, rt.stream, p)
	case "claim":
		if r.Method != http.MethodPost {
			e = notAllowed(w, "POST")
			break
		}
		e = m.claim(w, r, rt.id, p)
	default: // callback, ack, release
		if r.Method != http.MethodPost {
			e = notAllowed(w, "POST")
			break
		}
		e = m.token(w, r, rt.id, rt.action)
	}
	if e != nil {
		writeError(w, e)
	}
}

func notAllowed(w http.ResponseWriter, allow string) *Error {
	w.Header().Set("Allow", allow)
	return errf(http.StatusMethodNotAllowed, CodeMethodNotAllowd, "Method not allowed: use %s", allow)
}

func checkID(id string) *Error {
	if len(id) > maxIDLen {
		return invalid("the subscription id must be at most %d bytes", maxIDLen)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return invalid("the subscription id may not contain control characters")
		}
	}
	return nil
}

// internal is the answer to a journal failure.
func internal(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errf(http.StatusServiceUnavailable, CodeUnavailable, "the request ended before its answer")
	}
	return errf(http.StatusServiceUnavailable, CodeUnavailable, "the journal is unavailable; retry")
}

func (m *Manager) serveJWKS(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, notAllowed(w, "GET, HEAD"))
		return
	}
	k, err := m.keyring(r.Context())
	if err != nil {
		writeError(w, internal(err))
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(k.jwks())
}

// serialize is a subscription as GET answers it.
func (m *Manager) serialize(s *sub, tails map[string]tail, root string, k *keyring) map[string]any {
	links := make([]map[string]string, 0, len(s.Links))
	for _, p := range s.paths() {
		l := s.Links[p]
		links = append(links, map[string]string{"path": p, "link_type": l.kind(), "acked_offset": l.Acked})
	}
	out := map[string]any{"id": s.ID, "subscription_id": s.ID, "type": s.Config.Type, "streams": links,
		"lease_ttl_ms": s.Config.LeaseTTLms, "created_at": s.CreatedAt, "status": s.Status, "wake_stream": nil}
	if s.Config.Pattern != "" {
		out["pattern"] = s.Config.Pattern
	}
	if s.Config.Type == TypeWebhook {
		out["webhook"] = map[string]any{"url": s.Config.WebhookURL,
			"signing": map[string]string{"alg": "ed25519", "kid": k.kid, "jwks_url": root + "__ds/jwks.json"}}
	} else {
		out["wake_stream"] = s.Config.WakeStream
	}
	if s.Config.Description != nil {
		out["description"] = *s.Config.Description
	}
	if s.Status == "failed" && s.Due != 0 {
		out["next_attempt_at"] = time.UnixMilli(s.Due).UTC().Format(time.RFC3339Nano)
	}
	return out
}

func actionURL(root, id, action string) string {
	return root + "__ds/subscriptions/" + url.PathEscape(id) + "/" + action
}

func urlHost(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	return strings.ToLower(u.Hostname()), nil
}
