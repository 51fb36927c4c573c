package subscription

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/runhub/runhub/journal"
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

// readJSON reads a request's JSON object (an empty body is {}).
func readJSON(r *http.Request, v any) *Error {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return invalid("the request body could not be read")
	}
	if len(raw) > maxBody {
		return errf(http.StatusRequestEntityTooLarge, CodeInvalidRequest, "the request body is larger than %d bytes", maxBody)
	}
	if len(strings.TrimSpace(string(raw))) == 0 {
		raw = []byte("{}")
	}
	if !json.Valid(raw) {
		return invalid("Invalid JSON body")
	}
	if strings.TrimSpace(string(raw))[0] != '{' {
		return invalid("Request body must be a JSON object")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return invalid("Invalid request body: %v", err)
	}
	return nil
}

// checkPath checks a stream path of a request's body.
func checkPath(what, p string) (string, *Error) {
	n := normalize(p)
	switch {
	case n == "" || len(n) > 1024:
		return "", invalid("%s must be a stream path of 1 to 1024 bytes", what)
	case strings.Contains(n, "//"):
		return "", invalid("%s %q has an empty path segment", what, truncate(n, 64))
	case n == "__ds" || strings.HasPrefix(n, "__ds/"):
		return "", invalid("%s %q is in the reserved __ds namespace", what, truncate(n, 64))
	case strings.ContainsAny(n, "{}\\"):
		return "", invalid("%s %q may not contain braces or backslashes", what, truncate(n, 64))
	}
	for _, seg := range strings.Split(n, "/") {
		if seg == "." || seg == ".." {
			return "", invalid("%s %q may not contain . or .. segments", what, truncate(n, 64))
		}
	}
	for _, r := range n {
		if r < 0x20 || r == 0x7f {
			return "", invalid("%s may not contain control characters", what)
		}
	}
	return n, nil
}

// parseConfig reads a registration's body.
func (m *Manager) parseConfig(r *http.Request) (Config, *Error) {
	var raw map[string]json.RawMessage
	var c Config
	if e := readJSON(r, &raw); e != nil {
		return c, e
	}
	str := func(k string) (string, bool, *Error) {
		v, ok := raw[k]
		if !ok || string(v) == "null" {
			return "", false, nil
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", true, invalid("%s must be a string", k)
		}
		return s, true, nil
	}
	typ, _, e := str("type")
	if e != nil || (typ != TypeWebhook && typ != TypePullWake) {
		return c, invalid(`type must be "webhook" or "pull-wake"`)
	}
	c.Type = typ
	pat, _, e := str("pattern")
	if e != nil {
		return c, e
	}
	if pat != "" {
		if c.Pattern, e = checkPath("pattern", pat); e != nil {
			return c, e
		}
	}
	if v, ok := raw["streams"]; ok && string(v) != "null" {
		var list []json.RawMessage
		if json.Unmarshal(v, &list) != nil {
			return c, invalid("streams must be an array of stream paths")
		}
		seen := map[string]bool{}
		for _, item := range list {
			var s string
			if json.Unmarshal(item, &s) != nil {
				return c, invalid("streams must contain only strings")
			}
			p, e := checkPath("a stream of streams", s)
			if e != nil {
				return c, e
			}
			if !seen[p] {
				seen[p] = true
				c.Streams = append(c.Streams, p)
			}
		}
		sort.Strings(c.Streams)
		if len(c.Streams) > m.o.MaxStreams {
			return c, invalid("streams lists %d streams; a subscription links at most %d", len(c.Streams), m.o.MaxStreams)
		}
	}
	if c.Pattern == "" && len(c.Streams) == 0 {
		return c, invalid("At least one of pattern or streams is required")
	}
	c.LeaseTTLms = defaultLease
	if v, ok := raw["lease_ttl_ms"]; ok && string(v) != "null" {
		var f float64
		if json.Unmarshal(v, &f) != nil || f != float64(int64(f)) || f < minLease || f > maxLease {
			return c, invalid("lease_ttl_ms must be an integer from 1000 to 600000")
		}
		c.LeaseTTLms = int64(f)
	}
	switch typ {
	case TypeWebhook:
		var wh struct {
			URL *string `json:"url"`
		}
		v, ok := raw["webhook"]
		if !ok || json.Unmarshal(v, &wh) != nil || wh.URL == nil || *wh.URL == "" {
			return c, invalid("webhook subscriptions require webhook.url")
		}
		c.WebhookURL = *wh.URL
	case TypePullWake:
		ws, _, e := str("wake_stream")
		if e != nil || ws == "" {
			return c, invalid("pull-wake subscriptions require wake_stream")
		}
		if c.WakeStream, e = checkPath("wake_stream", ws); e != nil {
			return c, e
		}
	}
	if d, ok, e := str("description"); e != nil {
		return c, e
	} else if ok {
		if len(d) > 1024 {
			return c, invalid("description must be at most 1024 bytes")
		}
		c.Description = &d
	}
	if c.Type == TypeWebhook {
		if err := ValidateURL(c.WebhookURL); err != nil {
			return c, errf(http.StatusBadRequest, CodeURLRejected, "%s", err.Error())
		}
	}
	return c, nil
}

func forbidden(msg string) *Error { return errf(http.StatusForbidden, CodeForbidden, "%s", msg) }

func (m *Manager) put(w http.ResponseWriter, r *http.Request, id, root string, p Caller) *Error {
	c, e := m.parseConfig(r)
	if e != nil {
		return e
	}
	ctx := r.Context()
	k, err := m.keyring(ctx)
	if err != nil {
		return internal(err)
	}
	hash := c.hash()
	confirm := func(s *sub) *Error {
		switch {
		case s.Owner != p.Subject:
			return forbidden("the subscription is someone else's")
		case s.Hash != hash:
			return errf(http.StatusConflict, CodeAlreadyExists, "Subscription already exists with different configuration")
		}
		if err := m.indexed(ctx, s); err != nil {
			return internal(err)
		}
		_, tails, err := m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) { return false, nil })
		if err != nil {
			return internal(err)
		}
		writeJSON(w, http.StatusOK, m.serialize(s, tails, root, k))
		return nil
	}
	if s, _, err := m.load(ctx, id); err == nil {
		return confirm(s)
	} else if !isNotFound(err) {
		return internal(err)
	}
	s := &sub{ID: id, Owner: p.Subject, Config: c, Hash: hash, CreatedAt: m.now().UTC().Format("2006-01-02T15:04:05.000Z"),
		Base: root, Links: map[string]*link{}, Status: "active"}
	tails := map[string]tail{}
	for _, name := range c.Streams {
		t, err := m.tail(ctx, p.Subject, name)
		if err != nil {
			return internal(err)
		}
		tails[name] = t
		l := &link{Explicit: true, Acked: zeroOffset}
		if t.ok {
			l.Acked, l.Gen = t.offset, t.gen
		}
		s.Links[name] = l
	}
	// The index first (with the bounds), then the subscription: an entry
	// left without its subscription by a crash is swept.
	if err := m.changeIndex(ctx, func(idx *index) (bool, *Error) {
		if old, ok := idx.Subs[id]; ok {
			if old.Owner != p.Subject {
				return false, forbidden("the subscription is someone else's")
			}
			return false, nil
		}
		if len(idx.Subs) >= m.o.MaxTotal {
			return false, errf(http.StatusConflict, CodeLimitExceeded, "the hub holds %d subscriptions, as many as it may", len(idx.Subs))
		}
		n := 0
		for _, e := range idx.Subs {
			if e.Owner == p.Subject {
				n++
			}
		}
		if n >= m.o.MaxPerOwner {
			return false, errf(http.StatusConflict, CodeLimitExceeded, "%q has %d subscriptions, as many as one subject may", p.Subject, n)
		}
		idx.Subs[id] = indexEntry{Owner: p.Subject, Pattern: c.Pattern, Streams: c.Streams, At: m.now().UnixMilli()}
		return true, nil
	}); err != nil {
		return internal(err)
	}
	raw, _ := json.Marshal(s)
	if _, err := m.o.Docs.PutDoc(ctx, docPrefix+id, 0, raw); errors.Is(err, journal.ErrConflict) {
		s, _, err := m.load(ctx, id) // registered meanwhile
		if err != nil {
			return internal(err)
		}
		return confirm(s)
	} else if err != nil {
		return internal(err)
	}
	w.Header().Set("Location", root+"__ds/subscriptions/"+url.PathEscape(id))
	writeJSON(w, http.StatusCreated, m.serialize(s, tails, root, k))
	return nil
}

// indexed makes sure the index lists s as it is.
func (m *Manager) indexed(ctx context.Context, s *sub) error {
	want := indexEntry{Owner: s.Owner, Pattern: s.Config.Pattern}
	for _, p := range s.paths() {
		if s.Links[p].Explicit {
			want.Streams = append(want.Streams, p)
		}
	}
	return m.changeIndex(ctx, func(idx *index) (bool, *Error) {
		old, ok := idx.Subs[s.ID]
		want.At = old.At
		if !ok {
			want.At = m.now().UnixMilli()
		}
		if ok && old.Owner == want.Owner && old.Pattern == want.Pattern && strings.Join(old.Streams, "\x00") == strings.Join(want.Streams, "\x00") {
			return false, nil
		}
		idx.Subs[s.ID] = want
		return true, nil
	})
}

// visible loads subscription id when p may read it (its owner, an admin);
// write: and change it (its owner).
func (m *Manager) visible(ctx context.Context, id string, p Caller, write bool) (*sub, *Error) {
	s, _, err := m.load(ctx, id)
	if err != nil {
		return nil, internal(err)
	}
	switch {
	case s.Owner != p.Subject && !p.Admin:
		return nil, notFound()
	case write && s.Owner != p.Subject:
		return nil, forbidden("the admin role reads only: the subscription is someone else's")
	}
	return s, nil
}

func (m *Manager) get(w http.ResponseWriter, r *http.Request, id, root string, p Caller) *Error {
	ctx := r.Context()
	if _, e := m.visible(ctx, id, p, false); e != nil {
		return e
	}
	k, err := m.keyring(ctx)
	if err != nil {
		return internal(err)
	}
	s, tails, err := m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) { return false, nil })
	if err != nil {
		return internal(err)
	}
	writeJSON(w, http.StatusOK, m.serialize(s, tails, root, k))
	return nil
}

func (m *Manager) remove(w http.ResponseWriter, r *http.Request, id string, p Caller) *Error {
	ctx := r.Context()
	if _, _, err := m.load(ctx, id); isNotFound(err) {
		w.WriteHeader(http.StatusNoContent) // deleting what is not there is done
		return nil
	}
	if _, e := m.visible(ctx, id, p, true); e != nil {
		return e
	}
	if err := m.changeIndex(ctx, func(idx *index) (bool, *Error) {
		_, ok := idx.Subs[id]
		delete(idx.Subs, id)
		return ok, nil
	}); err != nil {
		return internal(err)
	}
	for range 64 {
		_, ver, err := m.load(ctx, id)
		if isNotFound(err) {
			break
		}
		if err != nil {
			return internal(err)
		}
		if err := m.o.Docs.DeleteDoc(ctx, docPrefix+id, ver); errors.Is(err, journal.ErrConflict) {
			continue
		} else if err != nil && !errors.Is(err, journal.ErrNotFound) {
			return internal(err)
		}
		break
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (m *Manager) addStreams(w http.ResponseWriter, r *http.Request, id string, p Caller) *Error {
	var body struct {
		Streams []json.RawMessage `json:"streams"`
	}
	if e := readJSON(r, &body); e != nil {
		return e
	}
	if len(body.Streams) == 0 {
		return invalid("streams must be a non-empty string array")
	}
	var names []string
	for _, item := range body.Streams {
		var s string
		if json.Unmarshal(item, &s) != nil {
			return invalid("streams must be a non-empty string array")
		}
		n, e := checkPath("a stream of streams", s)
		if e != nil {
			return e
		}
		names = append(names, n)
	}
	ctx := r.Context()
	if _, e := m.visible(ctx, id, p, true); e != nil {
		return e
	}
	s, _, err := m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) {
		changed := false
		for _, n := range names {
			if l := s.Links[n]; l != nil {
				changed = changed || !l.Explicit
				l.Explicit = true
				continue
			}
			if len(s.Links) >= m.o.MaxStreams {
				return false, invalid("the subscription links %d streams, as many as it may", len(s.Links))
			}
			t, err := m.tail(ctx, s.Owner, n)
			if err != nil {
				return false, internal(err)
			}
			tails[n] = t
			l := &link{Explicit: true, Acked: zeroOffset}
			if t.ok {
				l.Acked, l.Gen = t.offset, t.gen
			}
			s.Links[n], changed = l, true
		}
		return changed, nil
	})
	if err != nil {
		return internal(err)
	}
	if err := m.indexed(ctx, s); err != nil {
		return internal(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (m *Manager) removeStream(w http.ResponseWriter, r *http.Request, id, name string, p Caller) *Error {
	ctx := r.Context()
	if _, e := m.visible(ctx, id, p, true); e != nil {
		return e
	}
	s, _, err := m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) {
		l := s.Links[name]
		if l == nil || !l.Explicit {
			return false, nil
		}
		l.Explicit = false
		if !l.Glob {
			delete(s.Links, name)
		}
		return true, nil
	})
	if err != nil {
		return internal(err)
	}
	if err := m.indexed(ctx, s); err != nil {
		return internal(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

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
