package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sort"
)

func (s *streams) CreateStream(ctx context.Context, name string, c StreamCreate) (StreamInfo, bool, error) {
	for range commitAttempts {
		info, created, retry, err := s.createOnce(ctx, name, c)
		if !retry {
			return info, created, err
		}
	}
	return StreamInfo{}, false, streamErr(StreamBusy, nil, "stream %q is too busy to create", name)
}

// createOnce is one attempt of CreateStream; retry asks for another.
func (s *streams) createOnce(ctx context.Context, name string, c StreamCreate) (info StreamInfo, created, retry bool, err error) {
	unlock := s.lock(name)
	defer func() {
		unlock()
	}()
	m, rel, err := s.live(ctx, name)
	if rel != "" {
		unlock()
		if rerr := s.release(ctx, rel); rerr != nil {
			unlock = s.lock(name)
			return info, false, false, rerr
		}
		unlock = s.lock(name)
		return info, false, true, nil
	}
	var se *StreamError
	switch {
	case err == nil:
		if sameConfig(m, c) {
			return StreamInfo{Meta: m}, false, false, nil
		}
		return StreamInfo{Meta: m}, false, false, streamErr(StreamConfigConflict, &m, "stream %q exists with another configuration", name)
	case errors.As(err, &se) && se.Kind == StreamGone:
		return info, false, false, streamErr(StreamConfigConflict, &m, "stream %q was deleted and is kept for its forks: it cannot be created again yet", name)
	case errors.As(err, &se) && se.Kind == StreamNotFound:
	default:
		return info, false, false, err
	}

	now := s.l.Now().UnixMilli()
	next := StreamMeta{Version: 1, Gen: newGen(), Owner: c.Owner, ContentType: c.ContentType,
		TTL: c.TTL, HasTTL: c.HasTTL, ExpiresAt: c.ExpiresAt, LastAccess: now, CreatedAt: now, Closed: c.Closed}
	var recs []StreamRecord
	var src StreamMeta
	if c.Fork != nil {
		if c.Fork.From == name {
			return info, false, false, streamErr(StreamBadOffset, nil, "a stream cannot fork itself")
		}
		src, err = s.forkSource(ctx, c)
		if err != nil {
			return info, false, false, err
		}
		if next.ContentType == "" {
			next.ContentType = src.ContentType
		}
		if !c.HasTTL && c.ExpiresAt == 0 {
			next.TTL, next.HasTTL, next.ExpiresAt = src.TTL, src.HasTTL, src.ExpiresAt
		}
		f := *c.Fork
		next.Fork = &f
		if recs, err = s.forkRecords(ctx, c.Fork.From, src, c.Fork); err != nil {
			return info, false, false, err
		}
		if n := len(recs); n > 0 {
			next.Records, next.Bytes = recs[n-1].Index, recs[n-1].End
		}
	}
	if c.Initial != nil && len(c.Initial.Data) > 0 {
		r := *c.Initial
		next.Records++
		next.Bytes += uint64(len(r.Data))
		r.Index, r.End = next.Records, next.Bytes
		recs = append(recs, r)
	}
	if int64(next.Bytes) > s.l.MaxStreamBytes {
		return info, false, false, streamErr(StreamTooLarge, nil, "stream %q would hold %d bytes, more than %d", name, next.Bytes, s.l.MaxStreamBytes)
	}
	if c.Fork != nil {
		// The source's count of forks first: a crash between the two
		// leaves a count too high (the source outlives its forks), never
		// a fork whose source is gone.
		ns := src
		ns.Version++
		ns.Forks++
		if err := s.st.CommitStream(ctx, c.Fork.From, src.Version, ns, nil); err != nil {
			if errors.Is(err, ErrConflict) {
				return info, false, true, nil
			}
			return info, false, false, err
		}
	}
	if err := s.st.CommitStream(ctx, name, 0, next, recs); err != nil {
		if c.Fork != nil {
			unlock()
			if rerr := s.release(ctx, c.Fork.From); rerr != nil {
				unlock = s.lock(name)
				return info, false, false, rerr
			}
			unlock = s.lock(name)
		}
		if errors.Is(err, ErrConflict) {
			return info, false, true, nil
		}
		return info, false, false, err
	}
	s.st.NotifyStream(ctx, name)
	return StreamInfo{Meta: next}, true, false, nil
}

// forkSource loads and checks a fork's source.
func (s *streams) forkSource(ctx context.Context, c StreamCreate) (StreamMeta, error) {
	from := c.Fork.From
	src, rel, err := s.live(ctx, from)
	if rel != "" {
		if rerr := s.release(ctx, rel); rerr != nil {
			return src, rerr
		}
	}
	var se *StreamError
	if errors.As(err, &se) && se.Kind == StreamGone {
		return src, streamErr(StreamConfigConflict, nil, "the fork's source %q was deleted", from)
	}
	if err != nil {
		return src, err
	}
	if c.ContentType != "" && MediaType(c.ContentType) != MediaType(src.ContentType) {
		return src, streamErr(StreamConfigConflict, nil, "the fork's content type %q is not its source's %q", c.ContentType, src.ContentType)
	}
	f := c.Fork
	if f.HasOffset && f.Offset > src.Records {
		return src, streamErr(StreamBadOffset, nil, "fork offset %d is past the source's tail %d", f.Offset, src.Records)
	}
	if f.Sub > 0 && (!f.HasOffset || f.Offset+1 > src.Records) {
		return src, streamErr(StreamBadOffset, nil, "a fork sub-offset needs a Stream-Fork-Offset with a record after it")
	}
	return src, nil
}

// forkRecords copies what a fork inherits: the source's records up to the
// offset, and the sub-offset's prefix of the next one.
func (s *streams) forkRecords(ctx context.Context, from string, src StreamMeta, f *StreamFork) ([]StreamRecord, error) {
	upto := src.Records
	if f.HasOffset {
		upto = f.Offset
	}
	recs, err := s.records(ctx, from, src, 0, upto, 0)
	if err != nil {
		return nil, err
	}
	if uint64(len(recs)) != upto {
		return nil, streamErr(StreamBusy, nil, "the fork's source %q changed while it was read", from)
	}
	if f.Sub == 0 {
		return recs, nil
	}
	nextRec, err := s.st.StreamRecords(ctx, from, src.Gen, upto+1, upto+1)
	if err != nil {
		return nil, err
	}
	if len(nextRec) != 1 {
		return nil, streamErr(StreamBadOffset, nil, "no record after the fork offset")
	}
	r := nextRec[0]
	var end uint64
	if n := len(recs); n > 0 {
		end = recs[n-1].End
	}
	part := StreamRecord{Index: upto + 1}
	if MediaType(src.ContentType) == "application/json" {
		msgs, err := SplitJSONMessages(r.Data)
		if err != nil {
			return nil, err
		}
		if f.Sub > uint64(len(msgs)) {
			return nil, streamErr(StreamBadOffset, nil, "fork sub-offset %d is past the record's %d messages", f.Sub, len(msgs))
		}
		parts := make([][]byte, f.Sub)
		for i := range parts {
			parts[i] = msgs[i]
		}
		part.Data = bytes.Join(parts, []byte(","))
		part.Count = int(f.Sub)
	} else {
		if f.Sub > uint64(len(r.Data)) {
			return nil, streamErr(StreamBadOffset, nil, "fork sub-offset %d is past the record's %d bytes", f.Sub, len(r.Data))
		}
		part.Data = append([]byte(nil), r.Data[:f.Sub]...)
	}
	part.End = end + uint64(len(part.Data))
	return append(recs, part), nil
}

// SplitJSONMessages splits a JSON record's data (values joined by commas)
// into its messages.
func SplitJSONMessages(data []byte) ([]json.RawMessage, error) {
	var msgs []json.RawMessage
	if len(data) == 0 {
		return nil, nil
	}
	buf := make([]byte, 0, len(data)+2)
	buf = append(append(append(buf, '['), data...), ']')
	if err := json.Unmarshal(buf, &msgs); err != nil {
		return nil, err
	}
	return msgs, nil
}

func sameConfig(m StreamMeta, c StreamCreate) bool {
	ct := c.ContentType
	if ct == "" && c.Fork != nil {
		ct = m.ContentType
	}
	if MediaType(ct) != MediaType(m.ContentType) {
		return false
	}
	if c.Fork == nil {
		if m.Fork != nil || c.HasTTL != m.HasTTL || c.TTL != m.TTL || c.ExpiresAt != m.ExpiresAt {
			return false
		}
	} else {
		if m.Fork == nil || *m.Fork != *c.Fork {
			return false
		}
		if (c.HasTTL || c.ExpiresAt != 0) && (c.HasTTL != m.HasTTL || c.TTL != m.TTL || c.ExpiresAt != m.ExpiresAt) {
			return false
		}
	}
	return true
}

// decideAppend is an append's verdict on m: the result, and the meta and
// records to commit (nil next: nothing to commit).
func (s *streams) decideAppend(m StreamMeta, a StreamAppend) (StreamAppendResult, *StreamMeta, []StreamRecord, error) {
	res := StreamAppendResult{Info: StreamInfo{Meta: m}}
	now := s.l.Now().UnixMilli()
	p := a.Producer
	if p != nil {
		res.Epoch, res.Seq = p.Epoch, p.Seq
		if ps := m.Producers[p.ID]; ps != nil {
			switch {
			case p.Epoch < ps.Epoch:
				e := streamErr(ProducerStale, &m, "producer %q's epoch %d is below its current epoch %d", p.ID, p.Epoch, ps.Epoch)
				e.Epoch = ps.Epoch
				return res, nil, nil, e
			case p.Epoch == ps.Epoch && p.Seq <= ps.LastSeq:
				res.Duplicate, res.Epoch, res.Seq = true, ps.Epoch, ps.LastSeq
				return res, nil, nil, nil
			case p.Epoch > ps.Epoch && p.Seq != 0:
				return res, nil, nil, streamErr(ProducerBadSeq, &m, "producer %q's new epoch %d must start at seq 0, not %d", p.ID, p.Epoch, p.Seq)
			case p.Epoch == ps.Epoch && p.Seq > ps.LastSeq+1:
				e := streamErr(ProducerGap, &m, "producer %q's seq %d skips past the expected %d", p.ID, p.Seq, ps.LastSeq+1)
				e.Expected, e.Received = ps.LastSeq+1, p.Seq
				return res, nil, nil, e
			}
		} else if p.Seq != 0 {
			e := streamErr(ProducerGap, &m, "producer %q is new here: its first seq must be 0, not %d", p.ID, p.Seq)
			e.Expected, e.Received = 0, p.Seq
			return res, nil, nil, e
		}
	}
	if m.Closed {
		if a.Close && len(a.Data) == 0 && p == nil {
			return res, nil, nil, nil // closing a closed stream: done already
		}
		return res, nil, nil, streamErr(StreamClosed, &m, "stream is closed")
	}
	if len(a.Data) > 0 && MediaType(a.ContentType) != MediaType(m.ContentType) {
		return res, nil, nil, streamErr(StreamContentType, &m, "content type %q is not the stream's %q", a.ContentType, m.ContentType)
	}
	if a.StreamSeq != "" && m.StreamSeq != "" && a.StreamSeq <= m.StreamSeq {
		return res, nil, nil, streamErr(StreamSeqConflict, &m, "Stream-Seq %q is not above the last one, %q", a.StreamSeq, m.StreamSeq)
	}
	if int64(m.Bytes)+int64(len(a.Data)) > s.l.MaxStreamBytes {
		return res, nil, nil, streamErr(StreamTooLarge, &m, "the append would make the stream %d bytes, more than %d", int64(m.Bytes)+int64(len(a.Data)), s.l.MaxStreamBytes)
	}
	next := m
	next.Version++
	next.LastAccess = now
	var recs []StreamRecord
	if len(a.Data) > 0 {
		next.Records++
		next.Bytes += uint64(len(a.Data))
		recs = []StreamRecord{{Index: next.Records, End: next.Bytes, Count: a.Count, Data: a.Data}}
	}
	if a.StreamSeq != "" {
		next.StreamSeq = a.StreamSeq
	}
	if p != nil {
		prods := make(map[string]*ProducerState, len(m.Producers)+1)
		for k, v := range m.Producers {
			prods[k] = v
		}
		prods[p.ID] = &ProducerState{Epoch: p.Epoch, LastSeq: p.Seq, Used: now}
		evictProducers(prods, s.l.MaxProducers)
		next.Producers = prods
	}
	if a.Close {
		next.Closed = true
		if p != nil {
			t := *p
			next.ClosedBy = &t
		}
	}
	return res, &next, recs, nil
}

// evictProducers forgets the least recently used producers past max.
func evictProducers(prods map[string]*ProducerState, max int) {
	if len(prods) <= max {
		return
	}
	ids := make([]string, 0, len(prods))
	for id := range prods {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return prods[ids[i]].Used < prods[ids[j]].Used })
	for _, id := range ids[:len(prods)-max] {
		delete(prods, id)
	}
}
