package adapter

import (
	"context"
	"errors"
	"slices"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Control is one control as a value: the same value goes from the hub
// through the Router to the executor that acts on it, in this process or,
// as JSON, in a runner's. It carries the op, the run or session it names
// and the op's payload as the client sent them (protocol.Control), the
// caller it acts for, and the request's idempotency key. The executor
// alone tells the ops apart.
type Control struct {
	protocol.Control
	// Owner is the caller: a control of a run or session of anyone else is
	// answered ErrNotFound.
	Owner string `json:"owner"`
	// Key is the request's idempotency key ("": none).
	Key string `json:"key,omitempty"`
}

// NewControl is m for owner with key.
func NewControl(m *protocol.Control, owner, key string) Control {
	return Control{Control: *m, Owner: owner, Key: key}
}

// Steers reports whether c is a steer: a queue in mode steer, delivered
// to the session's active run.
func (c *Control) Steers() bool { return c.Op == protocol.OpQueue && c.Mode == protocol.ModeSteer }

// OfRun reports whether c acts on a run, answered by the run's executor
// wherever it executes (cancel, approve, clarify, steer), rather than on
// a session, answered by the executor of this process (start, queue,
// goal).
func (c *Control) OfRun() bool {
	return c.Op == protocol.OpCancel || c.Op == protocol.OpApprove || c.Op == protocol.OpClarify || c.Steers()
}

// MayStartRun reports whether c may start a run (start, queue, and a goal
// set, edited or resumed), so that the hub's limit of runs applies.
func (c *Control) MayStartRun() bool {
	switch {
	case c.Op == protocol.OpStart, c.Op == protocol.OpQueue && !c.Steers():
		return true
	case c.Op == protocol.OpGoal:
		return c.Action == protocol.GoalSet || c.Action == protocol.GoalEdit || c.Action == protocol.GoalResume
	}
	return false
}

// Unowned answers c for a run that no executor holds (not started, ended,
// or between its executor's claim and start): a cancel of a run not ended
// ends it directly with one cancelled event; anything else is not-active.
// The runner's control listener uses it for a control of a run it leases
// but does not (or no longer) execute.
func Unowned(ctx context.Context, log journal.Log, run journal.RunMeta, c Control) (protocol.ControlResult, error) {
	if c.Steers() {
		return Result(protocol.ResultNotActive, "no active run to steer", "", run.SessionID, ""), nil
	}
	if c.Op != protocol.OpCancel {
		return Result(protocol.ResultNotActive, "the run is not active", run.ID, run.SessionID, ""), nil
	}
	if run.Terminal {
		return Result(protocol.ResultNotActive, "the run has already ended", run.ID, run.SessionID, ""), nil
	}
	e, err := protocol.NewEvent(run.ID, run.SessionID, protocol.EventCancelled, protocol.CancelledPayload{Reason: "cancelled by user", Partial: false})
	if err != nil {
		return protocol.ControlResult{}, err
	}
	out, err := log.Append(ctx, e, run.ID+"/cancel")
	if errors.Is(err, journal.ErrTerminal) {
		return Result(protocol.ResultNotActive, "the run has already ended", run.ID, run.SessionID, ""), nil
	}
	if err != nil {
		return protocol.ControlResult{}, err
	}
	return Result(protocol.ResultAccepted, "cancelled", run.ID, run.SessionID, out.EventID), nil
}

// maxRecentKeys bounds the idempotency keys a session remembers.
const maxRecentKeys = 64

// ErrDuplicate reports a control whose idempotency key the session has
// seen (RememberKey).
var ErrDuplicate = errors.New("adapter: duplicate request")

// RememberKey records a session-level control's idempotency key in m (the
// most recent 64 are kept); a key seen before is ErrDuplicate, and an empty
// key is no key. Call it inside journal.SessionUpdater.UpdateSession.
func RememberKey(m *journal.SessionMeta, key string) error {
	if key == "" {
		return nil
	}
	if slices.Contains(m.RecentKeys, key) {
		return ErrDuplicate
	}
	m.RecentKeys = append(m.RecentKeys, key)
	if n := len(m.RecentKeys); n > maxRecentKeys {
		m.RecentKeys = slices.Clone(m.RecentKeys[n-maxRecentKeys:])
	}
	return nil
}

// errNoKey makes forgetKey's update a no-op: the key is not remembered.
var errNoKey = errors.New("adapter: no such key")

// forgetKey drops key from the session's remembered keys: a steer that was
// definitely not delivered (answered not-active, unsupported or conflict)
// must not use up its key, so that its retry is answered afresh. It goes on
// when ctx has ended: the key was recorded under the same request.
func forgetKey(ctx context.Context, u journal.SessionUpdater, sid, key string) error {
	if key == "" {
		return nil
	}
	_, err := u.UpdateSession(context.WithoutCancel(ctx), sid, func(m *journal.SessionMeta) error {
		i := slices.Index(m.RecentKeys, key)
		if i < 0 {
			return errNoKey
		}
		m.RecentKeys = slices.Delete(slices.Clone(m.RecentKeys), i, i+1)
		return nil
	})
	if errors.Is(err, errNoKey) {
		return nil
	}
	return err
}
