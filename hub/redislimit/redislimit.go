package redislimit

import (
	"context"
	_ "embed"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/internal/redisclaims"
)

// DefaultTTL is how long a claim outlives its hub's last renewal.
const DefaultTTL = 30 * time.Second

// Options configures a Counter (the options every store of claims takes).
type Options = redisclaims.Options

// Counter is one hub's view of the shared socket counts.
type Counter struct {
	rdb  goredis.UniversalClient
	opts Options

	mu   sync.Mutex
	mine map[string]map[string]struct{} // subject → ids of this hub's claimed sockets

	renewer *redisclaims.Renewer
}

//go:embed lua/claim.lua
var claimLua string

// claimScript drops lapsed claims, refuses one past the limit (ARGV[3] > 0)
// and adds the socket. KEYS[1] the subject's set; ARGV[1] id, ARGV[2] TTL
// in ms, ARGV[3] limit. Replies 1 (claimed) or 0 (refused).
var claimScript = redisclaims.Script(claimLua)

//go:embed lua/renew.lua
var renewLua string

// renewScript moves the lapse of the given claims (ARGV[2..]) TTL (ARGV[1]
// ms) ahead. XX: a claim released meanwhile is not brought back.
var renewScript = redisclaims.Script(renewLua)

// New returns a Counter on rdb (a single Redis or a Cluster: every command
// touches one key) and starts its renewal; Close stops it.
func New(rdb goredis.UniversalClient, opts Options) *Counter {
	opts.Prefix, opts.TTL, opts.Logger = redisclaims.Defaults(opts.Prefix, opts.TTL, DefaultTTL, opts.Logger)
	c := &Counter{rdb: rdb, opts: opts, mine: map[string]map[string]struct{}{}}
	c.renewer = redisclaims.StartRenewer(opts.TTL, c.renew)
	return c
}

func (c *Counter) key(subject string) string { return c.opts.Prefix + "sockets:{" + subject + "}" }

// Claim counts socket id of subject unless the subject already has limit
// live sockets over all hubs (limit ≤ 0: no bound); it reports whether it
// did. An error leaves nothing counted.
func (c *Counter) Claim(ctx context.Context, subject, id string, limit int) (bool, error) {
	ok, err := claimScript.Run(ctx, c.rdb, []string{c.key(subject)}, id, c.opts.TTL.Milliseconds(), limit).Int()
	if err != nil || ok != 1 {
		return false, err
	}
	c.mu.Lock()
	ids := c.mine[subject]
	if ids == nil {
		ids = map[string]struct{}{}
		c.mine[subject] = ids
	}
	ids[id] = struct{}{}
	c.mu.Unlock()
	return true, nil
}

// Release uncounts socket id of subject. Should Redis not answer, the
// claim lapses after TTL: it is no longer renewed.
func (c *Counter) Release(subject, id string) {
	c.mu.Lock()
	if ids := c.mine[subject]; ids != nil {
		delete(ids, id)
		if len(ids) == 0 {
			delete(c.mine, subject)
		}
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.rdb.ZRem(ctx, c.key(subject), id).Err(); err != nil {
		c.opts.Logger.Warn("redislimit: release a socket claim; it lapses on its own", "err", err)
	}
}

// renew moves the lapse of this hub's claims TTL ahead (every TTL/3).
func (c *Counter) renew(ctx context.Context) {
	c.mu.Lock()
	batch := make(map[string][]any, len(c.mine))
	for subject, ids := range c.mine {
		args := make([]any, 0, len(ids)+1)
		args = append(args, c.opts.TTL.Milliseconds())
		for id := range ids {
			args = append(args, id)
		}
		batch[c.key(subject)] = args
	}
	c.mu.Unlock()
	if err := redisclaims.EvalEach(ctx, c.rdb, renewScript, batch); err != nil {
		c.opts.Logger.Warn("redislimit: renew socket claims", "err", err)
	}
}

// Close stops the renewal. The hub's claims lapse after TTL unless its
// sockets released them (a hub closes its sockets before this).
func (c *Counter) Close() { c.renewer.Stop() }
