package durable_test

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/durable"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// testCore is the edge's Core over a journal for these tests, until the
// core's own (hub.Hub's) methods land: a bearer token is the subject it
// names ("admin" is an admin), no token is the open mode's "local", a
// cross-origin browser request is refused, and runs are read through the
// adapter's Router as the hub reads them.
type testCore struct {
	store journal.Store
	rt    *adapter.Router
	ctx   context.Context
}

func (c *testCore) CheckOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		if o := ec.Request().Header.Get("Origin"); o != "" {
			if u, err := url.Parse(o); err != nil || u.Host != ec.Request().Host {
				return ec.JSON(http.StatusForbidden, protocol.ErrorBody{Error: protocol.Errorf(protocol.CodeForbidden, "cross-origin request refused")})
			}
		}
		return next(ec)
	}
}

func (c *testCore) RequireAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		p := hub.Principal{Subject: "local"}
		if a := ec.Request().Header.Get("Authorization"); a != "" {
			sub, ok := strings.CutPrefix(a, "Bearer ")
			if !ok || sub == "" {
				return ec.JSON(http.StatusUnauthorized, protocol.ErrorBody{Error: protocol.Errorf(protocol.CodeUnauthorized, "bad token")})
			}
			p = hub.Principal{Subject: sub, Admin: sub == "admin"}
		}
		ec.Set("principal", p)
		return next(ec)
	}
}

func (c *testCore) Caller(ec echo.Context) hub.Principal { return ec.Get("principal").(hub.Principal) }

func (c *testCore) ReadRun(ctx context.Context, p hub.Principal, runID string) (journal.RunMeta, error) {
	m, err := c.store.Run(ctx, runID)
	if err != nil || (!p.Admin && m.Owner != p.Subject) {
		return journal.RunMeta{}, protocol.Errorf(protocol.CodeNotFound, "run %s not found", runID)
	}
	return m, nil
}

func (c *testCore) Observe(ctx context.Context, runID string, after uint64) iter.Seq2[protocol.Envelope, error] {
	return c.rt.ObserveRun(ctx, runID, after)
}

func (c *testCore) Context() context.Context { return c.ctx }

func (c *testCore) PublicError(err error) error {
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe):
		return pe
	case errors.Is(err, journal.ErrNotFound):
		return protocol.Errorf(protocol.CodeNotFound, "not found")
	}
	return protocol.Errorf(protocol.CodeInternal, "internal error")
}

// serve mounts an edge over streams (and runs of store) on a test server.
func serve(t testing.TB, store journal.Store, streams journal.Streams, o durable.Options) (*httptest.Server, *durable.Edge) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	core := &testCore{store: store, rt: adapter.NewRouter(store, nil, nil), ctx: ctx}
	o.Streams = streams
	edge := durable.New(o)
	e := echo.New()
	edge.Mount(e, core)
	srv := httptest.NewServer(e)
	t.Cleanup(func() {
		srv.Close()
		cancel()
		edge.Close()
	})
	return srv, edge
}

// shortPoll is the long-poll timeout of the tests (the suite is told).
const shortPoll = 3 * time.Second
