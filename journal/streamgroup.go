package journal

import (
	"context"
	"errors"
	"time"
)

// Appends to one stream are committed in groups: an append that finds a
// commit of its stream under way joins the group waiting behind it, and
// the group's first append (its leader) commits them all in one
// CommitStream once the stream is free: one transaction (one fsync) for
// the group. Each append is decided in arrival order against the meta its
// predecessors in the group leave (producer checks, closing, bounds), so
// the outcome is the one of appending them one by one; an append refused
// by its decision is answered alone and the others go on. A commit that
// fails fails every append it carried, none of which is then stored.
const (
	maxGroupAppends = 256
	maxGroupBytes   = 8 << 20 // a larger append commits alone

	groupCommitTimeout = 30 * time.Second // a group's commit, whoever's caller went away
)

type appendGroup struct {
	reqs  []*appendReq
	bytes int
}

type appendReq struct {
	a    StreamAppend
	res  StreamAppendResult
	err  error
	done chan struct{}
}

func (s *streams) AppendStream(ctx context.Context, name string, a StreamAppend) (StreamAppendResult, error) {
	r := &appendReq{a: a}
	s.mu.Lock()
	if g := s.groups[name]; g != nil && len(g.reqs) < maxGroupAppends && g.bytes+len(a.Data) <= maxGroupBytes {
		r.done = make(chan struct{})
		g.reqs = append(g.reqs, r)
		g.bytes += len(a.Data)
		s.mu.Unlock()
		<-r.done // the leader answers every append of its group
		return r.res, r.err
	}
	g := &appendGroup{reqs: []*appendReq{r}, bytes: len(a.Data)}
	s.groups[name] = g
	s.mu.Unlock()

	unlock := s.lock(name)
	s.mu.Lock()
	if s.groups[name] == g {
		delete(s.groups, name) // closed: later appends form the next group
	}
	reqs := g.reqs
	s.mu.Unlock()
	cctx := ctx
	if len(reqs) > 1 {
		// Others' appends ride on this commit: the leader's caller going
		// away must not fail them.
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), groupCommitTimeout)
		defer cancel()
	}
	rel := s.appendLocked(cctx, name, reqs)
	unlock()
	for _, q := range reqs[1:] {
		close(q.done)
	}
	if rel != "" {
		if rerr := s.release(ctx, rel); rerr != nil && r.err == nil {
			r.err = rerr
		}
	}
	return r.res, r.err
}

// appendLocked decides and commits a group of appends to name, answering
// each in its appendReq; it returns a fork source to release.
func (s *streams) appendLocked(ctx context.Context, name string, reqs []*appendReq) string {
	next := make([]*StreamMeta, len(reqs))
	for range commitAttempts {
		m, rel, err := s.live(ctx, name)
		if err != nil {
			for _, r := range reqs {
				r.res, r.err = StreamAppendResult{}, err
			}
			return rel
		}
		cur, commits := m, 0
		var recs []StreamRecord
		for i, r := range reqs {
			var rs []StreamRecord
			r.res, next[i], rs, r.err = s.decideAppend(cur, r.a)
			if r.err == nil && next[i] != nil {
				cur = *next[i]
				recs = append(recs, rs...)
				commits++
			}
		}
		if commits == 0 {
			return "" // every append is answered by its decision
		}
		cur.Version = m.Version + 1
		err = s.st.CommitStream(ctx, name, m.Version, cur, recs)
		if errors.Is(err, ErrConflict) {
			continue // changed elsewhere (another replica): decide again
		}
		if err == nil {
			s.st.NotifyStream(ctx, name)
		}
		for i, r := range reqs {
			if next[i] == nil || r.err != nil {
				continue
			}
			if err != nil {
				r.res, r.err = StreamAppendResult{}, err
				continue
			}
			mi := *next[i]
			mi.Version = cur.Version
			r.res.Info = StreamInfo{Meta: mi}
		}
		return ""
	}
	for _, r := range reqs {
		r.res, r.err = StreamAppendResult{}, streamErr(StreamBusy, nil, "stream %q is too busy to append to", name)
	}
	return ""
}
