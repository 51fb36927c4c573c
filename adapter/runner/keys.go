package runner

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Group is the run queue's consumer group.
const Group = "runners"

// Config is shared by every piece of the package.
type Config struct {
	// Client talks to the journal's Redis (required): a *goredis.Client or,
	// on a Redis Cluster, a *goredis.ClusterClient (every command and
	// transaction of the package stays in one slot).
	Client goredis.UniversalClient
	// Prefix must equal the journal's key prefix (default "rh:").
	Prefix string
	// LeaseTTL is how long a lease lives without renewal (default 10 s). A
	// node renews every LeaseTTL/3; a run whose lease lapses is ended as
	// interrupted. Danger: too short interrupts runs on a stalled node.
	LeaseTTL time.Duration
	// ControlTimeout bounds the wait for a control's answer (default 5 s).
	ControlTimeout time.Duration
	// Block bounds one blocking read (default 2 s).
	Block time.Duration
	// StartTimeout bounds how long a begun run may wait for an executor
	// (a runner taking it from the queue) to start it: the reaper ends a
	// run still unstarted and unleased after it with one terminal error
	// no_runner. 0: no bound.
	StartTimeout time.Duration
}

func (c *Config) defaults() {
	if c.Prefix == "" {
		c.Prefix = "rh:"
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 10 * time.Second
	}
	if c.ControlTimeout == 0 {
		c.ControlTimeout = 5 * time.Second
	}
	if c.Block == 0 {
		c.Block = 2 * time.Second
	}
}

func (c *Config) queue() string             { return c.Prefix + "runq" }
func (c *Config) lease(runID string) string { return c.Prefix + "run:{" + runID + "}:lease" }
func (c *Config) reply(id string) string    { return c.Prefix + "reply:" + id }

// inbox is a node's control stream; wake shares its hash tag, so one
// blocking XREAD reads both on a Cluster too.
func (c *Config) inbox(node string) string { return c.Prefix + "node:{" + node + "}:ctl" }
func (c *Config) wake(node string) string  { return c.Prefix + "node:{" + node + "}:wake" }

// serverOf returns the client of the one server that holds key: Client
// itself on a single Redis, the master of key's slot on a Cluster. It is
// for what must stay on one connection of that server (a blocking read
// that CLIENT UNBLOCK may end).
func (c *Config) serverOf(ctx context.Context, key string) (*goredis.Client, error) {
	switch rdb := c.Client.(type) {
	case *goredis.Client:
		return rdb, nil
	case *goredis.ClusterClient:
		return rdb.MasterForKey(ctx, key)
	}
	return nil, errUnsupportedClient
}

// reload makes a Cluster client re-read the slot map soon (after an error
// that may be a failover: the next serverOf finds the new master).
func (c *Config) reload(ctx context.Context) {
	if rdb, ok := c.Client.(*goredis.ClusterClient); ok {
		rdb.ReloadState(ctx)
	}
}

var errUnsupportedClient = errorString("runner: Config.Client must be a *goredis.Client or a *goredis.ClusterClient")

type errorString string

func (e errorString) Error() string { return string(e) }
