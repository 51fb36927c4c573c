package journal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"hash/fnv"
	"mime"
	"sort"
	"strings"
	"sync"
	"time"
)

// StreamLimits bound what NewStreams lets a stream hold.
type StreamLimits struct {
	// MaxStreamBytes bounds a stream's data (default 64 MiB).
	MaxStreamBytes int64
	// MaxProducers bounds the producers a stream remembers; past it the
	// least recently used is forgotten (default 1024).
	MaxProducers int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// commitAttempts bounds the retries of a commit that keeps losing its
// compare-and-set to another node.
const commitAttempts = 64

// touchEvery is how stale a TTL stream's LastAccess may get before a read
// writes it again.
const touchEvery = 200 * time.Millisecond

// NewStreams returns the Streams contract over st.
func NewStreams(st StreamStore, l StreamLimits) Streams {
	if l.MaxStreamBytes <= 0 {
		l.MaxStreamBytes = 64 << 20
	}
	if l.MaxProducers <= 0 {
		l.MaxProducers = 1024
	}
	if l.Now == nil {
		l.Now = time.Now
	}
	return &streams{st: st, l: l, groups: map[string]*appendGroup{}}
}

type streams struct {
	st    StreamStore
	l     StreamLimits
	locks [64]sync.Mutex // per stream name (striped): one commit at a time per name in this process

	mu     sync.Mutex
	groups map[string]*appendGroup // per stream name: the appends waiting for a commit that may still join it
}

func (s *streams) lock(name string) func() {
	h := fnv.New32a()
	h.Write([]byte(name))
	mu := &s.locks[h.Sum32()%uint32(len(s.locks))]
	mu.Lock()
	return mu.Unlock
}

// MediaType is ct's media type, lower case, without parameters.
func MediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(ct))
	}
	return mt
}

func newGen() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// live loads name for an operation: ErrNotFound-kind errors for a stream
// that is missing or expired (expiring it), StreamGone for a tombstone.
// release names a fork source to release after the caller unlocks.
func (s *streams) live(ctx context.Context, name string) (m StreamMeta, release string, err error) {
	m, err = s.st.LoadStream(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return m, "", streamErr(StreamNotFound, nil, "stream %q not found", name)
	}
	if err != nil {
		return m, "", err
	}
	if m.Deleted {
		return m, "", streamErr(StreamGone, &m, "stream %q was deleted", name)
	}
	if m.ExpiredAt(s.l.Now()) {
		release, err = s.expire(ctx, name, m)
		if err != nil {
			return m, "", err
		}
		return m, release, streamErr(StreamNotFound, nil, "stream %q expired", name)
	}
	return m, "", nil
}

// expire removes an expired stream (a tombstone while forks read it) and
// returns the fork source to release.
func (s *streams) expire(ctx context.Context, name string, m StreamMeta) (string, error) {
	if m.Forks > 0 {
		next := m
		next.Version++
		next.Deleted = true
		if err := s.st.CommitStream(ctx, name, m.Version, next, nil); err != nil && !errors.Is(err, ErrConflict) {
			return "", err
		}
		return "", nil
	}
	if err := s.st.DropStream(ctx, name, m.Version); err != nil {
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			return "", nil
		}
		return "", err
	}
	if m.Fork != nil {
		return m.Fork.From, nil
	}
	return "", nil
}

// release drops one fork reference of src, and src itself when it is a
// tombstone whose last fork this was (then its own source, and so on).
func (s *streams) release(ctx context.Context, src string) error {
	for src != "" {
		next, err := s.releaseOne(ctx, src)
		if err != nil {
			return err
		}
		src = next
	}
	return nil
}

func (s *streams) releaseOne(ctx context.Context, src string) (string, error) {
	unlock := s.lock(src)
	defer unlock()
	for range commitAttempts {
		m, err := s.st.LoadStream(ctx, src)
		if errors.Is(err, ErrNotFound) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if m.Forks <= 1 && (m.Deleted || m.ExpiredAt(s.l.Now())) {
			err := s.st.DropStream(ctx, src, m.Version)
			if errors.Is(err, ErrConflict) {
				continue
			}
			if err != nil {
				return "", err
			}
			s.st.NotifyStream(ctx, src)
			if m.Fork != nil {
				return m.Fork.From, nil
			}
			return "", nil
		}
		next := m
		next.Version++
		if next.Forks > 0 {
			next.Forks--
		}
		err = s.st.CommitStream(ctx, src, m.Version, next, nil)
		if errors.Is(err, ErrConflict) {
			continue
		}
		return "", err
	}
	return "", streamErr(StreamBusy, nil, "stream %q is too busy to release a fork", src)
}

func (s *streams) StreamHead(ctx context.Context, name string) (StreamInfo, error) {
	m, rel, err := s.live(ctx, name)
	if rel != "" {
		if rerr := s.release(ctx, rel); rerr != nil {
			return StreamInfo{}, rerr
		}
	}
	return StreamInfo{Meta: m}, err
}

func (s *streams) TouchStream(ctx context.Context, name string) (StreamInfo, error) {
	unlock := s.lock(name)
	m, rel, err := s.live(ctx, name)
	if err == nil {
		m, err = s.touchLocked(ctx, name, m)
	}
	unlock()
	if rel != "" {
		if rerr := s.release(ctx, rel); rerr != nil {
			return StreamInfo{}, rerr
		}
	}
	return StreamInfo{Meta: m}, err
}

// touchLocked slides m's TTL window when it is due.
func (s *streams) touchLocked(ctx context.Context, name string, m StreamMeta) (StreamMeta, error) {
	now := s.l.Now().UnixMilli()
	if !m.HasTTL || now-m.LastAccess < touchEvery.Milliseconds() {
		return m, nil
	}
	for range commitAttempts {
		next := m
		next.Version++
		next.LastAccess = now
		err := s.st.CommitStream(ctx, name, m.Version, next, nil)
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, ErrConflict) {
			return m, err
		}
		if m, err = s.st.LoadStream(ctx, name); err != nil {
			return m, err
		}
	}
	return m, nil // another node touched it meanwhile: as good
}

// readBatch is how many records a read asks the store for at a time.
const readBatch = 256

func (s *streams) ReadStream(ctx context.Context, name string, after uint64, maxBytes int, touch bool) (StreamRead, error) {
	var m StreamMeta
	var err error
	if touch {
		var info StreamInfo
		info, err = s.TouchStream(ctx, name)
		m = info.Meta
	} else {
		var rel string
		m, rel, err = s.live(ctx, name)
		if rel != "" {
			if rerr := s.release(ctx, rel); rerr != nil {
				return StreamRead{}, rerr
			}
		}
	}
	if err != nil {
		return StreamRead{Meta: m}, err
	}
	if after > m.Records {
		return StreamRead{Meta: m}, streamErr(StreamBadOffset, &m, "offset %d is past the stream's tail %d", after, m.Records)
	}
	recs, err := s.records(ctx, name, m, after, m.Records, maxBytes)
	return StreamRead{Records: recs, Meta: m}, err
}

// records reads m's records after..to, stopping past maxBytes (maxBytes
// <= 0: no bound) but returning at least one record.
func (s *streams) records(ctx context.Context, name string, m StreamMeta, after, to uint64, maxBytes int) ([]StreamRecord, error) {
	var out []StreamRecord
	size := 0
	batch := uint64(readBatch)
	if maxBytes > 0 && m.Records > 0 {
		// Ask for about as many records as maxBytes holds at the stream's
		// mean record size: a stream of 1 MiB records read 1 MiB at a time
		// must not copy 256 of them per answer.
		mean := max(m.Bytes/m.Records, 1)
		batch = min(batch, uint64(maxBytes)/mean+1)
	}
	for from := after + 1; from <= to; {
		end := min(to, from+batch-1)
		got, err := s.st.StreamRecords(ctx, name, m.Gen, from, end)
		if err != nil {
			return nil, err
		}
		if len(got) == 0 {
			return out, nil
		}
		for _, r := range got {
			if maxBytes > 0 && len(out) > 0 && size+len(r.Data) > maxBytes {
				return out, nil
			}
			out = append(out, r)
			size += len(r.Data)
		}
		from = got[len(got)-1].Index + 1
	}
	return out, nil
}

func (s *streams) DeleteStream(ctx context.Context, name string) error {
	unlock := s.lock(name)
	rel, err := s.deleteLocked(ctx, name)
	unlock()
	if rel != "" {
		if rerr := s.release(ctx, rel); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

func (s *streams) deleteLocked(ctx context.Context, name string) (string, error) {
	for range commitAttempts {
		m, rel, err := s.live(ctx, name)
		if err != nil {
			return rel, err
		}
		if m.Forks > 0 {
			next := m
			next.Version++
			next.Deleted = true
			err = s.st.CommitStream(ctx, name, m.Version, next, nil)
		} else {
			err = s.st.DropStream(ctx, name, m.Version)
		}
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return "", err
		}
		s.st.NotifyStream(ctx, name)
		if m.Forks == 0 && m.Fork != nil {
			return m.Fork.From, nil
		}
		return "", nil
	}
	return "", streamErr(StreamBusy, nil, "stream %q is too busy to delete", name)
}

func (s *streams) SubscribeStream(name string, fn func()) func() {
	return s.st.SubscribeStream(name, fn)
}

func (s *streams) ReapStreams(ctx context.Context, now time.Time) (int, error) {
	names, err := s.st.ExpiringStreams(ctx)
	if err != nil {
		return 0, err
	}
	sort.Strings(names)
	n := 0
	for _, name := range names {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		m, err := s.st.LoadStream(ctx, name)
		if err != nil || m.Deleted || !m.ExpiredAt(now) {
			continue
		}
		unlock := s.lock(name)
		_, rel, lerr := s.live(ctx, name)
		unlock()
		if rel != "" {
			if err := s.release(ctx, rel); err != nil {
				return n, err
			}
		}
		var se *StreamError
		if errors.As(lerr, &se) && se.Kind == StreamNotFound {
			n++
		}
	}
	return n, nil
}
