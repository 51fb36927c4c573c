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
// It replays nothing: a focus joins the focused session's current run
// live. Use it only where the tabs focus before the runs start (loadtest
// -scenario centrifugo), or the generator counts the events it joined
// after as gaps.
//
// It keeps no journal unless -journal DIR is given: then every event
// message (token events and the terminal one; statuses are not journaled)
// is appended to DIR/floor.log (DIR made 0700, the file 0600) before it is
// written to any socket, back to back with nothing around it. One
// committer goroutine does the appending: it takes a request, then every
// request already queued (at most 1000), appends them all with one write,
// then one fdatasync, and answers them; the run's goroutine waits for the
// answer, and skips sending an event whose write or fdatasync failed (the
// first failure is told on stderr). Batches form from what queued during
// the previous commit, with no timer: the hub's embedded journal's group
// commit by default, with nothing else around it.
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
// Usage: floorhub [-addr host:port] [-write raw|lib] [-journal DIR]
// [serve]. The defaults come from RUNHUB_ADDR, FLOORHUB_WRITE and
// FLOORHUB_JOURNAL, so loadtest spawns it as it spawns the hub (loadtest
// -floor; -floor-journal sets FLOORHUB_JOURNAL to the hub's data
// directory). /readyz answers once listening, and
// /debug/pprof/ is always served (loadtest reads the heap and takes CPU
// profiles there).
//
// Concurrency: one goroutine per socket reads it; one goroutine per run
// produces and writes its events; a socket's writes are serialized by the
// library (lib) or by its mutex (raw); with -journal, one goroutine
// commits the runs' events. A session's focusing sockets and
// watchers are copy-on-write slices under the session's mutex, so a run
// takes the mutex once per event, not per delivery.
package main
