package hermeswebui

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Store is what an import writes through: the journal's public interfaces,
// so it works on every backend (bbolt, Redis).
type Store interface {
	journal.Log
	journal.Registry
}

// Writer writes planned sessions to a journal.
type Writer struct {
	Store  Store
	Owner  string // the subject the sessions belong to
	DryRun bool   // read and check only; write nothing
}

// Outcome is what Write did with one session.
type Outcome struct {
	Session       string
	Created       bool   // the session is new
	Runs          int    // runs written (or, dry, to write)
	RunsUnchanged int    // runs already imported, left as they are
	Events        int    // events written
	Trimmed       int    // events whose payload was cut to the journal's bound
	Skip          string // why the session was left alone ("": it was not)
	RunSkips      []Skip // runs left out, by their source
}

// Write imports one session. It is idempotent: a run already imported
// whole is left as it is, one an interrupted import left unfinished is
// finished from where it stopped (each event has an idempotency key), and a
// session of another subject or with an active run is not touched. An
// error is a journal failure that should stop the import.
func (w *Writer) Write(ctx context.Context, ps PlannedSession) (Outcome, error) {
	o := Outcome{Session: ps.ID}
	meta, err := w.Store.Session(ctx, ps.ID)
	switch {
	case errors.Is(err, journal.ErrNotFound):
		o.Created = true
		if !w.DryRun {
			err := w.Store.CreateSession(ctx, journal.SessionMeta{ID: ps.ID, Owner: w.Owner,
				Title: protocol.Truncate(ps.Title, 500), CreatedAt: ps.CreatedAt})
			if err != nil && !errors.Is(err, journal.ErrExists) {
				return o, err
			}
		}
	case err != nil:
		return o, err
	case meta.Owner != w.Owner:
		o.Skip = "a session with this id exists and belongs to another subject"
		return o, nil
	}
	// A run an interrupted import left unfinished is the session's active
	// run: finish it first, or no other run could begin.
	runs := make([]PlannedRun, 0, len(ps.Runs))
	for _, r := range ps.Runs {
		if rm, err := w.Store.Run(ctx, r.ID); err == nil && !rm.Terminal && rm.SessionID == ps.ID {
			runs = append([]PlannedRun{r}, runs...)
			continue
		}
		runs = append(runs, r)
	}
	for _, r := range runs {
		if err := validRun(r); err != nil {
			o.RunSkips = append(o.RunSkips, Skip{r.From, "run " + r.ID + ": " + err.Error()})
			continue
		}
		var from int
		rm, err := w.Store.Run(ctx, r.ID)
		switch {
		case errors.Is(err, journal.ErrNotFound):
			if !w.DryRun {
				err := w.Store.BeginRun(ctx, journal.RunMeta{ID: r.ID, SessionID: ps.ID, Owner: w.Owner, CreatedAt: r.CreatedAt, Request: r.Request})
				switch {
				case errors.Is(err, journal.ErrConflict):
					o.Skip = "the session has an active run; import again once it has ended"
					return o, nil
				case err != nil:
					return o, err
				}
			}
		case err != nil:
			return o, err
		case rm.SessionID != ps.ID || rm.Owner != w.Owner:
			o.RunSkips = append(o.RunSkips, Skip{r.From, "run id " + r.ID + " is taken by another session"})
			continue
		case rm.Terminal && rm.LastSeq != uint64(len(r.Events)):
			o.RunSkips = append(o.RunSkips, Skip{r.From, "run " + r.ID + ": an interrupted import left it unfinished and a hub has ended it since (" +
				strconv.FormatUint(rm.LastSeq, 10) + " of " + strconv.Itoa(len(r.Events)) + " events)"})
			continue
		case rm.Terminal:
			o.RunsUnchanged++
			continue
		default:
			from = int(rm.LastSeq) // an interrupted import: finish the run
		}
		for i := from; i < len(r.Events); i++ {
			if w.DryRun {
				continue
			}
			got, err := w.Store.Append(ctx, r.Events[i], "hermes-webui-import:"+r.ID+":"+strconv.Itoa(i+1))
			if err != nil {
				return o, fmt.Errorf("run %s event %d: %w", r.ID, i+1, err)
			}
			if got.Seq != uint64(i+1) {
				return o, fmt.Errorf("run %s: the journal numbered event %d as %d", r.ID, i+1, got.Seq)
			}
		}
		o.Runs++
		o.Events += len(r.Events) - from
		o.Trimmed += r.Trimmed
	}
	return o, nil
}

// validRun checks every event of a run before anything of it is written,
// so a run is never left half written by an event the journal refuses.
func validRun(r PlannedRun) error {
	if err := protocol.ValidID(r.ID); err != nil {
		return err
	}
	for i := range r.Events {
		e := r.Events[i]
		if err := protocol.ValidateEvent(&e); err != nil {
			return fmt.Errorf("event %d (%s): %w", i+1, e.Type, err)
		}
		if e.Terminal != (i == len(r.Events)-1) {
			return fmt.Errorf("event %d (%s): the terminal event must be the last", i+1, e.Type)
		}
	}
	if len(r.Events) == 0 {
		return errors.New("no events")
	}
	return nil
}
