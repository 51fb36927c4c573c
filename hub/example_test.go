package hub_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/httpapi"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/protocol"
)

// A hub in-process: a journal (in memory here; journal/bolt or
// journal/redis in a deployment), an executor with its drivers, the Router
// between them, and the tab socket with the edges (here the HTTP API) on
// an HTTP server. Hub.Control is what a tab's control message and every
// edge's controls go through.
func Example() {
	store := mem.New(mem.Options{})
	defer store.Close()
	exec := executor.New(store, executor.Options{Drivers: map[string]driver.Driver{"sim": &sim.Driver{}}})
	defer exec.Close()
	rt := adapter.NewRouter(store, exec, nil)
	h := hub.New(hub.Config{}, store, rt)
	defer h.Shutdown(context.Background())

	e := echo.New()
	e.HTTPErrorHandler = httpx.ErrorHandler
	h.Routes(e, httpapi.New(nil))
	srv := httptest.NewServer(e) // tabs dial ws://…/v1/ws
	defer srv.Close()
	fmt.Println(strings.HasPrefix(srv.URL, "http://127.0.0.1:"))

	ctx := context.Background()
	res, err := h.Control(ctx, "local", &protocol.Control{Op: protocol.OpStart, Message: "hello",
		Metadata: []byte(`{"sim":{"tokens":3,"token_ms":1,"tools":0}}`)}, "")
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.Message)
	for e, err := range rt.ObserveRun(ctx, res.RunID, 0) {
		if err != nil {
			panic(err)
		}
		if e.Terminal {
			fmt.Println("the run ended:", e.Type)
		}
	}
	// Output:
	// true
	// accepted started
	// the run ended: done
}
