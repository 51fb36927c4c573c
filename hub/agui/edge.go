package agui

import (
	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/interop"
)

// Edge serves AG-UI over the hub's core (docs/agui.md): the export of a
// run or a session as AG-UI events over SSE (export.go) and the AG-UI run
// endpoint (run.go). It owns one piece of state: the AG-UI run ids of
// resumed turns, bounded (a run's first turn is found from the journal).
type Edge struct{}

// New is the AG-UI edge.
func New() Edge { return Edge{} }

// edge is the AG-UI edge mounted over one core.
type edge struct {
	core hub.API
	runs *interop.BoundedMap[aguiTurn] // AG-UI run ids of resumed turns
}

// aguiTurn is an AG-UI run: turn Turn of runhub run Run.
type aguiTurn struct {
	Run  string
	Turn int
}

// Mount registers the export and the run endpoint under /v1, behind the
// core's origin check and authentication.
func (Edge) Mount(e *echo.Echo, core hub.API) {
	h := &edge{core: core, runs: interop.NewBoundedMap[aguiTurn](maxAGUIRuns)}
	g := e.Group("/v1", core.CheckOrigin, core.RequireAuth)
	g.GET("/runs/:rid/agui", h.aguiRun)
	g.GET("/sessions/:sid/agui", h.aguiSession)
	g.POST("/agui", h.aguiPost)
	g.POST("/agui/:profile", h.aguiPost)
}
