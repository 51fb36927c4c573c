package subscription

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/runhub/runhub/journal"
)

// The documents: one per subscription, and the index of them all (their
// owners, patterns and explicit streams, to match appends against).
const (
	docPrefix = "__ds/subscriptions/"
	indexDoc  = "__ds/index"
)

// indexEntry is a subscription as appends are matched against it.
type indexEntry struct {
	Owner   string   `json:"owner"`
	Pattern string   `json:"pattern,omitempty"`
	Streams []string `json:"streams,omitempty"`
	At      int64    `json:"at"` // unix ms of its registration
}

type index struct {
	Subs map[string]indexEntry `json:"subs"`
}

// loadIndex returns the index, read again when a change of it was
// announced or when the copy is IndexMaxAge old. The announcement alone
// is not enough: it may reach this replica after an append that began
// after another replica answered the registration, and that append
// would not link its stream. A copy whose read began less than
// IndexMaxAge ago is newer than every registration answered before now
// (published).
func (m *Manager) loadIndex(ctx context.Context, force bool) (index, error) {
	m.idxMu.Lock()
	defer m.idxMu.Unlock()
	if !m.idxStale && !force && time.Since(m.idxRead) < m.o.IndexMaxAge {
		return m.idx, nil
	}
	m.idxStale = false
	start := time.Now()
	idx, _, err := m.readIndex(ctx)
	if err != nil {
		m.idxStale = true
		return m.idx, err
	}
	m.idx, m.idxRead = idx, start
	return idx, nil
}

// published waits, after a change of the index, until every replica's
// cached copy has it (IndexMaxAge: see loadIndex), so that an append
// that begins after the change is answered matches against it.
func (m *Manager) published(ctx context.Context) {
	t := time.NewTimer(m.o.IndexMaxAge)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (m *Manager) readIndex(ctx context.Context) (index, uint64, error) {
	raw, ver, err := m.o.Docs.LoadDoc(ctx, indexDoc)
	if errors.Is(err, journal.ErrNotFound) {
		return index{Subs: map[string]indexEntry{}}, 0, nil
	}
	if err != nil {
		return index{}, 0, err
	}
	var idx index
	if err := json.Unmarshal(raw, &idx); err != nil {
		return index{}, 0, err
	}
	if idx.Subs == nil {
		idx.Subs = map[string]indexEntry{}
	}
	return idx, ver, nil
}

// changeIndex applies fn to the index by compare-and-set.
func (m *Manager) changeIndex(ctx context.Context, fn func(idx *index) (bool, *Error)) error {
	for range 64 {
		idx, ver, err := m.readIndex(ctx)
		if err != nil {
			return err
		}
		changed, e := fn(&idx)
		if e != nil {
			return e
		}
		if !changed {
			return nil
		}
		raw, _ := json.Marshal(idx)
		if _, err := m.o.Docs.PutDoc(ctx, indexDoc, ver, raw); errors.Is(err, journal.ErrConflict) {
			continue
		} else if err != nil {
			return err
		}
		m.idxMu.Lock()
		m.idxStale = true
		m.idxMu.Unlock()
		return nil
	}
	return errf(http.StatusServiceUnavailable, CodeUnavailable, "the subscription index is too busy; retry")
}

// match wakes the subscriptions an append concerns: those of the
