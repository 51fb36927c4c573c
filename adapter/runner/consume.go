package runner

import (
	"context"
	"errors"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/journal"
)

// claimIdle is how long a taken but unacknowledged queue entry waits
// before another runner claims it (its runner died before starting it).
const claimIdle = 30 * time.Second

// consumeLoop takes runs from the queue while the node has room.
func (n *Node) consumeLoop(ctx context.Context) {
	rdb := n.opts.Client
	if err := rdb.XGroupCreateMkStream(ctx, n.opts.queue(), Group, "0").Err(); err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		n.log.Warn("runner: create queue group", "err", err)
	}
	fails := 0
	lastClaim := time.Time{}
	var conn *goredis.Conn // dedicated, so StopConsuming can unblock its read
	defer func() {
		if conn != nil {
			n.qConn.Store(nil)
			conn.Close()
		}
	}()
	for {
		if n.stopping(ctx) {
			return
		}
		if n.exec.Live() >= n.opts.MaxRuns {
			select {
			case <-ctx.Done():
				return
			case <-n.stopQ:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		var msgs []goredis.XMessage
		var err error
		if time.Since(lastClaim) > claimIdle/2 {
			lastClaim = time.Now()
			msgs, _, err = rdb.XAutoClaim(ctx, &goredis.XAutoClaimArgs{Stream: n.opts.queue(), Group: Group,
				Consumer: n.opts.ID, MinIdle: claimIdle, Start: "0-0", Count: 8}).Result()
		}
		if err == nil && len(msgs) == 0 && conn == nil {
			// On the server of the queue's slot (a Cluster's master), so
			// that CLIENT UNBLOCK reaches the read.
			var server *goredis.Client
			if server, err = n.opts.serverOf(ctx, n.opts.queue()); err == nil {
				conn = server.Conn()
				var id int64
				if id, err = conn.ClientID(ctx).Result(); err == nil {
					n.qConn.Store(&queueConn{server: server, id: id})
				}
			}
		}
		if err == nil && len(msgs) == 0 && !n.stopping(ctx) {
			var res []goredis.XStream
			res, err = conn.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: Group, Consumer: n.opts.ID,
				Streams: []string{n.opts.queue(), ">"}, Count: 1, Block: n.opts.Block}).Result()
			for _, st := range res {
				msgs = append(msgs, st.Messages...)
			}
		}
		if errors.Is(err, goredis.Nil) {
			continue
		}
		if err != nil {
			if conn != nil {
				n.qConn.Store(nil)
				conn.Close()
				conn = nil
			}
			n.opts.reload(ctx)
			if ctx.Err() != nil {
				return
			}
			fails++
			n.log.Warn("runner: read run queue", "node", n.opts.ID, "err", err)
			if strings.Contains(err.Error(), "NOGROUP") {
				rdb.XGroupCreateMkStream(ctx, n.opts.queue(), Group, "0")
			}
			if !backoff(ctx, fails) {
				return
			}
			continue
		}
		fails = 0
		for i, m := range msgs {
			if n.stopping(ctx) {
				// Read while stopping (a blocked read returns what arrived
				// meanwhile): not this node's to start.
				n.handBack(msgs[i:])
				return
			}
			n.take(ctx, m)
		}
	}
}

// stopping reports whether the node has stopped consuming.
func (n *Node) stopping(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	case <-n.stopQ:
		return true
	default:
		return false
	}
}

// handBack returns queue entries this node took but will not start (it is
// stopping): each is queued again for the other runners and dropped from
// this consumer's pending entries, so the run neither waits claimIdle for
// another runner nor starts here only to be interrupted.
func (n *Node) handBack(msgs []goredis.XMessage) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	q := n.opts.queue()
	_, err := n.opts.Client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		for _, m := range msgs {
			p.XAdd(ctx, &goredis.XAddArgs{Stream: q, MaxLen: maxQueueLen, Approx: true, Values: m.Values})
			p.XAck(ctx, q, Group, m.ID)
			p.XDel(ctx, q, m.ID)
		}
		return nil
	})
	if err != nil {
		n.log.Warn("runner: hand back queued runs; another runner claims them later", "node", n.opts.ID, "runs", len(msgs), "err", err)
		return
	}
	n.log.Info("runner: stopping; handed queued runs back", "node", n.opts.ID, "runs", len(msgs))
}

// take starts one queued run here (unless it is gone, ended, or someone
// else's) and acknowledges the entry.
// An entry whose start failed for a passing reason (Redis unreachable) stays
// unacknowledged, so it is claimed again later.
func (n *Node) take(ctx context.Context, m goredis.XMessage) {
	ack := func() {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		n.opts.Client.XAck(actx, n.opts.queue(), Group, m.ID)
		n.opts.Client.XDel(actx, n.opts.queue(), m.ID)
	}
	runID, _ := m.Values["run"].(string)
	if runID == "" {
		ack()
		return
	}
	meta, err := n.store.Run(ctx, runID)
	if errors.Is(err, journal.ErrNotFound) {
		ack()
		return
	}
	if err != nil {
		if n.stopping(ctx) {
			n.handBack([]goredis.XMessage{m})
			return
		}
		n.log.Warn("runner: load queued run", "run_id", runID, "err", err)
		return
	}
	err = n.exec.Adopt(ctx, meta)
	if err == nil || errors.Is(err, executor.ErrClaimed) {
		ack()
		return
	}
	if errors.Is(err, adapter.ErrClosed) {
		n.handBack([]goredis.XMessage{m}) // the executor is shutting down
		return
	}
	n.log.Warn("runner: start queued run", "run_id", runID, "err", err)
	if after, rerr := n.store.Run(ctx, runID); rerr == nil && after.Terminal {
		ack() // the failure ended it
	}
}
