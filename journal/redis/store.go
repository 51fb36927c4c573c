package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/internal/retry"
	"github.com/runhub/runhub/journal"
)

// Options configures a Store. The zero value of every field but URL/Client
// means its default.
type Options struct {
	// URL locates the server (redis://, rediss://, unix://…) or a Redis
	// Cluster (redis+cluster://h1:p1,h2:p2…), see NewClient; used when
	// Client is nil. The Store closes the client it makes.
	URL string
	// Client is a client to use instead of URL (a *goredis.Client or a
	// *goredis.ClusterClient); the Store does not close it. While they run,
	// the tails (run and feed) each hold one of its pooled connections in a
	// blocking read: one each on a single Redis, one per shard each on a
	// Cluster (spread over its masters): size PoolSize for that. Danger:
	// with ContextTimeoutEnabled the tails still work, but they rely on
	// bounded reads either way.
	Client goredis.UniversalClient
	// Prefix starts every key. Default "rh:". Stores with the same prefix on
	// the same server share one journal (that is how replicas scale out);
	// different prefixes are fully separate journals.
	Prefix string
	// Shards is the number of hash-tagged shards the journal is split
	// into (see the key layout in doc.go): each has its status feed stream,
	// and a session, its runs and its feed records all live in one shard,
	// chosen by a hash of the session id. On a Redis Cluster the shards are
	// spread evenly over the slot range, so over the masters: use at least
	// a few per master. Default 16, at most 1024. Danger: every store on
	// one prefix must use the same value, or it finds neither the sessions
	// nor the runs of the others.
	Shards int
	// FeedMaxLen bounds each feed shard stream (approximate XADD MAXLEN ~).
	// Default 10000. A feed reader further behind than this (a replica cut
	// off from Redis for long) misses status records and must re-fold the
	// runs it cares about from the journal.
	FeedMaxLen int64
	// FeedInterval, when positive, makes the status feed carry statuses at
	// status rate rather than every event: a delta event
	// (protocol.EventType.IsDelta) goes to the feed only when its run's
	// last feed record is at least this old (by created_at); the others
	// are counted in the run's hash and go with the run's next record, or
	// in a journal.DeltasSkipped record once the run has been quiet for
	// the interval. Every other event (a prompt, a terminal event, a run
	// start, a queue or goal change, …) goes at once. Default 0: every
	// event goes to the feed. The hub sets its status interval.
	FeedInterval time.Duration
	// MaxBatch caps how many appends go to Redis in one script run. Default
	// 128.
	MaxBatch int
	// MaxBatchBytes caps the payload bytes of one batch (a batch always
	// takes at least one append). Default 1 MiB.
	MaxBatchBytes int
	// Flushers is how many batches may be in flight at once, each on its
	// own pooled connection. Default 4.
	Flushers int
	// ReplyCacheTTL is how long the replies of an append batch are kept in
	// Redis (one small string per batch) so that a resend of the batch by
	// go-redis is answered from them instead of journaling again. It must
	// outlast the client's whole retry window. Default: twice
	// (MaxRetries+1) × (ReadTimeout + MaxRetryBackoff) of the client, at
	// least 10s (48s with the go-redis v9.23 defaults: 3 retries, 5s read
	// timeout, 1s backoff): ~25 MB at 40,000 appends/s in batches of 14.
	ReplyCacheTTL time.Duration
	// Block is how long one tail read (XREAD BLOCK) waits for new entries
	// before looping. Default 1s. go-redis cannot interrupt a blocked read,
	// so this bounds how long a tail may take to see Close when its wake-up
	// write fails (Redis down) and how long a run whose last subscriber left
	// stays in the multiplexed read.
	Block time.Duration
	// ReadCount caps the entries one tail read returns per stream. Default
	// 512.
	ReadCount int64
	// WaitReplicas, when positive, makes every append batch wait until that
	// many replicas of its master have it (WAIT WaitReplicas WaitTimeout,
	// on the connection of the script, right after it) before the appends
	// return: an event acknowledged to its writer then survives a
	// failover to one of those replicas. Redis replicates asynchronously
	// otherwise, and a master that dies loses what its replicas had not yet
	// received. Default 0: no WAIT. An append whose batch did not reach
	// WaitReplicas replicas within WaitTimeout returns an error (the event
	// is journaled on the master; a retry with the same idempotency key
	// returns it and waits again).
	WaitReplicas int
	// WaitTimeout bounds WaitReplicas' wait. Default 1s.
	WaitTimeout time.Duration
	// Timeout bounds the Redis calls the Store makes on its own behalf
	// (SubscribeRun's position lookup, wake-ups, Close). Default 5s.
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound a tail's delay between reconnection
	// attempts after a Redis error; it doubles from MinBackoff (default
	// 50ms) up to MaxBackoff (default 2s).
	MinBackoff, MaxBackoff time.Duration
	// Now is the clock that fills created_at when it is zero. Default
	// time.Now.
	Now func() time.Time
	// Logger receives tail errors and reconnections. Default slog.Default().
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.Prefix == "" {
		o.Prefix = "rh:"
	}
	if o.Shards <= 0 {
		o.Shards = 16
	}
	if o.FeedMaxLen <= 0 {
		o.FeedMaxLen = 10000
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 128
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = 1 << 20
	}
	if o.Flushers <= 0 {
		o.Flushers = 4
	}
	if o.Block <= 0 {
		o.Block = time.Second
	}
	if o.ReadCount <= 0 {
		o.ReadCount = 512
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(2*time.Second, o.MinBackoff)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Store is the Redis Streams journal. Its methods are safe for concurrent
// use.
type Store struct {
	opts      Options
	rdb       goredis.UniversalClient
	ownClient bool
	cluster   bool // rdb is a Redis Cluster: every command stays in one slot
	k         keyspace
	token     string // names this Store's wake streams
	locs      locCache

	ctx    context.Context // cancelled by Close; stops the tails
	cancel context.CancelFunc
	wg     sync.WaitGroup // the tails

	mu     sync.Mutex // guards closed transitions and tail starts
	closed atomic.Bool

	batch batcher
	runs  runTail
	feed  feedTail
	marks marker // the deltas left out of the feed (FeedInterval)
	reads readStats

	streams streamNotifier // durable streams' notify channel (streams.go)
}

var _ journal.Store = (*Store)(nil)

// Open connects to Redis, checks it answers and loads the scripts.
func Open(ctx context.Context, opts Options) (*Store, error) {
	opts.setDefaults()
	k, err := newKeyspace(opts.Prefix, opts.Shards)
	if err != nil {
		return nil, err
	}
	s := &Store{opts: opts, k: k, token: newToken()}
	s.locs.init()
	if opts.Client != nil {
		s.rdb = opts.Client
	} else {
		if opts.URL == "" {
			return nil, errors.New("journal/redis: Options needs URL or Client")
		}
		rdb, err := NewClient(opts.URL)
		if err != nil {
			return nil, fmt.Errorf("journal/redis: %w", err)
		}
		s.rdb, s.ownClient = rdb, true
	}
	_, s.cluster = s.rdb.(*goredis.ClusterClient)
	if s.opts.ReplyCacheTTL <= 0 {
		s.opts.ReplyCacheTTL = retryWindow(clientTimings(s.rdb))
	}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		s.closeClient()
		return nil, fmt.Errorf("journal/redis: ping: %w", err)
	}
	for _, sc := range allScripts {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			s.closeClient()
			return nil, fmt.Errorf("journal/redis: loading scripts: %w", err)
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.batch.start(s)
	s.runs.init(s)
	s.feed.init(s)
	s.marks.start(s)
	return s, nil
}

// retryWindow is the default ReplyCacheTTL for a client.
func retryWindow(read time.Duration, retries int, backoff time.Duration) time.Duration {
	if read <= 0 {
		read = 3 * time.Second
	}
	retries = max(retries, 0)
	return max(10*time.Second, 2*time.Duration(retries+1)*(read+max(backoff, 0)))
}

// Client returns the go-redis client the Store uses.
func (s *Store) Client() goredis.UniversalClient { return s.rdb }

// groups is the number of groups of shards one command may span: one per
// shard on a Cluster (a multi-key command must stay in one slot), a single
// group on one Redis.
func (s *Store) groups() int {
	if s.cluster {
		return s.k.shards()
	}
	return 1
}

// groupOf is the group of shard n.
func (s *Store) groupOf(n int) int {
	if s.cluster {
		return n
	}
	return 0
}

// inGroup reports whether shard n is in group g.
func (s *Store) inGroup(n, g int) bool { return s.groupOf(n) == g }

// wakeKey is this Store's wake stream of group g (in the group's first
// shard, so that it shares the slot of what the group's readers read).
func (s *Store) wakeKey(g int) string { return s.k.wake(g, s.token) }

// Close journals the appends already queued, stops both tails, waits for
// them, removes this Store's wake stream and closes the client if the Store
// made it. Calls after the first return nil.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil
	}
	s.closed.Store(true)
	s.mu.Unlock()
	s.batch.close()
	s.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	groups := s.runs.startedGroups()
	for g := range s.feed.startedGroups() {
		groups[g] = true
	}
	for g := range groups {
		s.wake(ctx, g) // the tails read the wake streams: they return at once
	}
	s.wg.Wait()
	for g := range groups {
		_ = s.rdb.Del(ctx, s.wakeKey(g)).Err()
	}
	s.closeClient()
	return nil
}

func (s *Store) closeClient() {
	if s.ownClient {
		_ = s.rdb.Close()
	}
}

// goTail starts a tail goroutine unless the store is closed.
func (s *Store) goTail(loop func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		loop()
	}()
	return true
}

// wake appends to group g's wake stream so that its blocked tail readers
// return and re-read their key sets.
func (s *Store) wake(ctx context.Context, g int) {
	key := s.wakeKey(g)
	pipe := s.rdb.Pipeline()
	pipe.XAdd(ctx, &goredis.XAddArgs{Stream: key, MaxLen: 16, Approx: true, Values: []any{"w", "1"}})
	pipe.Expire(ctx, key, 24*time.Hour)
	if _, err := pipe.Exec(ctx); err != nil && !s.closed.Load() {
		s.opts.Logger.Warn("journal/redis: wake", "err", err)
	}
}

// check returns ErrClosed once the store is closed.
func (s *Store) check() error {
	if s.closed.Load() {
		return journal.ErrClosed
	}
	return nil
}

// fail maps a client error: ErrClosed when the store (or its client) closed.
func (s *Store) fail(op string, err error) error {
	if errors.Is(err, goredis.ErrClosed) || s.closed.Load() {
		return fmt.Errorf("journal/redis: %s: %w", op, journal.ErrClosed)
	}
	return fmt.Errorf("journal/redis: %s: %w", op, err)
}

// newToken returns a random attempt token for a keyless append.
func newToken() string {
	return strconv.FormatUint(rand.Uint64(), 36)
}

// formatTime renders a created_at value so that it parses back exactly.
func formatTime(ts float64) string {
	return strconv.FormatFloat(ts, 'f', -1, 64)
}

// tailReader is one tail goroutine's dedicated connection for XREAD BLOCK
// (on a Cluster, to the master of the slot it reads), reconnected with
// backoff after a failed read. Only its goroutine uses it.
type tailReader struct {
	s    *Store
	what string // for the log: "feed tail", "run tail"

	records, bytes *atomic.Uint64 // what it read (Store.ReadStats)
	conn           *goredis.Conn
	bo             backoff
}

func newTailReader(s *Store, what string, records, bytes *atomic.Uint64) *tailReader {
	return &tailReader{s: s, what: what, records: records, bytes: bytes, bo: backoff{sched: retry.Backoff{Min: s.opts.MinBackoff, Max: s.opts.MaxBackoff}}}
}

// read blocks in one XREAD of streams (keys, then ids; on a Cluster all in
// one slot) for at most Options.Block. After a failed read it drops the
// connection and waits out the backoff, returning no streams; ok is false
// once the Store is closing.
func (r *tailReader) read(streams []string) (res []goredis.XStream, ok bool) {
	s := r.s
	var err error
	if r.conn == nil {
		var server *goredis.Client
		if server, err = serverOf(s.ctx, s.rdb, streams[0]); err == nil {
			r.conn = server.Conn()
		}
	}
	if err == nil {
		res, err = r.conn.XRead(s.ctx, &goredis.XReadArgs{Streams: streams, Count: s.opts.ReadCount, Block: s.opts.Block}).Result()
	}
	if err != nil && !errors.Is(err, goredis.Nil) {
		if s.ctx.Err() != nil {
			return nil, false
		}
		s.opts.Logger.Warn("journal/redis: "+r.what+": read failed; reconnecting", "err", err)
		r.close()
		if c, ok := s.rdb.(*goredis.ClusterClient); ok {
			c.ReloadState(s.ctx) // a failover may have moved the slot
		}
		return nil, r.bo.wait(s.ctx)
	}
	r.bo.reset()
	for _, st := range res {
		countMessages(r.records, r.bytes, st.Messages)
	}
	return res, true
}

// close releases the connection.
func (r *tailReader) close() {
	if r.conn != nil {
		_ = r.conn.Close()
		r.conn = nil
	}
}

// backoff is a tail's reconnection delay: the schedule and the failures
// in a row.
type backoff struct {
	sched retry.Backoff
	fails int
}

func (b *backoff) reset() { b.fails = 0 }

// wait sleeps the next delay; false when ctx ends first.
func (b *backoff) wait(ctx context.Context) bool {
	b.fails++
	return b.sched.Sleep(ctx, b.fails)
}
