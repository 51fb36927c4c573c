package hub

import (
	"context"
	"errors"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Who may read or change what, and the errors a caller may see: the one
// answer for what does not exist or is not the caller's, and the mapping
// of internal errors to safe protocol errors.

// ErrUnknown is the one answer for a run or session that does not exist or
// is not the caller's: it never tells which.
var ErrUnknown = protocol.Errorf(protocol.CodeNotFound, "no such run or session")

// ReadSession loads a session p may read: its own, or any for an admin;
// ErrUnknown for any other, or one that does not exist.
func (h *Hub) ReadSession(ctx context.Context, p Principal, sid string) (journal.SessionMeta, error) {
	meta, err := h.store.Session(ctx, sid)
	if errors.Is(err, journal.ErrNotFound) || (err == nil && !p.MayRead(meta.Owner)) {
		return meta, ErrUnknown
	}
	return meta, err
}

// ReadRun loads a run p may read: its own, or any for an admin; ErrUnknown
// for any other, or one that does not exist.
func (h *Hub) ReadRun(ctx context.Context, p Principal, runID string) (journal.RunMeta, error) {
	meta, err := h.store.Run(ctx, runID)
	if errors.Is(err, journal.ErrNotFound) || (err == nil && !p.MayRead(meta.Owner)) {
		return meta, ErrUnknown
	}
	return meta, err
}

// mayRead reports whether the socket's caller may read a session of owner.
func (c *conn) mayRead(owner string) bool { return owner == c.subject || c.rd.admin }

// errJournalUnavailable answers a request the journal (or Redis) could not
// serve for now: HTTP 503 with Retry-After, WebSocket error unavailable.
var errJournalUnavailable = protocol.Errorf(protocol.CodeUnavailable, "the journal is unavailable; try again shortly")

// journalCode is the code of a journal failure: unavailable when the
// journal cannot be reached now (journal.Unavailable), else internal.
func journalCode(err error) protocol.Code {
	if journal.Unavailable(err) || errors.Is(err, journal.ErrClosed) {
		return protocol.CodeUnavailable
	}
	return protocol.CodeInternal
}

// PublicError maps internal errors to safe protocol errors.
func (h *Hub) PublicError(err error) error {
	if err == nil {
		return nil
	}
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe):
		return pe
	case errors.Is(err, adapter.ErrNotFound), errors.Is(err, journal.ErrNotFound):
		return ErrUnknown
	case errors.Is(err, adapter.ErrBusy):
		return protocol.Errorf(protocol.CodeLimitExceeded, "too many runs are executing; try again later")
	case errors.Is(err, adapter.ErrClosed), errors.Is(err, journal.ErrClosed):
		return protocol.Errorf(protocol.CodeUnavailable, "the hub is shutting down")
	case errors.Is(err, context.DeadlineExceeded):
		return protocol.Errorf(protocol.CodeUnavailable, "the runtime did not answer in time")
	case journal.Unavailable(err):
		h.log.Warn("journal unavailable", "err", err)
		return errJournalUnavailable
	}
	h.log.Error("internal error", "err", err)
	return protocol.Errorf(protocol.CodeInternal, "internal error")
}
