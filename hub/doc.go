// Package hub is runhub's core: it serves browser tabs ONE WebSocket per
// tab (GET /v1/ws, subprotocol runhub.v1) carrying the status of every
// session the tab watches and every event of the one session it focuses
// (watch, focus, replay then live, statuses, presence, controls over the
// socket), and nothing else.
//
// Every other wire dialect is an edge: a package of its own that imports
// hub and mounts its routes (Edge.Mount) over the core's public API
// (API, api.go), never the reverse. The API is small and was cut from
// what the edges call:
//
//   - who the caller is: Authenticate a bearer token, the CheckOrigin and
//     RequireAuth middleware, the request's Caller (a Principal), and
//     SetCaller for an edge with credentials of its own;
//   - the sessions and runs a subject may see: ReadSession and ReadRun
//     (ErrUnknown for what does not exist or is another's: never which),
//     Sessions and SessionStatus (with presence), StatusOf, CreateSession
//     OpenSession (get or create under a client's id) and DiscardSession
//     (a refused start leaves no session behind);
//   - a control as one value: Control answers its ControlResult (StartRun
//     and GetRun for the HTTP API's start and run status);
//   - a run's events from a cursor, then live until the terminal event:
//     Observe; and the journal an edge reads and updates (Journal);
//   - the hub's life and settings: Context, Draining, Config, PublicError.
//
// docs/architecture.md lists the edges ("Adding an edge"); hub/httpapi is
// the HTTP and SSE API of protocol.md §3; hub/httpx is what they and the
// core share of HTTP. cmd/hub lists them, one line each (edges.go). hub/hubtest is the core in
// memory for tests: a real Hub over journal/mem and the in-process runtime,
// served on loopback with the edges a test names.
//
// Data flow inside a hub:
//
//   - the status tracker (status.go) tails the journal's feed, folds events
//     into the SessionStatus of every watched session, encodes a changed
//     status once and offers it to every watching socket, where the newest
//     status per session replaces an unsent older one: at once when its
//     meaning changed (status, prompt, terminal, title, queue, goal), at
//     most once per StatusInterval when only its progress did (tokens,
//     last_seq, updated_at, progress text);
//   - presence (presence.go) counts the tabs that watch and focus each
//     session by subject, shares the counts with the other hubs through a
//     PresenceStore (hub/redispresence) and, once per StatusInterval, puts
//     the merged counts into the tracked sessions' statuses, which then
//     leave with the next status flush (presence is progress, not meaning);
//   - the focus router (router.go) tails the runs that some socket focuses,
//     encodes each event once and offers the bytes to the focusing sockets;
//   - a socket (serve.go) is read and written through its transport,
//     hub/tabsock (the handshake, frames, the closing handshake): its
//     frames are read on a goroutine started when bytes arrive, as the
//     hub's poller (tabsock.Poller, one epoll set) waits for every idle
//     socket, so an idle socket has no goroutine of its own (without
//     epoll, one reader goroutine each); what it is sent waits in a
//     bounded queue and leaves batched into one NDJSON frame. The hub's
//     senders (sender.go, one per core, each serving a share of the
//     sockets) write those frames: a socket offered something is put in
//     its sender's ready list, and the sender, woken once for all of
//     them, writes each a frame with a non-blocking write. What may wait
//     runs on the socket's own writer goroutine (writeloop.go; started
//     when needed, ended after at most a second of nothing): the rest of
//     a frame the kernel did not take, reading the journal for the focus,
//     the close, each write bounded by the write timeout.
//     docs/benchmarks.md ("Load tests") has what a socket costs. A
//     socket's state is split by owner, each part with its locking stated
//     on its type (types.go): the reader's own, its watches, its hello and
//     credentials, its outbox — queues, close request and focus, under one
//     lock — its connection and its writer's lifecycle. A socket reaches
//     its hub only through socketEnv.
//
// A socket accepts an event only if it is the next seq of the run it is
// delivering (focus.go). Anything else — a gap, a queue over its bound, a
// focus change, a cursor — puts the socket in catch-up: its writer reads the
// journal from the last delivered seq until it meets the live stream again.
// Replay-then-live, reconnect and slow consumers are that one mechanism, so
// a tab never sees a gap or a duplicate and a stalled tab costs bounded
// memory. A tab whose writes stall past WriteTimeout is closed.
//
// The files are layered so that no two use each other: config.go and
// types.go (the types, with the contract of their state) at the bottom;
// the primitives (writer.go, sender.go, conn.go) above them; the
// features (hello.go, watch.go, focus.go, control.go, router.go,
// status.go, presence.go, access.go, identity.go) in the middle; and the
// entry points on top (serve.go and writeloop.go for a socket, api.go for
// the routes and the edges' API, hub.go for New and Shutdown). A method
// lives with the layer it belongs to, not with its type; the graph of
// which file uses which has no cycle (TestCoreFileLayers, cmd/hub).
//
// Hub methods are safe for concurrent use. Close/Shutdown stop every
// goroutine the hub started and wait for them.
package hub
