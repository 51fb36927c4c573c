package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Controls routes controls to the node that owns a run: it is the Remote
// of adapter.NewRouter. A control is one entry on the owner's control
// stream (its inbox); the owner answers on a reply list the caller waits
// on.
type Controls struct{ cfg Config }

// NewControls returns the control router of cfg's Redis.
func NewControls(cfg Config) *Controls {
	cfg.defaults()
	return &Controls{cfg: cfg}
}

// ctlMaxLen bounds a node's control stream; ctlTTL is how long one
// outlives its last control.
const (
	ctlMaxLen = 1000
	ctlTTL    = time.Hour
)

// controlEntry is a control on an owner's inbox: the control and the run's
// meta the sender read, so that the owner reads none.
type controlEntry struct {
	Run     journal.RunMeta `json:"run"`
	Control adapter.Control `json:"control"`
}

// Control implements adapter.Remote.
func (c *Controls) Control(ctx context.Context, run journal.RunMeta, rc adapter.Control) (protocol.ControlResult, bool, error) {
	runID := run.ID
	body, err := json.Marshal(controlEntry{Run: run, Control: rc})
	if err != nil {
		return protocol.ControlResult{}, false, err
	}
	rdb := c.cfg.Client
	owner, err := rdb.Get(ctx, c.cfg.lease(runID)).Result()
	if errors.Is(err, goredis.Nil) {
		return protocol.ControlResult{}, false, nil
	}
	if err != nil {
		return protocol.ControlResult{}, false, fmt.Errorf("runner: lease of %s: %w", runID, err)
	}
	reply := c.cfg.reply(adapter.NewID("x_"))
	ctl := c.cfg.inbox(owner)
	if _, err := rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.XAdd(ctx, &goredis.XAddArgs{Stream: ctl, MaxLen: ctlMaxLen, Approx: true,
			Values: []any{"run", runID, "control", body, "reply", reply}})
		// The owner deletes its inbox when it stops; a dead owner's expires.
		p.Expire(ctx, ctl, ctlTTL)
		return nil
	}); err != nil {
		return protocol.ControlResult{}, false, fmt.Errorf("runner: send control to %s: %w", runID, err)
	}
	wctx, cancel := context.WithTimeout(ctx, c.cfg.ControlTimeout+time.Second)
	defer cancel()
	res, err := rdb.BLPop(wctx, c.cfg.ControlTimeout, reply).Result()
	if errors.Is(err, goredis.Nil) || errors.Is(err, context.DeadlineExceeded) {
		if n, _ := rdb.Exists(ctx, c.cfg.lease(runID)).Result(); n == 0 {
			return protocol.ControlResult{}, false, nil // its executor went away meanwhile
		}
		return protocol.ControlResult{}, true, protocol.Errorf(protocol.CodeUnavailable, "the run's executor (%s) did not answer in time", owner)
	}
	if err != nil {
		return protocol.ControlResult{}, true, fmt.Errorf("runner: control reply of %s: %w", runID, err)
	}
	var out protocol.ControlResult
	if err := json.Unmarshal([]byte(res[1]), &out); err != nil {
		return out, true, fmt.Errorf("runner: control reply of %s: %w", runID, err)
	}
	if out.Status == "" { // the executor answered with an error
		var pe protocol.Error
		if json.Unmarshal([]byte(res[1]), &struct{ Error *protocol.Error }{&pe}) == nil && pe.Code != "" {
			return protocol.ControlResult{}, true, &pe
		}
	}
	return out, true, nil
}
