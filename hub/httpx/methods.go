package httpx

import (
	"net/http"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/protocol"
)

// routeMethods are the methods a route may be registered for; a request
// with another one (or one no route of its path has) is answered 405.
var routeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace}

// AllowedMethods lists, sorted, the methods e routes path with: empty
// when no route matches path with any method. A group's not-found route
// (the one echo adds so a group's middleware runs for unknown paths) is no
// route: that is why echo itself answers a wrong method under such a group
// 404, and why the error handler asks here.
func AllowedMethods(e *echo.Echo, path string) []string {
	routed := map[string]bool{}
	for _, r := range e.Routes() {
		if r.Method != echo.RouteNotFound {
			routed[r.Method+" "+r.Path] = true
		}
	}
	var out []string
	for _, m := range routeMethods {
		c := e.NewContext(nil, nil)
		e.Router().Find(m, path, c)
		if routed[m+" "+c.Path()] {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// methodNotAllowed answers a request whose path is routed, but not for its
// method: 405 method_not_allowed with the Allow header (an OPTIONS request
// gets 204 with it). ok is false when no route has the path: then it is a
// plain 404.
func methodNotAllowed(c echo.Context) (ok bool) {
	req := c.Request()
	allowed := AllowedMethods(c.Echo(), echo.GetPath(req))
	if len(allowed) == 0 {
		return false
	}
	for _, m := range allowed {
		if m == req.Method {
			return false // routed after all (a handler's own 404)
		}
	}
	allow := strings.Join(allowed, ", ")
	c.Response().Header().Set(echo.HeaderAllow, allow)
	if req.Method == http.MethodOptions {
		c.NoContent(http.StatusNoContent)
		return true
	}
	c.JSON(http.StatusMethodNotAllowed, protocol.ErrorBody{Error: &protocol.Error{Code: protocol.CodeMethodNotAllowed,
		Message: req.Method + " is not allowed on this path; allowed: " + allow}})
	return true
}

// Routed reports whether e has a route of method for path (a group's
// not-found route is none).
func Routed(e *echo.Echo, method, path string) bool {
	c := e.NewContext(nil, nil)
	e.Router().Find(method, path, c)
	for _, r := range e.Routes() {
		if r.Method == method && r.Path == c.Path() {
			return true
		}
	}
	return false
}
