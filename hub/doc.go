// Package hub serves browser tabs: ONE WebSocket per tab (GET /v1/ws,
// subprotocol runhub.v1) carrying the status of every session the tab
// watches and every event of the one session it focuses, plus the HTTP and
// SSE API of protocol.md §3.
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
//   - each socket (serve.go) has one reader goroutine; what it is sent
//     waits in a bounded queue and leaves batched into one NDJSON frame.
//     The hub's senders (sender.go, one per core, each serving a share of
//     the sockets) write those frames: a socket offered something is put
//     in its sender's ready list, and the sender, woken once for all of
//     them, writes each a frame with a non-blocking write. What may wait
//     runs on the socket's own writer goroutine (writeloop.go; started when
//     needed, ended after at most a second of nothing, so an idle tab costs
//     one goroutine): the rest of a frame the kernel did not take, reading
//     the journal for the focus, the close, each write bounded by the
//     write timeout. The hub frames its messages itself on the connection
//     (wire.go); the WebSocket library writes only its control frames.
//     docs/benchmarks.md ("Load tests") has what a socket costs. A
//     socket's state is split by owner, each part with its locking stated
//     on its type (types.go): the reader's own, its watches, its hello and
//     credentials, its outbox — queues, close request and focus, under one
//     lock — its wire (wire.go) and its writer's lifecycle. A socket
//     reaches its hub only through socketEnv.
//
// The AG-UI export (agui.go, the mapping in hub/agui) serves a run or a
// session as AG-UI events over SSE (docs/agui.md); each stream reads the
// journal through the runtime's ObserveRun and owns nothing beyond its
// request.
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
// the primitives (wire.go, writer.go, sender.go, conn.go, httpx.go) above
// them; the features (hello.go, watch.go, focus.go, control.go,
// router.go, status.go, presence.go, the HTTP handlers) in the middle; and
// the entry points on top (serve.go and writeloop.go for a socket, api.go
// for the routes, hub.go for New and Shutdown). A method lives with the
// layer it belongs to, not with its type.
//
// Hub methods are safe for concurrent use. Close/Shutdown stop every
// goroutine the hub started and wait for them.
package hub
