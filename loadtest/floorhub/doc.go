// Command floorhub is the floor the hub is measured against: a server that
// speaks just enough of protocol v1 for loadtest's centrifugo scenario and
// does nothing else but write each event to the sockets focusing its
// session. It answers hello with welcome, remembers watches, answers focus
// with an empty replayed marker, accepts run starts, cancels and status
// reads over HTTP, and produces for each run one token.delta event every
// token_ms (shaped like the hub's, per-run contiguous seq from 1, created_at
// set when produced), then a terminal done event and one terminal status
// to the session's watchers.
//
// It keeps no journal and replays nothing: a focus joins the focused
// session's current run live. Use it only where the tabs focus before the
// runs start (loadtest -scenario centrifugo), or the generator counts the
// events it joined after as gaps.
//
// Each event is encoded once and written from the run's own goroutine,
// straight to every focusing socket: one WebSocket message, one frame, per
// event and socket, with no queue and no writer goroutine. -write chooses
// how a frame is written:
//
//   - lib: github.com/coder/websocket's Conn.Write (the library the hub
//     uses, with the same context.Background()).
//   - raw: the upgrade is done by hand on the hijacked net.Conn, and a
//     frame (0x81, length, payload: a server frame is not masked) is one
//     net.Conn.Write, one write system call, under a per-socket mutex.
//
// Usage: floorhub [-addr host:port] [-write raw|lib] [serve]. The defaults
// come from RUNHUB_ADDR and FLOORHUB_WRITE, so loadtest spawns it as it
// spawns the hub (loadtest -floor). /readyz answers once listening, and
// /debug/pprof/ is always served (loadtest reads the heap and takes CPU
// profiles there).
//
// Concurrency: one goroutine per socket reads it; one goroutine per run
// produces and writes its events; a socket's writes are serialized by the
// library (lib) or by its mutex (raw). A session's focusing sockets and
// watchers are copy-on-write slices under the session's mutex, so a run
// takes the mutex once per event, not per delivery.
package main
