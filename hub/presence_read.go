package hub

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// What statuses carry: a session's presence, merged from its two targets.

// lookup returns the presence of a session as last merged, and has its
// targets read when they are not known yet. The tracker calls it with its
// lock held (lock order: tracker, then presence).
func (p *presence) lookup(sid, owner string) *protocol.Presence {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.store != nil {
		for _, t := range []string{"s:" + sid, "o:" + owner} {
			if _, ok := p.merged[t]; !ok {
				p.stale[t] = struct{}{}
			}
		}
	}
	return p.compute(sid, owner)
}

// prefetch reads the sessions' targets from the store, in one call, when
// they are not known yet, so that a status sent at once (a watch's
// snapshot, the one after a load) carries every hub's count rather than
// this hub's alone and a second status when the next flush reads them. A
// failure leaves them to that flush (lookup marks them stale).
func (p *presence) prefetch(ctx context.Context, metas ...journal.SessionMeta) {
	if p.store == nil || len(metas) == 0 {
		return
	}
	var missing []string
	seen := map[string]struct{}{}
	p.mu.Lock()
	for _, m := range metas {
		for _, t := range []string{"s:" + m.ID, "o:" + m.Owner} {
			if _, known := p.merged[t]; known {
				continue
			}
			if _, dup := seen[t]; !dup {
				seen[t] = struct{}{}
				missing = append(missing, t)
			}
		}
	}
	p.mu.Unlock()
	if len(missing) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	p.io.Lock() // not between a publish and its update of pub
	defer p.io.Unlock()
	entries, err := p.store.Get(ctx, missing)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range missing {
		if _, ok := p.merged[t]; !ok {
			p.merged[t] = mergeEntries(entries[t])
		}
	}
}

// compute merges a session's two targets: this hub's own counts without a
// store, else the entries of every hub as last read with this hub's share
// of them as it is now (not as last published), so that a status sent at
// once (a watch's snapshot) already counts a change the next flush
// publishes, and that flush, reading it back, finds nothing to resend.
// Called with p.mu held.
func (p *presence) compute(sid, owner string) *protocol.Presence {
	if p.store == nil {
		return computeFrom(p.local, sid, owner)
	}
	src := make(map[string]pentry, 2)
	for _, t := range []string{"s:" + sid, "o:" + owner} {
		src[t] = p.current(t)
	}
	return computeFrom(src, sid, owner)
}

// current is target t's counts over every hub as last read, with this
// hub's published entry replaced by its counts now. Called with p.mu held.
func (p *presence) current(t string) pentry {
	merged, pub, local := p.merged[t], p.pub[t], p.local[t]
	if len(pub) == 0 && len(local) == 0 {
		return merged
	}
	out := make(pentry, len(merged)+len(local))
	for subject, n := range merged {
		out[subject] = n
	}
	for subject, n := range pub {
		cur := out[subject]
		cur.W, cur.F = max(cur.W-n.W, 0), max(cur.F-n.F, 0)
		out[subject] = cur
	}
	for subject, n := range local {
		cur := out[subject]
		cur.W += n.W
		cur.F += n.F
		out[subject] = cur
	}
	for subject, n := range out {
		if n.W == 0 && n.F == 0 {
			delete(out, subject)
		}
	}
	return out
}

// computeFrom merges a session's two targets of src. A few subjects (the
// common case: a session's owner, an admin) are summed in an array on the
// stack; past smallPresence, in a map.
func computeFrom(src map[string]pentry, sid, owner string) *protocol.Presence {
	a, b := src["s:"+sid], src["o:"+owner]
	if len(a)+len(b) == 0 {
		return nil
	}
	var buf [smallPresence]protocol.PresenceSubject
	sum := buf[:0]
	if len(a)+len(b) <= smallPresence {
		for _, e := range [2]pentry{a, b} {
			for subject, n := range e {
				i := slices.IndexFunc(sum, func(s protocol.PresenceSubject) bool { return s.Subject == subject })
				if i < 0 {
					sum = append(sum, protocol.PresenceSubject{Subject: subject})
					i = len(sum) - 1
				}
				sum[i].Watching += n.W
				sum[i].Focused += n.F
			}
		}
	} else {
		bySubject := map[string]pcount{}
		for _, e := range [2]pentry{a, b} {
			for subject, n := range e {
				cur := bySubject[subject]
				cur.W += n.W
				cur.F += n.F
				bySubject[subject] = cur
			}
		}
		for subject, n := range bySubject {
			sum = append(sum, protocol.PresenceSubject{Subject: subject, Watching: n.W, Focused: n.F})
		}
	}
	slices.SortFunc(sum, func(x, y protocol.PresenceSubject) int { return strings.Compare(x.Subject, y.Subject) })
	out := &protocol.Presence{Subjects: make([]protocol.PresenceSubject, 0, min(len(sum), protocol.MaxPresenceSubjects))}
	for _, n := range sum {
		out.Watching += n.Watching
		out.Focused += n.Focused
		if len(out.Subjects) < protocol.MaxPresenceSubjects {
			out.Subjects = append(out.Subjects, n)
		}
	}
	return out
}

// smallPresence is the most subjects computeFrom sums without a map.
const smallPresence = 8

// mergeEntries sums the entries of every hub of one target.
func mergeEntries(raws [][]byte) pentry {
	sum := pentry{}
	for _, raw := range raws {
		var e pentry
		if json.Unmarshal(raw, &e) != nil {
			continue
		}
		for subject, n := range e {
			cur := sum[subject]
			cur.W += max(n.W, 0)
			cur.F += max(n.F, 0)
			if cur.W > 0 || cur.F > 0 {
				sum[subject] = cur
			}
		}
	}
	return sum
}
