package journal

import (
	"context"

	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// ReadPage is the page size FoldRun and ReadAll use.
const ReadPage = 1000

// ReadAll calls fn with every event of the run after afterSeq, in order, a
// page at a time.
func ReadAll(ctx context.Context, l Log, runID string, afterSeq uint64, fn func(protocol.Envelope) error) error {
	for {
		page, err := l.Read(ctx, runID, afterSeq, ReadPage)
		if err != nil {
			return err
		}
		for _, e := range page {
			if err := fn(e); err != nil {
				return err
			}
			afterSeq = e.Seq
		}
		if len(page) < ReadPage {
			return nil
		}
	}
}

// FoldRun folds every journaled event of a run into its state.
func FoldRun(ctx context.Context, l Log, runID, sessionID string) (session.Run, error) {
	r := session.NewRun(runID, sessionID)
	err := ReadAll(ctx, l, runID, 0, func(e protocol.Envelope) error { return r.Apply(&e) })
	return r, err
}

// FoldSession loads a session's meta and folds its latest run. The queue
// depth and the goal come from the meta, where the runtime keeps them.
func FoldSession(ctx context.Context, s interface {
	Log
	Session(ctx context.Context, id string) (SessionMeta, error)
}, sessionID string) (session.Session, SessionMeta, error) {
	meta, err := s.Session(ctx, sessionID)
	if err != nil {
		return session.Session{}, meta, err
	}
	st, err := FoldSessionMeta(ctx, s, meta)
	return st, meta, err
}

// FoldSessionMeta is FoldSession for a session whose meta the caller has
// already read.
func FoldSessionMeta(ctx context.Context, l Log, meta SessionMeta) (session.Session, error) {
	st := session.NewSession(meta.ID, meta.Title)
	st.UpdatedAt, st.CreatedAt = meta.CreatedAt, meta.CreatedAt
	if rid := meta.LatestRun(); rid != "" {
		r, err := FoldRun(ctx, l, rid, meta.ID)
		if err != nil {
			return st, err
		}
		st.SetLatest(r)
	}
	st.QueueDepth, st.Goal = len(meta.Queue), meta.Goal
	return st, nil
}
