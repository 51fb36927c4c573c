package aisdk

import (
	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub"
)

// Edge serves the AI SDK's chat transports over the hub's core
// (docs/integrations.md): DefaultChatTransport's HTTP routes (http.go)
// and WebSocketChatTransport's socket (ws.go). Each stream owns nothing
// beyond its request or its socket.
type Edge struct{}

// New is the AI SDK edge.
func New() Edge { return Edge{} }

// edge is the AI SDK edge mounted over one core.
type edge struct {
	core hub.API
	cfg  hub.Config
}

// Mount registers POST /v1/aisdk/chat and its resume route behind the
// core's origin check and authentication, and GET /v1/aisdk/ws (which
// checks the origin and authenticates the upgrade itself).
func (Edge) Mount(e *echo.Echo, core hub.API) {
	h := &edge{core: core, cfg: core.Config()}
	g := e.Group("/v1", core.CheckOrigin, core.RequireAuth)
	g.POST("/aisdk/chat", h.aisdkChat)
	g.GET("/aisdk/chat/:id/stream", h.aisdkResume)
	e.GET("/v1/aisdk/ws", h.aisdkWS)
}
