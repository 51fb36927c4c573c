package main

import (
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/agui"
	"github.com/runhub/runhub/hub/aisdk"
	"github.com/runhub/runhub/hub/httpapi"
)

// edges are the wire dialects `hub serve` speaks over the core's tab
// socket, one line per edge: each package mounts its own routes through
// hub.API (docs/architecture.md, "Adding an edge"). A nil edge is off.
func edges(cfg ServeConfig, rt *procRuntime) []hub.Edge {
	return on(
		httpapi.New(rt.profiles.Public()),
		agui.New(),
		aisdk.New(),
		webUIEdge(cfg.WebUI, rt),
		durableEdge(cfg.Durable, rt),
	)
}

// on drops the edges that are off.
func on(all ...hub.Edge) []hub.Edge {
	out := all[:0]
	for _, e := range all {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}
