package runner

import (
	"context"
	_ "embed"
	"fmt"
	"sync"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/adapter/executor"
)

//go:embed lua/release_lease.lua
var releaseLua string

//go:embed lua/renew_lease.lua
var renewLua string

// releaseScript deletes a lease only when it is still this node's.
var releaseScript = goredis.NewScript(releaseLua)

// leases keeps the leases of the runs a node executes.
type leases struct {
	cfg  Config
	node string
	wake func() // the control listener's set changed

	mu    sync.Mutex
	owned map[string]struct{}
}

// claim takes a run's lease; another node's lease is executor.ErrClaimed.
func (l *leases) claim(ctx context.Context, runID string) error {
	ok, err := l.cfg.Client.SetNX(ctx, l.cfg.lease(runID), l.node, l.cfg.LeaseTTL).Result()
	if err != nil {
		return fmt.Errorf("runner: lease %s: %w", runID, err)
	}
	if !ok {
		return executor.ErrClaimed
	}
	l.mu.Lock()
	l.owned[runID] = struct{}{}
	l.mu.Unlock()
	l.wake()
	return nil
}

// release gives a run's lease back once its terminal event is journaled.
func (l *leases) release(runID string) {
	l.mu.Lock()
	_, mine := l.owned[runID]
	delete(l.owned, runID)
	l.mu.Unlock()
	if !mine {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.ControlTimeout)
	defer cancel()
	releaseScript.Run(ctx, l.cfg.Client, []string{l.cfg.lease(runID)}, l.node)
	l.wake()
}

// owns reports whether this node holds the run's lease.
func (l *leases) owns(runID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.owned[runID]
	return ok
}

// runs returns the runs this node owns.
func (l *leases) runs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.owned))
	for id := range l.owned {
		out = append(out, id)
	}
	return out
}

// renew extends every owned lease that is still this node's and returns
// the owned runs whose lease is not: lapsed (the reaper owns that run's
// end), or taken by another node since (a queued run adopted by another
// runner while this one was cut off from Redis). A plain SET XX would
// have renewed, and so taken back, another node's lease.
func (l *leases) renew(ctx context.Context) (lost []string, err error) {
	runs := l.runs()
	if len(runs) == 0 {
		return nil, nil
	}
	ttl := l.cfg.LeaseTTL.Milliseconds()
	cmds := make([]*goredis.Cmd, len(runs))
	if _, err := l.cfg.Client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range runs {
			// One key per script: the leases' hash tags differ (a Cluster).
			cmds[i] = p.Eval(ctx, renewLua, []string{l.cfg.lease(id)}, l.node, ttl)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	for i, c := range cmds {
		if n, _ := c.Int64(); n != 1 {
			lost = append(lost, runs[i])
		}
	}
	return lost, nil
}
