package durable

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/runhub/runhub/hub/durable/subscription"
)

// controlPrefix is the protocol's reserved namespace under the stream
// root: the subscription APIs and the webhook signing keys
// (hub/durable/subscription). No stream has a name in it.
const controlPrefix = "__ds/"

// control serves the reserved APIs: the JWK Set, and the callback, ack
// and release (authenticated by their own tokens) as they are, every
// other one behind the hub's authentication.
func (d *Edge) control(c echo.Context) error {
	r := c.Request()
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, Prefix), strings.TrimSuffix(controlPrefix, "/"))
	rest = strings.TrimPrefix(rest, "/")
	if d.subs == nil {
		return d.fail(c, notFound("Durable Streams control route"))
	}
	serve := func(c echo.Context) error {
		p := d.core.Caller(c)
		d.subs.Serve(c.Response(), c.Request(), rest, streamRoot(c.Request()), subscription.Caller{Subject: p.Subject, Admin: p.Admin})
		return nil
	}
	if subscription.Authenticated(rest) {
		return d.core.RequireAuth(serve)(c)
	}
	return serve(c)
}

// streamRoot is the absolute URL of the stream root, as the request
// reached it.
func streamRoot(r *http.Request) string {
	u := absoluteURL(r)
	i := strings.Index(u, Prefix)
	if i < 0 {
		return u
	}
	return u[:i+len(Prefix)]
}
