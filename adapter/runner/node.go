package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/internal/retry"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// NodeOptions configure a Node.
type NodeOptions struct {
	Config
	// ID names the node in leases (default: a new id). Must be unique.
	ID string
	// Consume makes the node take runs from the run queue (a runner).
	Consume bool
	// MaxRuns bounds the runs a consuming node executes at once (default 100).
	MaxRuns int
	// ReapEvery is how often the node looks for runs whose lease lapsed
	// (default LeaseTTL/2).
	ReapEvery time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Node is an executing process's part: it keeps the leases of the runs its
// executor runs, answers their controls, reaps runs whose executor is gone
// and, when Consume is set, takes runs from the queue.
type Node struct {
	opts  NodeOptions
	store journal.Store
	exec  *executor.InProcess
	lease *leases
	log   *slog.Logger
	wakeC chan struct{}

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	stopQ     chan struct{} // closed to stop consuming (graceful shutdown)
	qOnce     sync.Once
	qConn     atomic.Pointer[queueConn] // the queue read's connection (nil: none)
	inboxFrom string                    // the id the control listener reads its inbox after
}

// queueConn is the connection of a runner's queue read: the server it is
// on and its CLIENT ID.
type queueConn struct {
	server *goredis.Client
	id     int64
}

// NewNode prepares a node. Build the executor with the node's hooks, and
// the hub's router with the node's Controls:
//
//	n := runner.NewNode(store, opts)
//	exec := executor.New(store, executor.Options{Claim: n.Claim, Release: n.Release, …})
//	rt := adapter.NewRouter(store, exec, runner.NewControls(opts.Config))
//	n.Start(exec)
func NewNode(store journal.Store, opts NodeOptions) *Node {
	opts.Config.defaults()
	if opts.ID == "" {
		opts.ID = adapter.NewID("n_")
	}
	if opts.MaxRuns == 0 {
		opts.MaxRuns = 100
	}
	if opts.ReapEvery == 0 {
		opts.ReapEvery = opts.LeaseTTL / 2
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	n := &Node{opts: opts, store: store, log: opts.Logger, wakeC: make(chan struct{}, 1), stopQ: make(chan struct{})}
	n.lease = &leases{cfg: opts.Config, node: opts.ID, owned: map[string]struct{}{}, wake: n.wake}
	return n
}

// ID returns the node's id.
func (n *Node) ID() string { return n.opts.ID }

// Claim is the executor's executor.Options.Claim: it takes the run's lease.
func (n *Node) Claim(ctx context.Context, runID string) error { return n.lease.claim(ctx, runID) }

// Release is the executor's executor.Options.Release.
func (n *Node) Release(runID string) { n.lease.release(runID) }

// Owned returns the runs whose lease this node holds.
func (n *Node) Owned() []string { return n.lease.runs() }

func (n *Node) wake() {
	select {
	case n.wakeC <- struct{}{}:
	default:
	}
	// A listener blocked in XREAD wakes through its wake stream.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	key := n.opts.wake(n.opts.ID)
	n.opts.Client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.XAdd(ctx, &goredis.XAddArgs{Stream: key, MaxLen: 10, Approx: true, Values: []any{"w", "1"}})
		p.Expire(ctx, key, 24*time.Hour) // Stop deletes it; a killed node's expires
		return nil
	})
}

// Start runs the node's loops for exec until Stop.
func (n *Node) Start(exec *executor.InProcess) {
	n.exec = exec
	n.inboxFrom = n.inboxHead() // before any lease: no control is missed
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	loops := []func(context.Context){n.renewLoop, n.listenLoop, n.reapLoop}
	if n.opts.Consume {
		loops = append(loops, n.consumeLoop, n.heartbeatLoop)
	}
	for _, loop := range loops {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			loop(ctx)
		}()
	}
}

// StopConsuming stops taking runs from the queue; runs already taken go on.
// A queue read in progress is unblocked; what it returns anyway is handed
// back to the queue.
func (n *Node) StopConsuming() {
	n.qOnce.Do(func() {
		close(n.stopQ)
		if qc := n.qConn.Load(); qc != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			qc.server.ClientUnblock(ctx, qc.id)
		}
	})
}

// Stop ends every loop and waits. Stop the executor first (its runs end
// and release their leases), then the node.
func (n *Node) Stop() {
	n.StopConsuming()
	if n.cancel != nil {
		n.cancel()
		n.wake() // the control listener's blocked read returns at once
	}
	n.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n.opts.Client.Del(ctx, n.opts.wake(n.opts.ID), n.opts.inbox(n.opts.ID))
}

// redisBackoff is the pause after the n-th Redis error in a row: 100-150
// ms, doubling up to 3.2-4.8 s.
var redisBackoff = retry.Backoff{Min: 150 * time.Millisecond, Max: 4800 * time.Millisecond, Jitter: 1.0 / 3}

// backoff sleeps a jittered, growing pause after a Redis error; false when
// ctx ended.
func backoff(ctx context.Context, attempt int) bool {
	return redisBackoff.Sleep(ctx, attempt)
}

// renewLoop renews the node's leases every LeaseTTL/3; after a failure
// (Redis unreachable) it tries again every LeaseTTL/40 (at most 250 ms), so
// the leases are back as soon as Redis is, not up to a period later.
func (n *Node) renewLoop(ctx context.Context) {
	every := n.opts.LeaseTTL / 3
	retry := min(n.opts.LeaseTTL/40, 250*time.Millisecond)
	t := time.NewTimer(every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lost, err := n.lease.renew(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				n.log.Warn("runner: renew leases; retrying", "node", n.opts.ID, "err", err)
			}
			failing = true
			t.Reset(retry)
		default:
			if failing {
				n.log.Info("runner: leases renewed again", "node", n.opts.ID)
			}
			failing = false
			t.Reset(every)
		}
		// A lease that lapsed (the node stalled, or was cut off from Redis,
		// for longer than the TTL) means the run is reaped as interrupted:
		// it must not go on executing here.
		for _, id := range lost {
			if n.exec.Abandon(id) {
				n.log.Warn("runner: lost the lease of a run executing here; stopping it", "node", n.opts.ID, "run_id", id)
			}
		}
	}
}

// inboxHead returns the id of the newest entry of the node's inbox, so the
// listener answers only controls sent from now on (not those a previous
// process with this id left); without Redis, the current time.
func (n *Node) inboxHead() string {
	ctx, cancel := context.WithTimeout(context.Background(), n.opts.ControlTimeout)
	defer cancel()
	msgs, err := n.opts.Client.XRevRangeN(ctx, n.opts.inbox(n.opts.ID), "+", "-", 1).Result()
	switch {
	case err != nil:
		return strconv.FormatInt(time.Now().UnixMilli(), 10) + "-0"
	case len(msgs) == 0:
		return "0-0"
	}
	return msgs[0].ID
}

// listenLoop reads the node's inbox (the controls of its runs) and wake
// stream in one blocking XREAD and answers each control of a run it owns.
func (n *Node) listenLoop(ctx context.Context) {
	inbox, wakeKey := n.opts.inbox(n.opts.ID), n.opts.wake(n.opts.ID)
	inboxID, wakeID := n.inboxFrom, "$"
	fails := 0
	for ctx.Err() == nil {
		streams := []string{inbox, wakeKey, inboxID, wakeID}
		res, err := n.opts.Client.XRead(ctx, &goredis.XReadArgs{Streams: streams, Block: n.opts.Block, Count: 64}).Result()
		if errors.Is(err, goredis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fails++
			n.log.Warn("runner: read controls", "node", n.opts.ID, "err", err)
			if !backoff(ctx, fails) {
				return
			}
			continue
		}
		fails = 0
		for _, st := range res {
			if st.Stream == wakeKey {
				if len(st.Messages) > 0 {
					wakeID = st.Messages[len(st.Messages)-1].ID
				}
				continue
			}
			for _, m := range st.Messages {
				inboxID = m.ID
				runID, _ := m.Values["run"].(string)
				if n.lease.owns(runID) {
					n.answer(ctx, runID, m)
				}
				// Else the run ended here (or was never this node's): the
				// caller finds no lease and handles the control itself.
			}
		}
	}
}

// answer executes one control on the local executor and pushes its result.
// The entry carries the run's meta as the sender read it: the node reads
// none. The control came from another process, so it goes to the
// executor's local-only Control, never back out; a run this node leases but does not
// execute (between its claim and start, or its end and the lease's
// release) is answered as no executor's (adapter.Unowned).
func (n *Node) answer(ctx context.Context, runID string, m goredis.XMessage) {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	reply := str("reply")
	if reply == "" {
		return
	}
	var ce controlEntry
	err := json.Unmarshal([]byte(str("control")), &ce)
	switch {
	case err != nil:
	case ce.Run.ID != runID:
		err = fmt.Errorf("runner: a control for %s names run %q", runID, ce.Run.ID)
	case !ce.Control.OfRun():
		// Only a run's controls travel to its executor; a session's are
		// answered where they were sent.
		err = fmt.Errorf("runner: control %q of run %s is no control of a run", ce.Control.Op, runID)
	}
	var res protocol.ControlResult
	if err == nil {
		executing := false
		if !ce.Run.Terminal {
			res, executing, err = n.exec.Control(ctx, ce.Run, ce.Control)
		}
		if !executing && err == nil {
			res, err = adapter.Unowned(ctx, n.store, ce.Run, ce.Control)
		}
	}
	var body []byte
	if err != nil {
		var pe *protocol.Error
		switch {
		case errors.As(err, &pe):
		case journal.Unavailable(err):
			// A journal outage (a failover, WAIT short of replicas)
			// passes: the caller answers unavailable, retry.
			n.log.Warn("runner: control failed: journal unavailable", "run_id", runID, "err", err)
			pe = protocol.Errorf(protocol.CodeUnavailable, "the journal is unavailable; try again shortly")
		default:
			n.log.Warn("runner: control failed", "run_id", runID, "err", err)
			pe = protocol.Errorf(protocol.CodeInternal, "the control failed")
		}
		body, _ = json.Marshal(struct {
			Error *protocol.Error `json:"error"`
		}{pe})
	} else {
		body, _ = json.Marshal(res)
	}
	_, perr := n.opts.Client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.RPush(ctx, reply, body)
		p.Expire(ctx, reply, time.Minute)
		return nil
	})
	if perr != nil {
		n.log.Warn("runner: answer control", "run_id", runID, "err", perr)
	}
}

// reapLoop ends runs whose executor is gone: started (last_seq > 0), not
// ended, and without a lease; and runs no executor started within
// StartTimeout. Every node does it; the journal's
// single-terminal rule and the idempotency key make it exactly once.
func (n *Node) reapLoop(ctx context.Context) {
	t := time.NewTicker(n.opts.ReapEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		runs, err := n.store.ActiveRuns(ctx)
		if err != nil {
			if ctx.Err() == nil {
				n.log.Warn("runner: reap", "node", n.opts.ID, "err", err)
			}
			continue
		}
		runs = n.resumeStranded(ctx, runs)
		reaped, err := reap(ctx, n.store, n.opts.Config, runs)
		if err != nil && ctx.Err() == nil {
			n.log.Warn("runner: reap", "node", n.opts.ID, "err", err)
		}
		// What was queued behind a reaped run goes on, as after any end
		// (the one process whose interrupt landed does it).
		for _, r := range reaped {
			n.exec.Drain(ctx, r.SessionID)
		}
		// And so does every idle session that still has queued messages
		// (its process stopped between a run's end and the next start).
		if _, err := n.exec.DrainIdle(ctx); err != nil && ctx.Err() == nil {
			n.log.Warn("runner: drain idle queues", "node", n.opts.ID, "err", err)
		}
	}
}

// resumeStranded starts here, when this node executes runs, the runs the
// runtime made from a queued message (or a goal) that were registered at
// least a lease TTL ago, never started and hold no lease: the process that
// registered them stopped before starting them (or before dispatching
// them). Adopt's lease claim makes each start exactly once. It returns
// runs without those it started.
func (n *Node) resumeStranded(ctx context.Context, runs []journal.RunMeta) []journal.RunMeta {
	if n.exec.Dispatching() && !n.opts.Consume {
		return runs // a dispatching hub: the runners' reapers start them
	}
	now := time.Now()
	rest := runs[:0:0]
	for _, r := range runs {
		if !executor.Stranded(r, now, n.opts.LeaseTTL) || n.exec.Live() >= n.opts.MaxRuns {
			rest = append(rest, r)
			continue
		}
		leased, err := n.opts.Client.Exists(ctx, n.opts.lease(r.ID)).Result()
		if err != nil || leased > 0 {
			rest = append(rest, r)
			continue
		}
		if err := n.exec.ResumeStranded(ctx, r); err != nil && !errors.Is(err, executor.ErrClaimed) {
			n.log.Warn("runner: start a stranded queued run", "run_id", r.ID, "err", err)
			rest = append(rest, r)
		}
	}
	return rest
}

// Reap ends every started run whose lease has lapsed with one terminal
// error "interrupted" carrying its last journaled seq, and every run that
// no executor started within cfg.StartTimeout (queued for runners that
// never took it) with one terminal error "no_runner"; it returns the runs
// it ended (those another process ended first are not among them).
func Reap(ctx context.Context, store journal.Store, cfg Config) ([]journal.RunMeta, error) {
	cfg.defaults()
	runs, err := store.ActiveRuns(ctx)
	if err != nil {
		return nil, err
	}
	return reap(ctx, store, cfg, runs)
}

// reap is Reap of the active runs listed.
func reap(ctx context.Context, store journal.Store, cfg Config, runs []journal.RunMeta) ([]journal.RunMeta, error) {
	now := time.Now()
	due := runs[:0]
	for _, r := range runs {
		if r.LastSeq > 0 || cfg.StartTimeout > 0 && now.Sub(protocol.Time(r.CreatedAt)) > cfg.StartTimeout {
			due = append(due, r)
		}
	}
	if len(due) == 0 {
		return nil, nil
	}
	exists := make([]*goredis.IntCmd, len(due))
	if _, err := cfg.Client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, r := range due {
			exists[i] = p.Exists(ctx, cfg.lease(r.ID))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var reaped []journal.RunMeta
	for i, r := range due {
		if exists[i].Val() > 0 {
			continue
		}
		meta, err := store.Run(ctx, r.ID) // the freshest last_seq
		if err != nil || meta.Terminal {
			continue
		}
		payload := protocol.ErrorPayload{Code: protocol.ErrorInterrupted,
			Message: "the run's executor stopped renewing its lease", Terminal: true, LastSeq: meta.LastSeq}
		key := r.ID + "/interrupted"
		if meta.LastSeq == 0 {
			payload = protocol.ErrorPayload{Code: protocol.ErrorNoRunner, Terminal: true,
				Message: fmt.Sprintf("no runner started the run within %v of its start; is a hub runner process running and free?", cfg.StartTimeout)}
			key = r.ID + "/no-runner"
		}
		e, err := protocol.NewEvent(r.ID, r.SessionID, protocol.EventError, payload)
		if err != nil {
			return reaped, err
		}
		if _, err := store.Append(ctx, e, key); err == nil {
			reaped = append(reaped, meta)
		} else if !errors.Is(err, journal.ErrTerminal) {
			return reaped, err
		}
	}
	return reaped, nil
}
