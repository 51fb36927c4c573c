package executor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// The goal loop, after Hermes Agent's: after every successful run of a
// session with an active goal, the judge of the run's profile is asked
// whether the goal is reached, given the goal and the run's answer. Done
// ends the goal, blocked pauses it, continue starts the next goal run (the
// queue first) with the continuation prompt. A judge that fails (an error,
// a timeout, no verdict in its answer) fails open: the goal continues, the
// turn budget the backstop; MaxUnreadableVerdicts answers in a row with no
// verdict pause it. Every verdict is journaled as goal.updated in the
// judged run, before its done.

// ContinuationPrompt is the message of a goal's runs after its first (the
// first is the goal's text): a normal user message, as Hermes Agent sends.
func ContinuationPrompt(goal string) string {
	return "[Continuing toward your standing goal]\nGoal: " + goal + "\n\n" +
		"Continue working toward this goal: take the next concrete step. " +
		"When the goal is complete, say so plainly and stop. " +
		"When you are blocked and need input from the user, say so and stop."
}

// maxReason bounds a verdict's reason in goal.updated, in characters.
const maxReason = 500

// judgeRef is the goal judge of a run's settings, the goal's turn budget
// there, and what names them in an answer.
type judgeRef struct {
	j      driver.GoalJudge // nil: these settings cannot pursue a goal
	budget int
	name   string
}

// judgeOf resolves the judge of runs made with req as begin picks their
// driver: the profile's Judge (else its driver, when that judges), else the
// provider's driver.
func (a *InProcess) judgeOf(req protocol.StartRunRequest) judgeRef {
	if req.Profile == "" && req.Provider == "" {
		req.Profile = a.opts.DefaultProfile
	}
	ref := judgeRef{budget: a.opts.MaxGoalContinuations}
	if req.Profile != "" {
		pd := a.opts.Profiles[req.Profile]
		ref.name = "profile " + strconv.Quote(req.Profile)
		ref.j = pd.Judge
		if ref.j == nil {
			ref.j, _ = pd.Driver.(driver.GoalJudge)
		}
		if pd.GoalMaxTurns > 0 {
			ref.budget = pd.GoalMaxTurns
		}
		return ref
	}
	name := cmp.Or(req.Provider, a.opts.DefaultDriver)
	ref.name = "runtime driver " + strconv.Quote(name)
	ref.j, _ = a.opts.Drivers[name].(driver.GoalJudge)
	return ref
}

// latestRequest is the request of the session's latest run (what a run the
// runtime starts in it inherits); empty when it has none or it cannot be
// read.
func (a *InProcess) latestRequest(ctx context.Context, meta journal.SessionMeta) protocol.StartRunRequest {
	req := protocol.StartRunRequest{}
	if latest := meta.LatestRun(); latest != "" {
		if rm, err := a.store.Run(ctx, latest); err == nil && len(rm.Request) > 0 {
			_ = json.Unmarshal(rm.Request, &req)
		}
	}
	return req
}

// judge asks j, a driver's panic a failure like any other.
func (a *InProcess) judge(ctx context.Context, j driver.GoalJudge, g protocol.GoalUpdatedPayload, last string) (v driver.Verdict, err error) {
	defer func() {
		if r := recover(); r != nil {
			a.opts.Logger.Error("goal judge panicked", "panic", fmt.Sprint(r))
			err = &driver.Error{Code: protocol.ErrorInternal, Message: "the goal judge failed"}
		}
	}()
	return j.JudgeGoal(ctx, g, last)
}

// judged is the judge's answer on a turn.
type judged struct {
	goal    protocol.GoalUpdatedPayload // the goal as judged
	verdict driver.Verdict
	err     error
	budget  int
}

// judgeTurn asks the judge of a run that succeeded about the session's
// active goal; nil when there is no judge or no active goal. ctx is the
// run's: a cancel or the executor's close ends the judge's call, and the
// run then ends cancelled or interrupted, with no verdict.
func (a *InProcess) judgeTurn(ctx context.Context, x *driver.Execution) *judged {
	ref := a.judgeOf(x.Request)
	if ref.j == nil {
		return nil
	}
	meta, err := a.store.Session(ctx, x.SessionID)
	if err != nil || meta.Goal == nil || meta.Goal.State != protocol.GoalActive {
		return nil
	}
	last, _ := x.Result()
	jctx, cancel := context.WithTimeout(ctx, a.opts.GoalJudgeTimeout)
	defer cancel()
	v, err := a.judge(jctx, ref.j, *meta.Goal, last)
	if err != nil && ctx.Err() == nil && jctx.Err() != nil && !errors.Is(err, driver.ErrVerdictUnreadable) {
		err = fmt.Errorf("no answer within %s", a.opts.GoalJudgeTimeout)
	}
	return &judged{goal: *meta.Goal, verdict: v, err: err, budget: ref.budget}
}

// postTurn applies a turn's verdict before the run's terminal event: it
// journals the goal's new state on the run and reports whether the goal
// wants another run.
func (a *InProcess) postTurn(ctx context.Context, x *driver.Execution, j *judged) bool {
	if j == nil {
		return false
	}
	v, unreadable := j.verdict, false
	if j.err != nil {
		unreadable = errors.Is(j.err, driver.ErrVerdictUnreadable)
		v = driver.Verdict{Kind: driver.VerdictContinue, Reason: "the judge failed, so the goal goes on: " + errorText(j.err)}
	}
	if v.Kind == driver.VerdictHold {
		return false
	}
	a.opts.Logger.Debug("goal judged", "run_id", x.RunID, "session_id", x.SessionID, "verdict", v.Kind,
		"reason", safeReason(v.Reason), "judge_failed", j.err != nil)
	cont := false
	meta, err := a.store.UpdateSession(ctx, x.SessionID, func(m *journal.SessionMeta) error {
		cont = false
		g := m.Goal
		if g == nil || g.State != protocol.GoalActive {
			return errNoGoal
		}
		kind, reason := v.Kind, safeReason(v.Reason)
		if g.Text != j.goal.Text {
			kind, reason = driver.VerdictContinue, "the goal was edited while its turn was judged"
		}
		ng := protocol.GoalUpdatedPayload{State: protocol.GoalActive, Text: g.Text, Turns: g.Turns, Reason: reason}
		if unreadable {
			ng.UnreadableVerdicts = g.UnreadableVerdicts + 1
		}
		switch {
		case kind == driver.VerdictDone:
			ng.State = protocol.GoalDone
		case kind == driver.VerdictBlocked:
			ng.State, ng.Reason = protocol.GoalPaused, "blocked: "+reason
		case ng.UnreadableVerdicts >= driver.MaxUnreadableVerdicts:
			ng.State, ng.Reason = protocol.GoalPaused, fmt.Sprintf(
				"the judge's answer held no verdict %d turns in a row (%s); check the goal_judge profile's model, then resume",
				ng.UnreadableVerdicts, reason)
		case g.Turns >= j.budget:
			ng.State, ng.Reason = protocol.GoalPaused, fmt.Sprintf(
				"turn budget exhausted (%d/%d turns); resume to go on. Last verdict: %s", g.Turns, j.budget, reason)
		default:
			cont = true
		}
		m.Goal = &ng
		return nil
	})
	if err == nil {
		x.Emit(ctx, protocol.EventGoalUpdated, meta.Goal)
	}
	return cont
}

// startGoalRun starts the next run of an active goal, counting its turn:
// its first run's message is the goal's text, later ones the
// continuation prompt.
func (a *InProcess) startGoalRun(ctx context.Context, sid string) {
	u := a.store
	meta, err := u.UpdateSession(ctx, sid, func(m *journal.SessionMeta) error {
		g := m.Goal
		if g == nil || g.State != protocol.GoalActive || m.ActiveRun != "" {
			return errNoGoal
		}
		ng := *g
		ng.Turns++
		m.Goal = &ng
		return nil
	})
	if err != nil {
		return
	}
	goal := *meta.Goal
	message := goal.Text
	if goal.Turns > 1 {
		message = ContinuationPrompt(goal.Text)
	}
	_, err = a.startRun(ctx, meta.Owner, a.inherit(ctx, meta, message, "goal"), func(x *driver.Execution) {
		x.Emit(ctx, protocol.EventGoalUpdated, goal)
	})
	if err != nil {
		u.UpdateSession(context.WithoutCancel(ctx), sid, func(m *journal.SessionMeta) error {
			if m.Goal != nil && m.Goal.Turns == goal.Turns {
				m.Goal.Turns--
			}
			return nil
		})
		if !errors.Is(err, adapter.ErrConflict) {
			a.opts.Logger.Warn("start goal run", "session_id", sid, "err", err)
		}
	}
}

// errorText is a judge failure's message for goal.updated: a driver's
// error message (safe by contract), else the error's text redacted.
func errorText(err error) string {
	var de *driver.Error
	if errors.As(err, &de) {
		return de.Message
	}
	return err.Error()
}

// safeReason makes a judge's text fit for goal.updated: redacted, bounded.
func safeReason(s string) string {
	return driver.CutChars(journal.RedactString(s), maxReason)
}
