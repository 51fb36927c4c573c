package adapter

import (
	"context"
	"iter"
	"sync"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Observe yields a run's events after afterSeq from the journal, then live
// ones from the bus, with no gap and no duplicate across the seam, and ends
// after the terminal event or when ctx ends. Live events that outrun the
// consumer are not buffered without bound: past a small buffer the observer
// falls back to reading the journal.
func Observe(ctx context.Context, s interface {
	journal.Log
	journal.Bus
}, runID string, afterSeq uint64) iter.Seq2[protocol.Envelope, error] {
	return func(yield func(protocol.Envelope, error) bool) {
		wake := make(chan struct{}, 1)
		var mu sync.Mutex
		var buf []protocol.Envelope
		const maxBuf = 256
		cancel := s.SubscribeRun(runID, func(e protocol.Envelope) {
			mu.Lock()
			if len(buf) < maxBuf {
				buf = append(buf, e)
			}
			mu.Unlock()
			select {
			case wake <- struct{}{}:
			default:
			}
		})
		defer cancel()
		next := afterSeq + 1
		for {
			// Catch up from the journal.
			page, err := s.Read(ctx, runID, next-1, journal.ReadPage)
			if err != nil {
				yield(protocol.Envelope{}, err)
				return
			}
			for _, e := range page {
				if e.Seq != next {
					continue
				}
				next++
				if !yield(e, nil) || e.Terminal {
					return
				}
			}
			if len(page) == journal.ReadPage {
				continue
			}
			if len(page) == 0 {
				// Nothing after the cursor: a run that has ended has nothing
				// more to give (e.g. a resume from its terminal event).
				if meta, err := s.Run(ctx, runID); err != nil {
					yield(protocol.Envelope{}, err)
					return
				} else if meta.Terminal && next > meta.LastSeq {
					return
				}
			}
			// Live: deliver buffered events while contiguous; any gap or
			// overflow goes back to the journal.
			for {
				mu.Lock()
				pending := buf
				buf = nil
				mu.Unlock()
				gap := false
				for _, e := range pending {
					if e.Seq < next {
						continue
					}
					if e.Seq > next {
						gap = true
						break
					}
					next++
					if !yield(e, nil) || e.Terminal {
						return
					}
				}
				if gap || len(pending) >= maxBuf {
					break
				}
				select {
				case <-ctx.Done():
					yield(protocol.Envelope{}, ctx.Err())
					return
				case <-wake:
				}
			}
		}
	}
}
