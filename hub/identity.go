package hub

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/protocol"
)

// OpenSubject is every caller's subject when the hub has no Authenticator.
const OpenSubject = "local"

var errNoToken = protocol.Errorf(protocol.CodeUnauthorized, "a bearer token is required")

// Authenticate verifies a token; in open mode every caller is OpenSubject.
func (h *Hub) Authenticate(token string) (Principal, error) {
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

// principalKey holds the caller's Principal in an echo.Context.
const principalKey = "runhub.principal"

// SetCaller makes p the caller of c: for an edge that admits credentials
// of its own (static keys, say) before RequireAuth.
func SetCaller(c echo.Context, p Principal) { c.Set(principalKey, p) }

// RequireAuth authenticates an HTTP request's bearer token (open mode:
// OpenSubject) and makes it the request's caller; a request without a
// valid one is answered 401 with WWW-Authenticate.
func (h *Hub) RequireAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		token, _ := httpx.Bearer(c.Request())
		p, err := h.Authenticate(token)
		if err != nil {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="runhub"`)
			return err
		}
		SetCaller(c, p)
		return next(c)
	}
}

// RequireAdmin is middleware for operator endpoints outside the API
// (/debug/pprof): with authentication configured, only a bearer token with
// the admin role passes (401 without a valid token, 403 with another
// role). In open mode everyone is admitted: the hub then listens on
// loopback only, unless -insecure-listen says otherwise.
func (h *Hub) RequireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return h.RequireAuth(func(c echo.Context) error {
		if h.cfg.Authenticator != nil && !h.Caller(c).Admin {
			return protocol.Errorf(protocol.CodeForbidden, "this endpoint needs the admin role")
		}
		return next(c)
	})
}

// Caller is the caller of an HTTP request (RequireAuth or SetCaller made
// it; OpenSubject when the hub runs open).
func (h *Hub) Caller(c echo.Context) Principal {
	if p, ok := c.Get(principalKey).(Principal); ok {
		return p
	}
	if h.cfg.Authenticator == nil {
		return Principal{Subject: OpenSubject}
	}
	return Principal{} // unreachable behind RequireAuth; owns nothing
}

// CheckOrigin refuses browser requests from another site (CSRF on the HTTP
// API, cross-site WebSocket hijacking on the upgrade).
func (h *Hub) CheckOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := h.OriginAllowed(c.Request()); err != nil {
			return err
		}
		return next(c)
	}
}

// OriginAllowed applies Config.OriginPatterns to r's Origin
// (httpx.OriginAllowed).
func (h *Hub) OriginAllowed(r *http.Request) error {
	return httpx.OriginAllowed(r, h.cfg.OriginPatterns)
}

// MayRead reports whether p may read a session owned by owner: its own, or
// any for an admin.
func (p Principal) MayRead(owner string) bool { return p.Subject == owner || p.Admin }
