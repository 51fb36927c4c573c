package redis

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/journal"
)

// Durable streams in Redis: a stream's meta is a hash ("v" its version,
// "g" its generation, "m" the JSON) at <prefix>ds:{<name>}:m, its records
// a Redis Stream at <prefix>ds:{<name>}:x:<gen>, one entry a record,
// whose ID is <the record's index>-0 and whose field "d" holds the
// record's end (8 bytes), its JSON message count (4 bytes) and its data.
// Both carry the stream's name as hash tag, so the compare-and-set script
// that appends touches one Cluster slot. (A generation written by an
// earlier runhub keeps its records in a list, <prefix>ds:{<name>}:r:<gen>,
// one element a record: it is read and appended to as a list.) Streams
// with an expiry are listed in the set <prefix>ds:expiring (added before
// the commit: a superset). A commit is announced (the name as message) on
// the notify channel of the name's partition (notify.go), to the Stores
// that have live readers in that partition.

var commitStreamScript = goredis.NewScript(`
local v = redis.call('HGET', KEYS[1], 'v')
if not v then v = '0' end
if v ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'g', ARGV[3], 'm', ARGV[4])
if #ARGV > 4 and redis.call('EXISTS', KEYS[3]) == 1 then
  for i = 6, #ARGV, 2 do redis.call('RPUSH', KEYS[3], ARGV[i]) end
  return 1
end
for i = 5, #ARGV, 2 do redis.call('XADD', KEYS[2], ARGV[i] .. '-0', 'd', ARGV[i + 1]) end
return 1
`)

var dropStreamScript = goredis.NewScript(`
local v = redis.call('HGET', KEYS[1], 'v')
if not v then return -1 end
if v ~= ARGV[1] then return 0 end
local g = redis.call('HGET', KEYS[1], 'g')
redis.call('DEL', KEYS[1], KEYS[2] .. g, KEYS[3] .. g)
return 1
`)

func (k keyspace) streamMeta(name string) string { return k.prefix + "ds:{" + name + "}:m" }
func (k keyspace) streamLog(name, gen string) string {
	return k.prefix + "ds:{" + name + "}:x:" + gen
}
func (k keyspace) streamLogBase(name string) string { return k.prefix + "ds:{" + name + "}:x:" }

// streamRecords is an earlier runhub's list of a generation's records.
func (k keyspace) streamRecords(name, gen string) string {
	return k.prefix + "ds:{" + name + "}:r:" + gen
}
func (k keyspace) streamRecordsBase(name string) string { return k.prefix + "ds:{" + name + "}:r:" }
func (k keyspace) streamsExpiring() string              { return k.prefix + "ds:expiring" }

// Streams returns the durable streams held in s.
func (s *Store) Streams(l journal.StreamLimits) journal.Streams {
	return journal.NewStreams(StreamStore{s}, l)
}

// Docs returns the documents held in s (journal.Docs).
func (s *Store) Docs() journal.Docs { return journal.NewDocs(StreamStore{s}) }

// StreamStore is the journal.StreamStore of a Store.
type StreamStore struct{ s *Store }

var _ journal.StreamStore = StreamStore{}

// LoadStream implements journal.StreamStore.
func (ss StreamStore) LoadStream(ctx context.Context, name string) (journal.StreamMeta, error) {
	var m journal.StreamMeta
	if err := ss.s.check(); err != nil {
		return m, err
	}
	raw, err := ss.s.rdb.HGet(ctx, ss.s.k.streamMeta(name), "m").Result()
	if errors.Is(err, goredis.Nil) {
		return m, journal.ErrNotFound
	}
	if err != nil {
		return m, ss.s.fail("stream load", err)
	}
	return m, json.Unmarshal([]byte(raw), &m)
}

// StreamRecords implements journal.StreamStore.
func (ss StreamStore) StreamRecords(ctx context.Context, name, gen string, from, to uint64) ([]journal.StreamRecord, error) {
	if err := ss.s.check(); err != nil {
		return nil, err
	}
	if from < 1 {
		from = 1
	}
	if to < from {
		return nil, nil
	}
	msgs, err := ss.s.rdb.XRange(ctx, ss.s.k.streamLog(name, gen), strconv.FormatUint(from, 10)+"-0", strconv.FormatUint(to, 10)+"-0").Result()
	if err != nil {
		return nil, ss.s.fail("stream records", err)
	}
	if len(msgs) == 0 {
		return ss.listRecords(ctx, name, gen, from, to)
	}
	out := make([]journal.StreamRecord, 0, len(msgs))
	for i, m := range msgs {
		v, _ := m.Values["d"].(string)
		r, ok := decodeStreamRecord(from+uint64(i), v)
		if !ok || m.ID != strconv.FormatUint(r.Index, 10)+"-0" {
			return nil, errors.New("journal/redis: a stream record is cut short or out of place")
		}
		out = append(out, r)
	}
	return out, nil
}

// listRecords reads records of a generation an earlier runhub wrote, as a
// list (none: the generation has no such list either).
func (ss StreamStore) listRecords(ctx context.Context, name, gen string, from, to uint64) ([]journal.StreamRecord, error) {
	vals, err := ss.s.rdb.LRange(ctx, ss.s.k.streamRecords(name, gen), int64(from-1), int64(to-1)).Result()
	if err != nil {
		return nil, ss.s.fail("stream records", err)
	}
	out := make([]journal.StreamRecord, 0, len(vals))
	for i, v := range vals {
		r, ok := decodeStreamRecord(from+uint64(i), v)
		if !ok {
			return nil, errors.New("journal/redis: a stream record is cut short")
		}
		out = append(out, r)
	}
	return out, nil
}

// decodeStreamRecord is a record's stored form: its end (8 bytes), its
// JSON message count (4 bytes), its data.
func decodeStreamRecord(index uint64, v string) (journal.StreamRecord, bool) {
	if len(v) < 12 {
		return journal.StreamRecord{}, false
	}
	return journal.StreamRecord{Index: index, End: binary.BigEndian.Uint64([]byte(v[:8])),
		Count: int(binary.BigEndian.Uint32([]byte(v[8:12]))), Data: []byte(v[12:])}, true
}

// CommitStream implements journal.StreamStore.
func (ss StreamStore) CommitStream(ctx context.Context, name string, prev uint64, next journal.StreamMeta, recs []journal.StreamRecord) error {
	if err := ss.s.check(); err != nil {
		return err
	}
	raw, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if prev == 0 && next.Expiring() { // a stream's expiry is set at its creation only
		if err := ss.s.rdb.SAdd(ctx, ss.s.k.streamsExpiring(), name).Err(); err != nil {
			return ss.s.fail("stream expiring", err)
		}
	}
	args := make([]any, 0, 4+2*len(recs))
	args = append(args, strconv.FormatUint(prev, 10), strconv.FormatUint(next.Version, 10), next.Gen, raw)
	for _, r := range recs {
		v := make([]byte, 12, 12+len(r.Data))
		binary.BigEndian.PutUint64(v, r.End)
		binary.BigEndian.PutUint32(v[8:], uint32(r.Count))
		args = append(args, strconv.FormatUint(r.Index, 10), append(v, r.Data...))
	}
	keys := []string{ss.s.k.streamMeta(name), ss.s.k.streamLog(name, next.Gen), ss.s.k.streamRecords(name, next.Gen)}
	n, err := commitStreamScript.Run(ctx, ss.s.rdb, keys, args...).Int()
	if err != nil {
		return ss.s.fail("stream commit", err)
	}
	if n == 0 {
		return journal.ErrConflict
	}
	return nil
}

// DropStream implements journal.StreamStore.
func (ss StreamStore) DropStream(ctx context.Context, name string, version uint64) error {
	if err := ss.s.check(); err != nil {
		return err
	}
	keys := []string{ss.s.k.streamMeta(name), ss.s.k.streamRecordsBase(name), ss.s.k.streamLogBase(name)}
	n, err := dropStreamScript.Run(ctx, ss.s.rdb, keys, strconv.FormatUint(version, 10)).Int()
	if err != nil {
		return ss.s.fail("stream drop", err)
	}
	switch n {
	case -1:
		return journal.ErrNotFound
	case 0:
		return journal.ErrConflict
	}
	_ = ss.s.rdb.SRem(ctx, ss.s.k.streamsExpiring(), name).Err()
	return nil
}

// ExpiringStreams implements journal.StreamStore.
func (ss StreamStore) ExpiringStreams(ctx context.Context) ([]string, error) {
	if err := ss.s.check(); err != nil {
		return nil, err
	}
	names, err := ss.s.rdb.SMembers(ctx, ss.s.k.streamsExpiring()).Result()
	if err != nil {
		return nil, ss.s.fail("streams expiring", err)
	}
	// One pipeline of EXISTS (each its own slot on a Cluster); the names
	// whose stream is gone leave the set.
	pipe := ss.s.rdb.Pipeline()
	exists := make([]*goredis.IntCmd, len(names))
	for i, name := range names {
		exists[i] = pipe.Exists(ctx, ss.s.k.streamMeta(name))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, ss.s.fail("streams expiring", err)
	}
	var out []string
	var gone []any
	for i, name := range names {
		if exists[i].Val() == 0 {
			gone = append(gone, name)
			continue
		}
		out = append(out, name)
	}
	if len(gone) > 0 {
		_ = ss.s.rdb.SRem(ctx, ss.s.k.streamsExpiring(), gone...).Err()
	}
	return out, nil
}

// SubscribeStream implements journal.StreamStore.
func (ss StreamStore) SubscribeStream(name string, fn func()) func() {
	return ss.s.subscribeStream(name, fn)
}

// NotifyStream implements journal.StreamStore.
func (ss StreamStore) NotifyStream(ctx context.Context, name string) {
	ss.s.notifyStream(ctx, name)
}
