package hub_test

import (
	"net"
	"testing"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/httpapi"
	"github.com/runhub/runhub/hub/hubtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The core's tests run against hub/hubtest's hub: a real core over an
// in-memory journal (or a bbolt file) and the in-process runtime, served
// on loopback. These names keep its helpers short here.
type (
	testHub     = hubtest.Hub
	runtimeOpts = hubtest.Options
	collector   = hubtest.Collector
)

var (
	ctxT          = hubtest.Ctx
	simStart      = hubtest.SimStart
	startRun      = hubtest.StartRun
	newCollector  = hubtest.NewCollector
	checkRun      = hubtest.CheckRun
	do            = hubtest.Do
	rawDo         = hubtest.RawDo
	token         = hubtest.Token
	withAuth      = hubtest.WithAuth
	bearerOf      = hubtest.BearerOf
	waitFor       = hubtest.WaitFor
	waitTerminal  = hubtest.WaitTerminal
	journalEvents = hubtest.JournalEvents
	waitEvent     = hubtest.WaitEvent
	isType        = hubtest.IsType
	sessionMeta   = hubtest.SessionMeta
	runMeta       = hubtest.RunMeta
	terminal      = hubtest.Terminal
)

// coreEdges are the edges a core test mounts: the HTTP API, which many
// socket tests set up or check runs with.
func coreEdges() []hub.Edge { return []hub.Edge{httpapi.New(nil)} }

func newTestHub(t testing.TB, cfg hub.Config) *testHub {
	t.Helper()
	return newTestHubWith(t, cfg, nil, runtimeOpts{})
}

// newTestHubListener serves the hub on ln (nil: a default loopback one).
func newTestHubListener(t testing.TB, cfg hub.Config, ln net.Listener) *testHub {
	t.Helper()
	return newTestHubWith(t, cfg, ln, runtimeOpts{})
}

// newTestHubRuntime is newTestHub with a tuned runtime.
func newTestHubRuntime(t testing.TB, cfg hub.Config, ro runtimeOpts) *testHub {
	t.Helper()
	return newTestHubWith(t, cfg, nil, ro)
}

func newTestHubWith(t testing.TB, cfg hub.Config, ln net.Listener, ro runtimeOpts) *testHub {
	t.Helper()
	ro.Listener = ln
	if ro.Edges == nil {
		ro.Edges = coreEdges()
	}
	return hubtest.Serve(t, cfg, ro)
}
