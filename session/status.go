package session

import (
	"fmt"
	"slices"

	"github.com/runhub/runhub/protocol"
)

// Session is the folded state of a session: its latest run plus what
// carries across runs (title, queue depth, goal).
type Session struct {
	ID         string
	Title      string // the session's title; a run's title.updated sets it only when empty
	Latest     *Run   // nil before the first run
	QueueDepth int
	Goal       *protocol.GoalUpdatedPayload
	UpdatedAt  float64
	CreatedAt  float64            // the session's creation time, when known
	Presence   *protocol.Presence // set by the hub (who has it open); Status copies it

	earlier []string // ids of the runs before Latest, oldest first
}

// NewSession returns a session with no runs.
func NewSession(id, title string) Session { return Session{ID: id, Title: title} }

// Apply folds an event of the session. An event of a run other than the
// latest starts a new latest run when it is that run's first event; a later
// event of an unseen run is ErrSeq (the caller must load the run's state);
// an event of an earlier run (one this Session saw before the latest, by
// Apply or SetLatest) is ErrWrongRun, so a replayed old run never becomes
// the latest again.
func (s *Session) Apply(e *protocol.Envelope) error {
	if e.SessionID != s.ID {
		return fmt.Errorf("%w: session %s is not %s", ErrWrongRun, e.SessionID, s.ID)
	}
	if s.Latest == nil || e.RunID != s.Latest.RunID {
		if slices.Contains(s.earlier, e.RunID) {
			return fmt.Errorf("%w: %s is an earlier run of session %s", ErrWrongRun, e.RunID, s.ID)
		}
		if e.Seq != 1 {
			return fmt.Errorf("%w: first event of run %s has seq %d", ErrSeq, e.RunID, e.Seq)
		}
		r := NewRun(e.RunID, s.ID)
		if err := r.Apply(e); err != nil {
			return err
		}
		s.retire()
		s.Latest = &r
	} else if err := s.Latest.Apply(e); err != nil {
		return err
	}
	s.absorb(s.Latest, e.Type)
	s.UpdatedAt = e.CreatedAt
	return nil
}

// SetLatest replaces the latest run with a state loaded elsewhere (e.g. folded
// from the journal).
func (s *Session) SetLatest(r Run) {
	if s.Latest == nil || s.Latest.RunID != r.RunID {
		s.retire()
	}
	s.Latest = &r
	s.adoptTitle(r.Title)
	if r.Goal != nil {
		s.Goal = r.Goal
	}
	s.QueueDepth = r.QueueDepth
	if r.UpdatedAt > s.UpdatedAt {
		s.UpdatedAt = r.UpdatedAt
	}
}

// adoptTitle takes a run's title as the session's only when the session
// has none: a session keeps the title it was given (at creation, by a
// rename, or by its first titled run), and later runs do not rename it.
func (s *Session) adoptTitle(title string) {
	if s.Title == "" && title != "" {
		s.Title = title
	}
}

// retire remembers the latest run as an earlier one. The slice is clipped so
// that copies of a Session never share appends.
func (s *Session) retire() {
	if s.Latest != nil {
		s.earlier = append(slices.Clip(s.earlier), s.Latest.RunID)
	}
}

func (s *Session) absorb(r *Run, typ protocol.EventType) {
	switch typ {
	case protocol.EventTitleUpdated:
		s.adoptTitle(r.Title)
	case protocol.EventQueueUpdated:
		s.QueueDepth = r.QueueDepth
	case protocol.EventGoalUpdated:
		s.Goal = r.Goal
	}
}

// Controls lists the control ops valid for the session now: those of its
// active run, or start when it has none.
//
// Idle: start, queue (starts a run at once) and goal. With an active run:
// the run's own controls, then queue (FIFO or steer) and goal.
func (s *Session) Controls() []string {
	if s.Latest == nil || s.Latest.Terminal {
		return []string{protocol.OpStart, protocol.OpQueue, protocol.OpGoal}
	}
	return append(s.Latest.Controls(), protocol.OpQueue, protocol.OpGoal)
}

// Status derives the SessionStatus a watching tab sees.
func (s *Session) Status() protocol.SessionStatus {
	st := protocol.SessionStatus{SessionID: s.ID, Title: s.Title, Status: "",
		ActiveControls: s.Controls(), QueueDepth: s.QueueDepth, Goal: s.Goal, UpdatedAt: s.UpdatedAt, CreatedAt: s.CreatedAt,
		Presence: s.Presence}
	if r := s.Latest; r != nil {
		st.RunID, st.Status, st.LastSeq = r.RunID, r.Status, r.LastSeq
		st.Terminal, st.TerminalState = r.Terminal, r.TerminalState
		st.PendingApproval, st.PendingClarify = r.PendingApproval, r.PendingClarify
		st.Progress, st.Tokens, st.Usage = r.Progress, r.Tokens, r.Usage
		if r.LastSeq > 0 {
			st.LastEventID = protocol.EventID(r.RunID, r.LastSeq)
		}
	}
	return st
}

// Skip folds deltas of the latest run that a status feed left out (see
// Run.Skip); they never start a run, so a run other than the latest is
// ErrSeq (the caller loads the session).
func (s *Session) Skip(runID string, count, tokens int64, last protocol.EventType, seq uint64, at float64) error {
	if s.Latest == nil || s.Latest.RunID != runID {
		return fmt.Errorf("%w: deltas of run %s, not the latest", ErrSeq, runID)
	}
	if err := s.Latest.Skip(count, tokens, last, seq, at); err != nil {
		return err
	}
	s.UpdatedAt = at
	return nil
}
