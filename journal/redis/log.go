package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Append journals e through the batcher (batch.go): one run of append.lua
// decides, atomically for each event, the existence, idempotency and
// terminal checks, the seq, the event, the meta, the session's active run
// and the feed record.
//
// With a key, a retry (of a call that timed out, say) returns the event
// stored the first time, until the run is trimmed. Without a key, a
// transport-level retry of the same batch (go-redis resends a command whose
// reply was lost) is recognised by the batch's reply cache; a caller that
// retries on its own should pass a key. An Append whose ctx ends while it
// waits returns ctx's error, and the event may or may not be journaled.
func (s *Store) Append(ctx context.Context, e protocol.Envelope, key string) (protocol.Envelope, error) {
	if err := s.check(); err != nil {
		return protocol.Envelope{}, err
	}
	p, err := journal.Prepare(e, s.opts.Now())
	if err != nil {
		return protocol.Envelope{}, err
	}
	r := &appendReq{ctx: ctx, e: p, key: key, done: make(chan struct{})}
	if !s.batch.submit(r) {
		return protocol.Envelope{}, journal.ErrClosed
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return protocol.Envelope{}, fmt.Errorf("journal/redis: append to %s: %w", p.RunID, ctx.Err())
	}
	if r.err != nil {
		return protocol.Envelope{}, r.err
	}
	reply := r.reply
	status, _ := reply[0].(string)
	switch status {
	case "ok":
		seq, err := replySeq(reply)
		if err != nil {
			return protocol.Envelope{}, err
		}
		p.Seq, p.EventID = seq, protocol.EventID(p.RunID, seq)
		return p, nil
	case "dup", "terminal":
		stored, err := replyEvent(p.RunID, reply)
		if err != nil {
			return protocol.Envelope{}, err
		}
		if status == "terminal" {
			return stored, fmt.Errorf("journal/redis: append to %s: %w", p.RunID, journal.ErrTerminal)
		}
		return stored, nil
	case "notfound":
		return protocol.Envelope{}, s.appendNotFound(ctx, p)
	case "session":
		owner, _ := reply[1].(string)
		return protocol.Envelope{}, &protocol.Error{Code: protocol.CodeBadRequest, Field: "session_id",
			Message: fmt.Sprintf("session_id: run %s belongs to session %s, not %s", p.RunID, owner, p.SessionID)}
	case "err":
		return protocol.Envelope{}, fmt.Errorf("journal/redis: append to %s: %v", p.RunID, reply[1:])
	}
	return protocol.Envelope{}, fmt.Errorf("journal/redis: append: unexpected reply %v", reply)
}

// appendNotFound explains an append the script found no run for in the
// shard of the event's session: the run may belong to another session (so
// live in another shard).
func (s *Store) appendNotFound(ctx context.Context, p protocol.Envelope) error {
	notFound := fmt.Errorf("journal/redis: append to run %s: %w", p.RunID, journal.ErrNotFound)
	n, found, err := s.lookup(ctx, p.RunID)
	if err != nil || !found || n == s.k.shardOf(p.SessionID) {
		return notFound
	}
	owner, err := s.rdb.HGet(ctx, s.k.run(n, p.RunID), "session_id").Result()
	if err != nil || owner == p.SessionID {
		return notFound
	}
	return &protocol.Error{Code: protocol.CodeBadRequest, Field: "session_id",
		Message: fmt.Sprintf("session_id: run %s belongs to session %s, not %s", p.RunID, owner, p.SessionID)}
}

func replySeq(reply []any) (uint64, error) {
	if len(reply) < 2 {
		return 0, fmt.Errorf("journal/redis: append: short reply %v", reply)
	}
	n, ok := reply[1].(int64)
	if !ok || n <= 0 {
		return 0, fmt.Errorf("journal/redis: append: bad seq %v", reply[1])
	}
	return uint64(n), nil
}

// replyEvent decodes {status, seq, fields} into the stored event.
func replyEvent(runID string, reply []any) (protocol.Envelope, error) {
	seq, err := replySeq(reply)
	if err != nil {
		return protocol.Envelope{}, err
	}
	var flat []any
	if len(reply) > 2 {
		flat, _ = reply[2].([]any)
	}
	if len(flat) == 0 {
		return protocol.Envelope{}, fmt.Errorf("journal/redis: run %s has no event at seq %d", runID, seq)
	}
	fields := make(map[string]any, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		fields[k] = flat[i+1]
	}
	return decodeEvent(runID, seq, fields)
}

// decodeEvent rebuilds an envelope from the fields of a run stream entry
// (s session, t type, c created_at, x terminal, p payload).
func decodeEvent(runID string, seq uint64, f map[string]any) (protocol.Envelope, error) {
	str := func(k string) string { v, _ := f[k].(string); return v }
	created, err := strconv.ParseFloat(str("c"), 64)
	if err != nil {
		return protocol.Envelope{}, fmt.Errorf("journal/redis: event %s:%d: created_at %q", runID, seq, str("c"))
	}
	return protocol.Envelope{
		EventID:   protocol.EventID(runID, seq),
		Seq:       seq,
		RunID:     runID,
		SessionID: str("s"),
		Type:      protocol.EventType(str("t")),
		CreatedAt: created,
		Terminal:  str("x") == "1",
		Payload:   json.RawMessage(str("p")),
	}, nil
}

// entrySeq parses the seq of a run stream entry id "<seq>-0".
func entrySeq(id string) (uint64, error) {
	ms, _, _ := strings.Cut(id, "-")
	return strconv.ParseUint(ms, 10, 64)
}

// entryID is the run stream entry id of seq.
func entryID(seq uint64) string { return strconv.FormatUint(seq, 10) + "-0" }

// Read returns up to limit events of the run after afterSeq with one XRANGE
// (plus an EXISTS when the page is empty, to tell an unknown run apart),
// after finding the run's shard (its locator, cached).
// limit <= 0 reads journal.ReadPage events.
func (s *Store) Read(ctx context.Context, runID string, afterSeq uint64, limit int) ([]protocol.Envelope, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = journal.ReadPage
	}
	n, found, cached, err := s.locate(ctx, runID)
	if err != nil {
		return nil, s.fail("read", err)
	}
	if !found {
		return nil, fmt.Errorf("journal/redis: read run %s: %w", runID, journal.ErrNotFound)
	}
	msgs, exists, err := s.readShard(ctx, n, runID, afterSeq, limit)
	if err == nil && !exists && cached {
		var moved bool
		if n, moved, err = s.relocate(ctx, runID, n); err == nil && moved {
			msgs, exists, err = s.readShard(ctx, n, runID, afterSeq, limit)
		}
	}
	if err != nil {
		return nil, s.fail("read", err)
	}
	if !exists {
		return nil, fmt.Errorf("journal/redis: read run %s: %w", runID, journal.ErrNotFound)
	}
	if len(msgs) == 0 {
		return []protocol.Envelope{}, nil
	}
	countMessages(&s.reads.runRecords, &s.reads.runBytes, msgs)
	out := make([]protocol.Envelope, 0, len(msgs))
	for _, m := range msgs {
		seq, err := entrySeq(m.ID)
		if err != nil {
			return nil, fmt.Errorf("journal/redis: run %s: entry id %q", runID, m.ID)
		}
		e, err := decodeEvent(runID, seq, m.Values)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// readShard reads a run's events in shard n with one XRANGE, plus an
// EXISTS when the page is empty, to tell an unknown run apart.
func (s *Store) readShard(ctx context.Context, n int, runID string, afterSeq uint64, limit int) ([]goredis.XMessage, bool, error) {
	var msgs []goredis.XMessage
	if afterSeq < math.MaxUint64 {
		var err error
		msgs, err = s.rdb.XRangeN(ctx, s.k.events(n, runID), entryID(afterSeq+1), "+", int64(limit)).Result()
		if err != nil {
			return nil, false, err
		}
	}
	if len(msgs) > 0 {
		return msgs, true, nil
	}
	c, err := s.rdb.Exists(ctx, s.k.run(n, runID)).Result()
	return nil, c == 1, err
}

// Run returns the run's meta.
func (s *Store) Run(ctx context.Context, runID string) (journal.RunMeta, error) {
	if err := s.check(); err != nil {
		return journal.RunMeta{}, err
	}
	n, found, cached, err := s.locate(ctx, runID)
	if err != nil {
		return journal.RunMeta{}, s.fail("run", err)
	}
	if !found {
		return journal.RunMeta{}, fmt.Errorf("journal/redis: run %s: %w", runID, journal.ErrNotFound)
	}
	h, err := s.rdb.HGetAll(ctx, s.k.run(n, runID)).Result()
	if err == nil && len(h) == 0 && cached {
		var moved bool
		if n, moved, err = s.relocate(ctx, runID, n); err == nil && moved {
			h, err = s.rdb.HGetAll(ctx, s.k.run(n, runID)).Result()
		}
	}
	if err != nil {
		return journal.RunMeta{}, s.fail("run", err)
	}
	if len(h) == 0 {
		return journal.RunMeta{}, fmt.Errorf("journal/redis: run %s: %w", runID, journal.ErrNotFound)
	}
	return decodeRunMeta(h)
}

func decodeRunMeta(h map[string]string) (journal.RunMeta, error) {
	m := journal.RunMeta{
		ID:           h["id"],
		SessionID:    h["session_id"],
		Owner:        h["owner"],
		Terminal:     h["terminal"] == "1",
		TerminalType: protocol.EventType(h["terminal_type"]),
	}
	var errs []error
	num := func(k string) float64 {
		if h[k] == "" {
			return 0
		}
		f, err := strconv.ParseFloat(h[k], 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q", k, h[k]))
		}
		return f
	}
	m.CreatedAt, m.TerminalAt = num("created_at"), num("terminal_at")
	if v := h["last_seq"]; v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("last_seq %q", v))
		}
		m.LastSeq = n
	}
	if r := h["request"]; r != "" {
		m.Request = json.RawMessage(r)
	}
	if err := errors.Join(errs...); err != nil {
		return m, fmt.Errorf("journal/redis: run %s meta: %w", m.ID, err)
	}
	return m, nil
}
