package executor

import (
	"context"
	"errors"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

var errNoGoal = errors.New("no goal")

// updateGoal executes a goal control for owner: it changes the session's
// goal state (journaled as goal.updated on the active run) and, when a goal
// is set or resumed on an idle session, asks the judge of the session's
// profile whether it goes on (kick). A goal set on a session whose profile
// has no judge is unsupported.
func (a *InProcess) updateGoal(ctx context.Context, owner, sid string, req protocol.GoalRequest) (protocol.ControlResult, error) {
	u := a.store
	var ref judgeRef
	if req.Action == protocol.GoalSet {
		meta, err := u.Session(ctx, sid)
		if err == nil && meta.Owner != owner {
			err = journal.ErrNotFound
		}
		if err != nil {
			return protocol.ControlResult{}, notFound(err, "session "+sid)
		}
		if ref = a.judgeOf(a.latestRequest(ctx, meta)); ref.j == nil {
			return adapter.Result(protocol.ResultUnsupported, ref.name+" cannot judge a goal: give it a goal_judge (an openai profile)",
				"", sid, ""), nil
		}
	}
	changed := false
	meta, err := u.UpdateSession(ctx, sid, func(m *journal.SessionMeta) error {
		changed = false
		if m.Owner != owner {
			return journal.ErrNotFound
		}
		g := m.Goal
		live := g != nil && (g.State == protocol.GoalActive || g.State == protocol.GoalPaused)
		switch req.Action {
		case protocol.GoalSet:
			m.Goal = &protocol.GoalUpdatedPayload{State: protocol.GoalActive, Text: req.Text}
			changed = true
		case protocol.GoalEdit:
			if !live {
				return errNoGoal
			}
			if g.Text != req.Text {
				m.Goal = &protocol.GoalUpdatedPayload{State: g.State, Text: req.Text, Turns: g.Turns}
				changed = true
			}
		case protocol.GoalPause, protocol.GoalResume:
			if !live {
				return errNoGoal
			}
			want := protocol.GoalPaused
			if req.Action == protocol.GoalResume {
				want = protocol.GoalActive
			}
			if g.State != want {
				m.Goal = &protocol.GoalUpdatedPayload{State: want, Text: g.Text, Turns: g.Turns}
				changed = true
			}
		case protocol.GoalClear:
			if g != nil && g.State != protocol.GoalCleared {
				m.Goal = &protocol.GoalUpdatedPayload{State: protocol.GoalCleared, Text: g.Text, Turns: g.Turns}
				changed = true
			}
		case protocol.GoalStatus:
		default:
			return protocol.Errorf(protocol.CodeBadRequest, "action: unknown goal action %q", req.Action)
		}
		return nil
	})
	var pe *protocol.Error
	switch {
	case errors.Is(err, errNoGoal):
		return adapter.Result(protocol.ResultNotActive, "the session has no goal", "", sid, ""), nil
	case errors.As(err, &pe):
		return protocol.ControlResult{}, pe
	case err != nil:
		return protocol.ControlResult{}, notFound(err, "session "+sid)
	}
	msg := "no goal"
	if meta.Goal != nil {
		msg = "goal " + meta.Goal.State
	}
	eventID := ""
	if changed && meta.ActiveRun != "" {
		if e, err := a.appendTo(ctx, meta.ActiveRun, sid, protocol.EventGoalUpdated, meta.Goal); err == nil {
			eventID = e.EventID
		}
	}
	// On an idle session the judge decides at once whether an active goal
	// goes on; resume also re-kicks a goal left active by a failed or
	// cancelled run.
	if (changed || req.Action == protocol.GoalResume) && meta.ActiveRun == "" && meta.Goal != nil && meta.Goal.State == protocol.GoalActive {
		if ref.j == nil {
			ref = a.judgeOf(a.latestRequest(ctx, meta))
		}
		if g := a.kick(ctx, sid, ref, *meta.Goal); g != nil {
			msg = "goal " + g.State
		}
	}
	return adapter.Result(protocol.ResultAccepted, msg, meta.ActiveRun, sid, eventID), nil
}

// kick asks the judge about an active goal on an idle session before any
// turn of it (an empty last response: an LLM judge answers continue
// without a call, as Hermes Agent's does) and acts on the verdict: continue
// starts the goal's run, done ends the goal, blocked pauses it. It returns
// the goal it changed, if it changed it.
func (a *InProcess) kick(ctx context.Context, sid string, ref judgeRef, g protocol.GoalUpdatedPayload) *protocol.GoalUpdatedPayload {
	if ref.j == nil {
		return nil // set under another profile: no judge here
	}
	jctx, cancel := context.WithTimeout(ctx, a.opts.GoalJudgeTimeout)
	v, err := a.judge(jctx, ref.j, g, "")
	cancel()
	if err != nil {
		v = driver.Verdict{Kind: driver.VerdictContinue}
	}
	state := protocol.GoalDone
	switch v.Kind {
	case driver.VerdictContinue:
		a.startGoalRun(ctx, sid)
		return nil
	case driver.VerdictBlocked:
		state, v.Reason = protocol.GoalPaused, "blocked: "+v.Reason
	case driver.VerdictDone:
	default:
		return nil
	}
	m, err := a.store.UpdateSession(ctx, sid, func(m *journal.SessionMeta) error {
		if m.Goal == nil || m.Goal.State != protocol.GoalActive {
			return errNoGoal
		}
		m.Goal = &protocol.GoalUpdatedPayload{State: state, Text: m.Goal.Text, Turns: m.Goal.Turns, Reason: safeReason(v.Reason)}
		return nil
	})
	if err != nil {
		return nil
	}
	return m.Goal
}
