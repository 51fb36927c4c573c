package hub

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/hub/tabsock"
	"github.com/runhub/runhub/internal/keyedlock"
	"github.com/runhub/runhub/internal/ratelimit"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// The hub's types, at the bottom of the package's files: the Hub, the
// socket (conn) and each part of its state, and the state of the router,
// the status tracker, presence, the senders and the limits. Only the
// types live here, each with the contract of its state; their methods
// live with the feature that owns them (serve.go, conn.go, writer.go,
// writeloop.go, sender.go, focus.go, watch.go, hello.go, router.go,
// status.go, presence.go, limits.go), so the files above use this one and
// it uses none of them but config.go. The socket's transport (the
// handshake, reading and writing frames, the poller) is hub/tabsock.

// Hub serves tabs. Create it with New, serve ServeWS and Routes, stop it
// with Shutdown.
type Hub struct {
	cfg     Config
	store   journal.Store
	runtime adapter.RuntimeAdapter
	log     *slog.Logger

	tracker  *tracker
	router   *router
	presence *presence
	senders  []*sender       // write for the sockets, one per core (sender.go)
	poller   *tabsock.Poller // waits for idle sockets' bytes (nil: none yet, or none), under pollMu
	nextSnd  atomic.Uint32   // the sender the next socket gets, modulo len(senders)
	env      socketEnv       // what its sockets use of it

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the hub owns, sockets included

	mu       sync.Mutex
	conns    map[*conn]struct{}
	sockets  map[string]int // welcomed sockets by subject
	draining bool
	stopOnce sync.Once

	// pollMu guards poller (made by the first socket that can use it:
	// socketPoller) and pollStopped (Shutdown has stopped it).
	pollMu      sync.Mutex
	pollStopped bool

	starts keyedlock.Mutex // serializes run-limit checks per subject
}

// socketEnv is what a socket uses of its hub: made once by New, shared by
// all of the hub's sockets, never changed.
type socketEnv struct {
	cfg      *Config          // the hub's settings
	log      *slog.Logger     // cfg.Logger
	metrics  *metrics.Metrics // cfg.Metrics (nil: not counted)
	store    journal.Store    // the journal: watch, focus, catch-up
	router   *router          // live events of the focused session
	tracker  *tracker         // statuses of the watched sessions
	presence *presence        // who watches and focuses each session
	hub      socketHub
}

// socketHub is what a socket asks of the hub itself.
type socketHub interface {
	// claimSocket takes a slot of subject for the socket; false: none left.
	claimSocket(subject, id string) bool
	// releaseSocket gives the slot back.
	releaseSocket(subject, id string)
	// authenticate verifies a bearer token.
	Authenticate(token string) (Principal, error)
	// Control runs one control for subject.
	Control(ctx context.Context, subject string, m *protocol.Control, key string) (protocol.ControlResult, error)
	// drop forgets a socket that has ended.
	drop(c *conn)
}

// conn is one tab socket. The reader goroutine (serve) decodes and handles
// client messages. What the socket is sent is written by its sender
// (sender.go), one of the hub's goroutines shared by many sockets, which
// never waits on the socket; the socket's writer goroutine, started on
// demand, does what may wait (writeloop.go). Both stop when ctx ends.
//
// Its state is grouped by owner; each group's type states its contract.
// "The reader" is the goroutine that reads and handles a frame (readLoop's,
// or a turn the hub's poller starts: serve.go); they run one at a time, in
// order, and count as one goroutine here.
//
//   - rd (reader): the reader goroutine's alone; no lock.
//   - watches: the sessions watched; the reader's, read by leave once serve
//     has returned; no lock.
//   - auth (authState): hello and the credentials' expiry, which the hello
//     and expiry timers read; under auth.mu.
//   - out (outbox): the outbound queues, the close request and the focus,
//     shared by the reader, the writer, the sender, the router, the tracker
//     and the timers; under out.mu.
//   - sock: the connection (hub/tabsock): reading frames, under its read
//     lock; sending whole frames and the bytes a sender left for the
//     writer, under its send lock ("wire.mu" below), held for a whole
//     frame by the writer, the sender (TryLock only) or whoever writes a
//     control frame.
//   - w (writer): the writer goroutine's lifecycle; an atomic and w.mu.
//   - queued: c is in its sender's ready list; an atomic.
//
// The session the router has the socket in is the router's
// (router.focused), under router.mu. Lock order: auth.mu, out.mu, w.mu
// (greet and failClose look at the close request holding auth.mu; signal
// may start a writer holding out.mu); wire.mu before out.mu (a sender
// takes a frame holding its wire; nobody waits for wire.mu holding
// out.mu); router.mu before out.mu (the router offers events holding it);
// sender.mu is taken holding out.mu (signal) and holds nothing. Nothing
// else is held while taking them.
//
// id, sock, ctx, cancel, snd and socketEnv are set by newConn and never
// change.
// subject is set by the first hello, on the reader, before anything else
// reads it: the reader's calls into presence and tracker, and leave.
type conn struct {
	*socketEnv
	id      string
	subject string
	ctx     context.Context
	cancel  context.CancelFunc

	rd      reader
	watches watches
	auth    authState
	out     outbox
	sock    *tabsock.Conn // nil only in tests' sockets, which write nothing
	w       writer
	snd     *sender // the sender that writes for the socket
	queued  atomic.Bool
}

// reader is the reader goroutine's own state. Nothing else touches it (the
// hello timer's callback reads auth, not this), so it has no lock; leave
// reads claimed once serve has returned.
type reader struct {
	pre     *Principal        // authenticated by the upgrade's Authorization header
	rate    *ratelimit.Bucket // nil: no limit
	helloT  *time.Timer       // closes a socket that sends no hello in time (nil: none)
	admin   bool
	claimed bool // holds a slot of its subject (claimSocket)
	compact bool // hello took protocol.CapCompactReplay
}

// watches is what a socket watches. The reader alone changes and reads it
// (watch, unwatch); leave reads it once serve has returned. It has no lock:
// the tracker and presence keep their own records under their own locks.
type watches struct {
	all bool     // every session of the socket's subject, now and future
	ids []string // sorted; the tracker's copy of each id; presence holds this slice too: replaced, never changed in place
}

// authState is whether the socket has said hello and when its credentials
// expire. The reader sets it on every hello; the hello timer and the
// expiry timer read it to decide whether to close the socket. Each timer
// decides and queues its close holding mu, and greet looks at the close
// request holding mu, so a hello racing a timer either wins or is ignored.
//
// Locking: mu guards every field; the reader, hello's only writer, reads
// hello without it. Lock order: mu before out.mu.
type authState struct {
	mu     sync.Mutex
	hello  bool
	expiry *time.Timer // fires when the credentials expire
	gen    uint64      // bumped on every renewal and by end; a stale timer does nothing
}

// outbox is what a socket has to send, its close request, and the focus
// that decides which events it takes.
//
// Locking: mu guards every field. The reader queues messages, requests
// closes and changes the focus; the socket's sender takes frames (holding
// wire.mu: wire.mu comes first); the writer goroutine takes frames and runs
// catch-up; the router offers events (holding router.mu) and kicks; the
// tracker offers statuses; the hello and expiry timers and Shutdown request
// closes; Stats reads. Whoever queues something then calls signal, which
// may be called with mu held (it may take sender.mu and w.mu: mu comes
// first).
//
// The focus shares mu with the queues on purpose: a focus change voids the
// queued events, offerEvent checks the focus and queues an event, and
// catch-up checks the focus's generation and queues a page, each as one
// step. A lock of its own would put a second lock on the per-event path
// and an order between the two.
type outbox struct {
	mu          sync.Mutex
	msgs        [][]byte     // control results, errors, pongs, welcome
	statuses    *statusQueue // unsent statuses (nil: none; pooled, outbox.go)
	events      [][]byte     // focused events and replay markers, in order
	closing     bool         // a close was requested: only msgs still go out
	closeCode   tabsock.StatusCode
	closeReason string
	focus       focusState // the focus state machine's (focus.go)
	// settled, when not nil, is closed once the focus has read the journal
	// to its end and every event taken from the queue (settle, focus.go).
	settled chan struct{}
	// busy: the socket's writer goroutine took a frame and has not written
	// it yet; a sender takes nothing meanwhile, so frames leave in the
	// order they were taken. limit is the frame size the writer set
	// (nextFrameLimit; 0: MaxBatchBytes), which senders use too.
	busy  bool
	limit int
}

// statusQueue is a socket's unsent statuses, under out.mu; pooled when empty.
type statusQueue struct {
	items []statusFrame // unsent statuses, one per session, in arrival order, from head on (none: dropped)
	head  int
	index map[string]int // sid → its item, once a queue is long (statusIndexFrom); nil until then
}

// focusState is what a socket delivers of its focused session. The
// invariant: the socket has sent every event of the session's runs up to
// (runID, next-1), in order, and accepts only (runID, next) — or seq 1 of a
// later run once runID's terminal event was sent.
//
// It lives in the socket's outbox, under out.mu (see outbox for why).
// setFocus (the reader) replaces it; offerEvent and kick (the router) and
// catchUp (the writer) advance it.
type focusState struct {
	gen           uint64 // bumped on every focus change; stale catch-up reads are discarded
	sid           string // "" = no focus
	runID         string // run being delivered ("" = the session has no run yet)
	next          uint64 // next seq of runID to send
	runDone       bool   // runID's terminal event was sent (or there is no run)
	resolve       bool   // runID must be set to the session's latest run first
	lagging       bool   // live events are ignored until the journal is read
	verify        bool   // one more journal read after catching up closes the race
	replayPending bool   // `replayed` is due when the first catch-up ends
	replayed      int
	slow          bool // lagging because the event queue was full (counted once caught up)
	compact       bool // the socket takes compacted catch-up (see replayFrame)
}

// writer is the lifecycle of a socket's writer goroutine. Senders write
// what a socket is offered as long as that never waits (sender.go); the
// writer runs only for what does: a frame the kernel did not take whole
// (the wire's pending bytes), reading the journal for the focus, the
// close, or a frame the socket's wire was too busy for. It lingers
// writerLinger after its last work, then ends.
//
// Locking: wake is a channel of capacity 1 (a token: the writer has work).
// running is atomic: 1 from the wakeWriter that starts a writer until that
// writer retires, so at most one runs. mu guards stopped and orders
// startWriter's wg.Add before halt's wg.Wait.
type writer struct {
	wake    chan struct{}
	running atomic.Int32
	mu      sync.Mutex
	stopped bool // serve has ended: no writer starts again
	wg      sync.WaitGroup
	loop    func() // the writer goroutine's body (writeLoop), set when the socket is made
}

// sender writes for a group of sockets. A socket offered something (an
// event, a status, a message: signal) is put in its sender's ready list,
// and the sender writes it a frame of what waits; the socket's own writer
// goroutine is not woken. A hub has one sender per core (GOMAXPROCS) and
// gives each socket one in turn; a sender wakes once for all its sockets
// that were offered something meanwhile: a journal commit offers its
// events to many sockets in one go, and a busy sender never sleeps.
//
// A sender never waits on a socket: it takes the socket's wire with
// TryLock and writes one frame with a non-blocking write (TrySend).
// What it cannot do without waiting goes to the socket's writer goroutine
// (writeloop.go): the rest of a frame the kernel did not take whole, a wire
// busy with a write that may be waiting on a slow tab, reading the journal
// for the focus, the close. So a tab that stopped reading holds up only
// its own writer: the sender passes it by, its queue fills and it falls
// behind (offerEvent), as with a writer of its own.
//
// Locking: mu guards ready; nothing is taken while holding it. A socket is
// in ready at most once (conn.queued), so ready holds at most every socket.
type sender struct {
	mu    sync.Mutex
	ready []*conn
	wake  chan struct{}
	quit  chan struct{}
	done  chan struct{}
}

// router tails the runs that sockets focus: one journal subscription per
// focused session (on its latest run), each event encoded once and offered
// to every focusing socket.
//
// Locking: mu guards feeds, focused and refresh. deliver holds mu (read)
// while it offers an event to the sockets, so mu comes before a socket's
// outbox lock; resubscribe kicks sockets after releasing it.
type router struct {
	h        *Hub
	interest journal.Interest // the tracker's: focused sessions are watched (their new runs)

	mu      sync.RWMutex
	feeds   map[string]*sessionFeed // by session id
	focused map[*conn]string        // the session each registered socket is in (feeds[sid].conns)
	refresh map[string]struct{}     // sessions whose tailed run must be re-resolved
	wake    chan struct{}
	quit    chan struct{}
	wg      sync.WaitGroup
}

type sessionFeed struct {
	sid    string
	conns  map[*conn]struct{}
	list   []*conn // conns' sockets, for deliver to range over
	runID  string  // the run tailed
	cancel func()
}

// tracker keeps the SessionStatus of every session some socket watches,
// folded from the journal's feed, and sends each changed status encoded
// once for all watchers: at once when its meaning changed (status, prompt,
// terminal, title, queue, goal, controls, run), and at most once per
// StatusInterval when only its progress did (tokens, last_seq, updated_at,
// progress text, usage).
type tracker struct {
	h *Hub

	mu       sync.Mutex
	sessions map[string]*tracked
	owners   map[string]map[*conn]struct{} // watch-all sockets by owner
	dirty    map[string]*tracked
	loads    map[string]struct{} // sessions to (re)load from the journal
	loadWake chan struct{}
	urgent   chan struct{} // capacity 1: a status whose meaning changed waits

	// flush's scratch, kept between busy flushes (status.go).
	spans     map[*conn]offerSpan
	offers    []statusFrame
	due       []dueStatus
	flushedAt time.Time // when flush last had something to send

	interest journal.Interest // the feed of the sessions watched or focused here
	quit     chan struct{}
	wg       sync.WaitGroup
}

// connSet is a set of sockets sorted by address (connset.go): 8 bytes a
// socket, where a map took ~37.
type connSet []*conn

// tracked is one session's folded status and its watchers.
type tracked struct {
	id, owner string
	state     session.Session
	loaded    bool
	pending   []protocol.Envelope   // feed events that arrived while loading
	overflow  bool                  // pending hit its bound: reload after this load
	unread    bool                  // made from a meta just read (ensure), not loaded yet and not changed since
	watchers  connSet               // watching by id
	fresh     map[*conn]statusFrame // sockets whose snapshot was taken while s was dirty: the frame each has (nil until one is)
	enc       []byte                // the status message without presence, encoded (nil: state changed since; tracked.frame)
	framed    lastFrame             // the last frame made (tracked.frame)
	encCaps   []string              // the capabilities enc's active_controls were narrowed by (a runtime may change them)

	// Cadence (see flush): the meaning of the status last sent, when it
	// was sent, and whether the unsent changes alter its meaning.
	sent       meaning
	sentAt     time.Time
	meaningful bool
}

// has reports whether c was sent frame as its snapshot since the last
// flush of s.
func (s *tracked) has(c *conn, frame statusFrame) bool {
	f, ok := s.fresh[c]
	return ok && f.equal(frame)
}

// meaning is what of a SessionStatus matters to a person: a change to any
// of it is sent at once. The rest (tokens, last_seq, last_event_id,
// updated_at, progress, usage) is progress, sent at most once per
// StatusInterval. active_controls follow from these fields.
type meaning struct {
	title         string
	runID         string
	status        protocol.Status
	terminal      bool
	terminalState protocol.Status
	approval      *protocol.PendingApproval
	clarify       *protocol.PendingClarify
	queueDepth    int
	goal          *protocol.GoalUpdatedPayload
}

// offerSpan is a socket's statuses in a flush: offers[start:start+n];
// dueStatus is a session whose status a flush sends, and its frame.
type offerSpan struct{ start, n int32 }
type dueStatus struct {
	s     *tracked
	frame statusFrame
}

type presence struct {
	h     *Hub
	store PresenceStore

	mu      sync.Mutex
	conns   map[*conn]*connPresence
	local   map[string]pentry   // target → this hub's counts
	dirty   map[string]struct{} // local targets changed since the last flush
	stale   map[string]struct{} // targets to read again (another hub changed them, or unknown yet)
	merged  map[string]pentry   // target → counts over every hub (targets some session here needs)
	pub     map[string]pentry   // target → this hub's entry as last published (the share of it merged holds)
	refresh time.Time           // when every needed target is read again (entries of dead hubs lapse)
	pause   time.Time           // after a store failure, no store call before this

	// io orders the store reads that fill merged (prefetch) after a publish
	// and the update of pub it makes, as one step: a read between the two
	// would see this hub's new entry while pub still says the old one, and
	// current would count the change twice (a status, then its correction).
	// Taken before mu, never while holding it.
	io sync.Mutex

	quit     chan struct{}
	wg       sync.WaitGroup
	unsubscr func()
}

// connPresence is one socket's share; its targets and counts follow (book).
type connPresence struct {
	subject string
	all     bool
	ids     []string // sessions watched by id, sorted: the socket's watches.ids itself, replaced, never changed in place
	foreign []string // those of ids another subject owns, sorted (nil: none)
	focus   string
}

// presenceID is a session a socket watches by id, and its owner.
type presenceID struct{ sid, owner string }

// pentry is a target's counts by subject.
type pentry map[string]pcount

// pcount is one subject's tabs of a target.
type pcount struct {
	W int `json:"w,omitempty"` // watching
	F int `json:"f,omitempty"` // focusing
}
