// Package hub is runhub's core: it serves browser tabs ONE WebSocket per
// tab (GET /v1/ws, subprotocol runhub.v1) carrying the status of every
// session the tab watches and every event of the one session it focuses
// (replay then live), presence and controls, and nothing else.
//
// Every other wire dialect is an edge: a package of its own that imports
// hub and mounts its routes (Edge.Mount) over the core's public API (API,
// api.go: the caller, the sessions and runs a subject may see, controls,
// a run's events, the journal, the hub's life), never the reverse.
// hub/httpapi is the HTTP and SSE API of protocol.md §8.
//
// Inside a hub: the status tracker (status.go, interest.go) reads the
// journal's status feed for the sessions its sockets watch and offers each
// changed status, encoded once, to every watcher (a change of meaning at
// once, progress at most once per StatusInterval); presence (presence.go)
// counts watching and focusing tabs over every hub; the focus router
// (router.go) tails the runs that some socket focuses and offers each
// event, encoded once, to the focusing sockets. A socket's transport is
// hub/tabsock; an idle socket has no goroutine; the senders (sender.go)
// write what sockets were offered without waiting, and what may wait goes
// to the socket's own writer (writeloop.go). A socket accepts an event
// only if it is the next seq of the run it delivers (focus.go); anything
// else puts it in catch-up from the journal, so a tab never sees a gap or
// a duplicate and a stalled tab costs bounded memory. docs/architecture.md
// ("One token's path", "Who owns which goroutine") has the whole path.
//
// The files are layered so that no two use each other (TestCoreFileLayers,
// cmd/hub): config.go and types.go at the bottom, the primitives
// (writer.go, sender.go, conn.go), the features (hello.go ... identity.go),
// and the entry points on top (serve.go, writeloop.go, api.go, hub.go).
// Hub methods are safe for concurrent use; Close/Shutdown stop every
// goroutine the hub started and wait for them.
package hub
