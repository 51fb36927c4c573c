package hub

import (
	"errors"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/protocol"
)

// OpenSubject is every caller's subject when the hub has no Authenticator.
const OpenSubject = "local"

var errNoToken = protocol.Errorf(protocol.CodeUnauthorized, "a bearer token is required")

// authenticate verifies a token; in open mode every caller is OpenSubject.
func (h *Hub) authenticate(token string) (Principal, error) {
	if h.cfg.Authenticator == nil {
		return Principal{Subject: OpenSubject}, nil
	}
	if token == "" {
		return Principal{}, errNoToken
	}
	p, err := h.cfg.Authenticator.Authenticate(token)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) && pe.Code == protocol.CodeUnauthorized {
			return Principal{}, pe
		}
		return Principal{}, protocol.Errorf(protocol.CodeUnauthorized, "invalid token")
	}
	if p.Subject == "" {
		return Principal{}, protocol.Errorf(protocol.CodeUnauthorized, "the token has no subject")
	}
	if !p.Expires.IsZero() && !time.Now().Before(p.Expires) {
		return Principal{}, protocol.Errorf(protocol.CodeUnauthorized, "the token has expired")
	}
	return p, nil
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (token string, present bool) {
	v := r.Header.Get("Authorization")
	if v == "" {
		return "", false
	}
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(tok), true
}

// principalKey holds the caller's Principal in an echo.Context.
const principalKey = "runhub.principal"

// requireAuth authenticates every /v1 HTTP request (open mode: OpenSubject).
func (h *Hub) requireAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		token, _ := bearer(c.Request())
		p, err := h.authenticate(token)
		if err != nil {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="runhub"`)
			return err
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// RequireAdmin is middleware for operator endpoints outside the API
// (/debug/pprof): with authentication configured, only a bearer token with
// the admin role passes (401 without a valid token, 403 with another
// role). In open mode everyone is admitted: the hub then listens on
// loopback only, unless -insecure-listen says otherwise.
func (h *Hub) RequireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return h.requireAuth(func(c echo.Context) error {
		if h.cfg.Authenticator != nil && !h.principal(c).Admin {
			return protocol.Errorf(protocol.CodeForbidden, "this endpoint needs the admin role")
		}
		return next(c)
	})
}

// principal is the caller of an HTTP request.
func (h *Hub) principal(c echo.Context) Principal {
	if p, ok := c.Get(principalKey).(Principal); ok {
		return p
	}
	if h.cfg.Authenticator == nil {
		return Principal{Subject: OpenSubject}
	}
	return Principal{} // unreachable behind requireAuth; owns nothing
}

// checkOrigin refuses browser requests from another site (CSRF on the HTTP
// API, cross-site WebSocket hijacking on the upgrade).
func (h *Hub) checkOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := originAllowed(c.Request(), h.cfg.OriginPatterns); err != nil {
			return err
		}
		return next(c)
	}
}

var errOrigin = protocol.Errorf(protocol.CodeForbidden, "cross-origin request refused")

// originAllowed accepts a request without an Origin header (not a browser,
// or a same-origin GET), a same-origin one, or one whose origin host (or
// scheme://host when the pattern has a scheme) matches a pattern, the rule
// of websocket.AcceptOptions.OriginPatterns.
func originAllowed(r *http.Request, patterns []string) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return errOrigin
	}
	if strings.EqualFold(r.Host, u.Host) {
		return nil
	}
	for _, p := range patterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(target)); ok {
			return nil
		}
	}
	return errOrigin
}

// mayRead reports whether p may read a session owned by owner.
func (p Principal) mayRead(owner string) bool { return p.Subject == owner || p.Admin }
