package client_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/httpapi"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/protocol"
)

// A tab: dial, start a run, focus its session and read its events (the
// replay, then live ones) until the run's terminal event.
func Example() {
	wsURL, stop := startHub()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	tab, err := client.Dial(ctx, wsURL, client.Options{ClientName: "example"})
	if err != nil {
		panic(err)
	}
	defer tab.Close()
	res, err := tab.Control(ctx, protocol.Control{Op: protocol.OpStart, Message: "hello",
		Metadata: []byte(`{"sim":{"tokens":3,"token_ms":1,"tools":0}}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println("start:", res.Status)
	if err := tab.Focus(ctx, res.SessionID, ""); err != nil {
		panic(err)
	}
	tokens := 0
	for {
		m, err := tab.Next(ctx)
		if err != nil {
			panic(err)
		}
		ev, ok := m.(*protocol.EventMessage)
		if !ok {
			continue // statuses, the end of the replay
		}
		if ev.Event.Type == protocol.EventTokenDelta {
			tokens++
		}
		if ev.Event.Terminal {
			fmt.Println("tokens:", tokens, "end:", ev.Event.Type)
			return
		}
	}
	// Output:
	// start: accepted
	// tokens: 3 end: done
}

// startHub starts a hub in-process (as hub's Example does) and returns
// its socket's URL.
func startHub() (wsURL string, stop func()) {
	store := mem.New(mem.Options{})
	exec := executor.New(store, executor.Options{Drivers: map[string]driver.Driver{"sim": &sim.Driver{}}})
	h := hub.New(hub.Config{}, store, adapter.NewRouter(store, exec, nil))
	e := echo.New()
	e.HTTPErrorHandler = httpx.ErrorHandler
	h.Routes(e, httpapi.New(nil))
	srv := httptest.NewServer(e)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws", func() {
		srv.Close()
		h.Shutdown(context.Background())
		exec.Close()
		store.Close()
	}
}
