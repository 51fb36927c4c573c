package session

import (
	"errors"
	"fmt"

	"github.com/runhub/runhub/protocol"
)

// Errors for illegal event sequences. Apply leaves the state unchanged when
// it returns one of them.
var (
	ErrAfterTerminal  = errors.New("session: event after the run's terminal event")
	ErrSeq            = errors.New("session: event out of sequence")
	ErrUnknownPrompt  = errors.New("session: resolution of an unknown prompt")
	ErrWrongRun       = errors.New("session: event of another run")
	ErrInvalidPayload = errors.New("session: invalid payload")
	ErrBadStatus      = errors.New("session: status event with an unknown or terminal status")
)

// Run is the folded state of one run.
type Run struct {
	RunID           string
	SessionID       string
	Status          protocol.Status
	LastSeq         uint64
	Terminal        bool
	TerminalState   protocol.Status
	ErrorCode       string // code of the terminal error, if any
	ErrorMessage    string // message of the terminal error, if any
	Result          string // done's result: the final assistant text
	ResultTruncated bool   // done's truncated
	PendingApproval *protocol.PendingApproval
	PendingClarify  *protocol.PendingClarify
	Progress        string
	Tokens          int64 // token.delta events seen
	Streamed        bool  // any output (tokens, reasoning, tool activity) streamed
	Usage           *protocol.Usage
	Title           string
	Message         string // the user message from run.started
	Source          string
	Profile         string // run.started's profile ("" when the run named none)
	Provider        string // run.started's provider: the driver kind
	QueueDepth      int
	Goal            *protocol.GoalUpdatedPayload
	StartedAt       float64
	UpdatedAt       float64
}

// NewRun returns the state of a run that has no events yet: queued.
func NewRun(runID, sessionID string) Run {
	return Run{RunID: runID, SessionID: sessionID, Status: protocol.StatusQueued}
}

// Apply folds e into r. e must be the next event of this run (seq LastSeq+1).
func (r *Run) Apply(e *protocol.Envelope) error {
	if e.RunID != r.RunID {
		return fmt.Errorf("%w: %s is not %s", ErrWrongRun, e.RunID, r.RunID)
	}
	if r.SessionID != "" && e.SessionID != r.SessionID {
		return fmt.Errorf("%w: %s is in session %s, not %s", ErrWrongRun, e.RunID, e.SessionID, r.SessionID)
	}
	if r.Terminal {
		return fmt.Errorf("%w: %s %s", ErrAfterTerminal, e.Type, e.EventID)
	}
	if e.Seq != r.LastSeq+1 {
		return fmt.Errorf("%w: seq %d after %d", ErrSeq, e.Seq, r.LastSeq)
	}
	if e.Terminal != protocol.IsTerminal(e.Type, e.Payload) {
		return fmt.Errorf("%w: %s %s has terminal %v, its type and payload say %v", ErrInvalidPayload, e.Type, e.EventID, e.Terminal, !e.Terminal)
	}
	next := *r
	if err := next.apply(e); err != nil {
		return err
	}
	next.LastSeq = e.Seq
	next.UpdatedAt = e.CreatedAt
	if next.StartedAt == 0 {
		next.StartedAt = e.CreatedAt
	}
	*r = next
	return nil
}

func decode[T any](e *protocol.Envelope) (T, error) {
	v, err := protocol.DecodePayload[T](e)
	if err != nil {
		return v, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	return v, nil
}

func (r *Run) apply(e *protocol.Envelope) error {
	if r.Status == protocol.StatusQueued && e.Type != protocol.EventStatus && !e.Terminal {
		r.Status = protocol.StatusRunning
	}
	switch e.Type {
	case protocol.EventRunStarted:
		p, err := decode[protocol.RunStartedPayload](e)
		if err != nil {
			return err
		}
		r.Message, r.Source, r.Profile, r.Provider = p.Message, p.Source, p.Profile, p.Provider
		r.Progress = "started"
	case protocol.EventStatus:
		p, err := decode[protocol.StatusPayload](e)
		if err != nil {
			return err
		}
		if !p.Status.Known() || p.Status.Terminal() {
			return fmt.Errorf("%w: %q", ErrBadStatus, p.Status)
		}
		r.Status = p.Status
	case protocol.EventTokenDelta:
		r.Tokens++
		r.Streamed = true
		r.Progress = "writing"
	case protocol.EventReasoningDelta, protocol.EventReasoningDone:
		r.Streamed = true
		r.Progress = "thinking"
	case protocol.EventProgress:
		p, err := decode[protocol.ProgressPayload](e)
		if err != nil {
			return err
		}
		r.Progress = short(p.Text)
	case protocol.EventToolStarted:
		p, err := decode[protocol.ToolStartedPayload](e)
		if err != nil {
			return err
		}
		r.Streamed = true
		r.Progress = short("tool " + p.Name)
	case protocol.EventToolUpdated:
		r.Streamed = true
	case protocol.EventToolDone:
		p, err := decode[protocol.ToolDonePayload](e)
		if err != nil {
			return err
		}
		r.Streamed = true
		if p.Error {
			r.Progress = "tool failed"
		} else {
			r.Progress = "tool done"
		}
	case protocol.EventApprovalReq:
		p, err := decode[protocol.ApprovalRequestedPayload](e)
		if err != nil {
			return err
		}
		r.PendingApproval = &p
		r.Progress = short("approval: " + p.Summary)
		if r.Status != protocol.StatusCancelling {
			r.Status = protocol.StatusAwaitingApproval
		}
	case protocol.EventApprovalRes:
		p, err := decode[protocol.ApprovalResolvedPayload](e)
		if err != nil {
			return err
		}
		if r.PendingApproval == nil || r.PendingApproval.ApprovalID != p.ApprovalID {
			return fmt.Errorf("%w: approval %q", ErrUnknownPrompt, p.ApprovalID)
		}
		r.PendingApproval = nil
		r.Progress = short("approval " + p.Choice)
		r.resume()
	case protocol.EventClarifyReq:
		p, err := decode[protocol.ClarifyRequestedPayload](e)
		if err != nil {
			return err
		}
		r.PendingClarify = &p
		r.Progress = short("question: " + p.Question)
		if r.Status != protocol.StatusCancelling {
			r.Status = protocol.StatusAwaitingClarify
		}
	case protocol.EventClarifyRes:
		p, err := decode[protocol.ClarifyResolvedPayload](e)
		if err != nil {
			return err
		}
		if r.PendingClarify == nil || r.PendingClarify.ClarifyID != p.ClarifyID {
			return fmt.Errorf("%w: clarify %q", ErrUnknownPrompt, p.ClarifyID)
		}
		r.PendingClarify = nil
		r.Progress = short("clarify " + p.Status)
		r.resume()
	case protocol.EventTitleUpdated:
		p, err := decode[protocol.TitleUpdatedPayload](e)
		if err != nil {
			return err
		}
		r.Title = p.Title
	case protocol.EventUsageUpdated, protocol.EventUsageFinal:
		p, err := decode[protocol.Usage](e)
		if err != nil {
			return err
		}
		r.Usage = &p
	case protocol.EventQueueUpdated:
		p, err := decode[protocol.QueueUpdatedPayload](e)
		if err != nil {
			return err
		}
		r.QueueDepth = p.Depth
	case protocol.EventGoalUpdated:
		p, err := decode[protocol.GoalUpdatedPayload](e)
		if err != nil {
			return err
		}
		r.Goal = &p
	case protocol.EventDone:
		p, err := decode[protocol.DonePayload](e)
		if err != nil {
			return err
		}
		if p.Usage != nil {
			r.Usage = p.Usage
		}
		r.Result, r.ResultTruncated = p.Result, p.Truncated
		r.finish(protocol.StatusCompleted, "completed")
	case protocol.EventCancelled:
		p, err := decode[protocol.CancelledPayload](e)
		if err != nil {
			return err
		}
		r.finish(protocol.StatusCancelled, short("cancelled: "+p.Reason))
	case protocol.EventError:
		p, err := decode[protocol.ErrorPayload](e)
		if err != nil {
			return err
		}
		if !e.Terminal {
			r.Progress = short("error: " + p.Message)
			return nil
		}
		r.ErrorCode, r.ErrorMessage = p.Code, p.Message
		switch p.Code {
		case protocol.ErrorInterrupted:
			r.finish(protocol.StatusInterrupted, short("interrupted: "+p.Message))
		case protocol.ErrorTimeout:
			r.finish(protocol.StatusExpired, short("timed out: "+p.Message))
		default:
			r.finish(protocol.StatusFailed, short("failed: "+p.Message))
		}
	default:
		return fmt.Errorf("%w: unknown event type %q", ErrInvalidPayload, e.Type)
	}
	return nil
}

// resume returns the run to running after a prompt resolution, unless it is
// being cancelled or still waits on the other kind of prompt.
func (r *Run) resume() {
	switch {
	case r.Status == protocol.StatusCancelling:
	case r.PendingApproval != nil:
		r.Status = protocol.StatusAwaitingApproval
	case r.PendingClarify != nil:
		r.Status = protocol.StatusAwaitingClarify
	default:
		r.Status = protocol.StatusRunning
	}
}

func (r *Run) finish(s protocol.Status, progress string) {
	r.Status, r.TerminalState, r.Terminal = s, s, true
	r.PendingApproval, r.PendingClarify = nil, nil
	r.Progress = progress
}

// Controls lists the control ops valid for this run now.
func (r *Run) Controls() []string {
	if r.Terminal || r.Status == protocol.StatusCancelling {
		return []string{} // a cancelling run takes no more responses
	}
	out := make([]string, 0, 3)
	out = append(out, protocol.OpCancel)
	if r.PendingApproval != nil {
		out = append(out, protocol.OpApprove)
	}
	if r.PendingClarify != nil {
		out = append(out, protocol.OpClarify)
	}
	return out
}

// RunStatus is the HTTP view of the run.
func (r *Run) RunStatus() protocol.RunStatus {
	s := protocol.RunStatus{RunID: r.RunID, SessionID: r.SessionID, Status: r.Status,
		LastSeq: r.LastSeq, Terminal: r.Terminal, TerminalState: r.TerminalState,
		ActiveControls: r.Controls()}
	if r.LastSeq > 0 {
		s.LastEventID = protocol.EventID(r.RunID, r.LastSeq)
	}
	if r.PendingApproval != nil {
		s.PendingApprovalID = r.PendingApproval.ApprovalID
	}
	if r.PendingClarify != nil {
		s.PendingClarifyID = r.PendingClarify.ClarifyID
	}
	if r.TerminalState == protocol.StatusCompleted {
		s.Result, s.ResultTruncated = r.Result, r.ResultTruncated
	}
	if r.ErrorCode != "" {
		s.Error = &protocol.RunError{Code: r.ErrorCode, Message: r.ErrorMessage}
	}
	return s
}

const maxProgress = 120

func short(s string) string { return protocol.Truncate(s, maxProgress) }

// Fold applies events in order to a fresh run state.
func Fold(runID, sessionID string, events []protocol.Envelope) (Run, error) {
	r := NewRun(runID, sessionID)
	for i := range events {
		if err := r.Apply(&events[i]); err != nil {
			return r, err
		}
	}
	return r, nil
}

// Skip folds count delta events (protocol.EventType.IsDelta) that a
// status feed left out, seqs LastSeq+1 … seq, as Apply would have folded
// them one by one: tokens of them were token.delta, last is the type of
// the last one that sets the progress (token.delta or reasoning.delta;
// "" when none did) and at is the created_at of the last one. A feed that
// coalesces deltas (journal.DeltasSkipped) gives the same status as one
// that carries each.
func (r *Run) Skip(count, tokens int64, last protocol.EventType, seq uint64, at float64) error {
	if r.Terminal {
		return fmt.Errorf("%w: deltas up to seq %d", ErrAfterTerminal, seq)
	}
	if count <= 0 || tokens < 0 || tokens > count || seq != r.LastSeq+uint64(count) {
		return fmt.Errorf("%w: %d deltas up to seq %d after %d", ErrSeq, count, seq, r.LastSeq)
	}
	if r.Status == protocol.StatusQueued {
		r.Status = protocol.StatusRunning
	}
	r.Tokens += tokens
	r.Streamed = true
	switch last {
	case protocol.EventTokenDelta:
		r.Progress = "writing"
	case protocol.EventReasoningDelta:
		r.Progress = "thinking"
	}
	r.LastSeq = seq
	r.UpdatedAt = at
	if r.StartedAt == 0 {
		r.StartedAt = at
	}
	return nil
}
