package durable_test

import (
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/durable"
	"github.com/runhub/runhub/hub/httpapi"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/journal"
)

// serve mounts an edge over streams on a real core (hubtest) over store,
// which the test closes, beside the HTTP API (for /v1/runs/{id}/events).
func serve(t testing.TB, store journal.Store, streams journal.Streams, o durable.Options, cfg hub.Config) (*hubtest.Hub, *durable.Edge) {
	t.Helper()
	o.Streams = streams
	if dh, ok := store.(journal.DocHolder); ok && o.Docs == nil {
		o.Docs = dh.Docs()
	}
	edge := durable.New(o)
	th := hubtest.Serve(t, cfg, hubtest.Options{Shared: store, Edges: []hub.Edge{httpapi.New(nil), edge}})
	t.Cleanup(edge.Close)
	return th, edge
}

// shortPoll is the long-poll timeout of the tests (the suite is told).
const shortPoll = 3 * time.Second
