package hub

import (
	"errors"
	"net/http"
	"strings"
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
// API, cross-site WebSocket hijacking on the upgrade); a request from an
// allowed other origin (Config.OriginPatterns) gets the CORS headers that
// let its page read the answer.
func (h *Hub) CheckOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if err := h.OriginAllowed(r); err != nil {
			return err
		}
		if origin := httpx.CrossOrigin(r); origin != "" {
			httpx.AllowCORS(c.Response().Header(), origin)
		}
		return next(c)
	}
}

// preflight answers a CORS preflight (OPTIONS with Origin and
// Access-Control-Request-Method) from an allowed other origin on a routed
// path: 204 with the path's methods and the headers a page may send. A
// path whose routes answer OPTIONS themselves (an edge with its own CORS
// rules), a request from an origin not allowed, and any other request go
// on as they would (a preflight from an origin not allowed is then 403,
// without CORS headers: the browser refuses the request).
func (h *Hub) preflight(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		origin := httpx.CrossOrigin(r)
		if r.Method != http.MethodOptions || origin == "" || r.Header.Get("Access-Control-Request-Method") == "" ||
			h.OriginAllowed(r) != nil {
			return next(c)
		}
		methods := httpx.AllowedMethods(c.Echo(), r.URL.Path)
		if len(methods) == 0 || httpx.Routed(c.Echo(), http.MethodOptions, r.URL.Path) {
			return next(c)
		}
		hd := c.Response().Header()
		hd.Set("Access-Control-Allow-Origin", origin)
		hd.Add("Vary", "Origin")
		hd.Set("Access-Control-Allow-Methods", strings.Join(methods, ", "))
		hd.Set("Access-Control-Allow-Headers", httpx.CORSAllowHeaders)
		hd.Set("Access-Control-Max-Age", httpx.CORSMaxAge)
		hd.Set(echo.HeaderAllow, strings.Join(methods, ", "))
		return c.NoContent(http.StatusNoContent)
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
