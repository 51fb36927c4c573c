package subscription

import (
	"context"
	"time"
)

func (m *Manager) sweeper() {
	defer m.wg.Done()
	t := time.NewTicker(m.o.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		m.sweep(m.ctx)
	}
}

// orphanAfter is how old an index entry without its document must be
// before the sweep removes it (a registration may be between the two).
const orphanAfter = time.Minute

// sweep checks every subscription: a lapsed lease ended, a wake issued
// for work none covers, a due delivery started; an index entry whose
// subscription is gone removed.
func (m *Manager) sweep(ctx context.Context) {
	idx, err := m.loadIndex(ctx, true)
	if err != nil {
		return
	}
	var orphans []string
	for id, e := range idx.Subs {
		if ctx.Err() != nil {
			return
		}
		_, _, err := m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) {
			return m.settle(s, tails), nil
		})
		if isNotFound(err) && m.now().Sub(time.UnixMilli(e.At)) > orphanAfter {
			orphans = append(orphans, id)
		}
	}
	if len(orphans) > 0 {
		_ = m.changeIndex(ctx, func(idx *index) (bool, *Error) {
			for _, id := range orphans {
				delete(idx.Subs, id)
			}
			return true, nil
		})
	}
}
