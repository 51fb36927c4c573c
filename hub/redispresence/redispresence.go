// Package redispresence shares session presence (who watches and focuses
// each session) among the hub replicas that use one Redis. It implements
// hub.PresenceStore.
//
// Each target (a session, or an owner's sessions as a whole) has a hash,
// <prefix>presence:{<target>}, with one field per hub: the hub's entry,
// prefixed with when it lapses ("<ms>|<entry>", Redis's clock). A hub puts
// its changed entries with one script per target and announces the
// targets on the channel <prefix>presence; it renews its live entries
// every TTL/3. A hub that dies stops renewing: readers skip (and delete)
// its lapsed fields, so its tabs leave the counts within TTL.
//
// A Store's methods are safe for concurrent use. One goroutine renews the
// entries until Close; each Subscribe owns one more until its cancel.
package redispresence

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/internal/redisclaims"
)

// DefaultTTL is how long an entry outlives its hub's last renewal.
const DefaultTTL = 10 * time.Second

// Options configures a Store (the options every store of claims takes).
type Options = redisclaims.Options

// Store is one hub's handle on the shared presence.
type Store struct {
	rdb  goredis.UniversalClient
	opts Options
	id   string // this hub's field in every hash

	wmu  sync.Mutex // one write (Put or renew) at a time: a renewal never revives a withdrawn entry
	mu   sync.Mutex
	mine map[string]string // target → this hub's live entry

	renewer *redisclaims.Renewer
}

//go:embed lua/put.lua
var putLua string

// putScript sets this hub's field of a target's hash with its lapse time.
// KEYS[1] the hash; ARGV[1] field, ARGV[2] TTL ms, ARGV[3] entry.
var putScript = redisclaims.Script(putLua)

//go:embed lua/get.lua
var getLua string

// getScript returns the live entries of a target's hash and deletes the
// lapsed ones. KEYS[1] the hash.
var getScript = redisclaims.Script(getLua)

// New returns a Store on rdb and starts its renewal; Close stops it.
func New(rdb goredis.UniversalClient, opts Options) *Store {
	opts.Prefix, opts.TTL, opts.Logger = redisclaims.Defaults(opts.Prefix, opts.TTL, DefaultTTL, opts.Logger)
	var b [12]byte
	rand.Read(b[:])
	s := &Store{rdb: rdb, opts: opts, id: hex.EncodeToString(b[:]), mine: map[string]string{}}
	s.renewer = redisclaims.StartRenewer(opts.TTL, s.renew)
	return s
}

func (s *Store) key(target string) string { return s.opts.Prefix + "presence:{" + target + "}" }
func (s *Store) channel() string          { return s.opts.Prefix + "presence" }

// Put implements hub.PresenceStore: one pipeline sets or removes this
// hub's entry of each target and announces them.
func (s *Store) Put(ctx context.Context, entries map[string][]byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	for target, e := range entries {
		if len(e) == 0 {
			delete(s.mine, target)
		} else {
			s.mine[target] = string(e)
		}
	}
	s.mu.Unlock()
	ttl := s.opts.TTL.Milliseconds()
	_, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for target, e := range entries {
			if len(e) == 0 {
				p.HDel(ctx, s.key(target), s.id)
			} else {
				putScript.Eval(ctx, p, []string{s.key(target)}, s.id, ttl, string(e)) // EVAL: a pipeline cannot fall back from EVALSHA
			}
			p.Publish(ctx, s.channel(), s.id+" "+target)
		}
		return nil
	})
	return err
}

// Get implements hub.PresenceStore.
func (s *Store) Get(ctx context.Context, targets []string) (map[string][][]byte, error) {
	cmds := make([]*goredis.Cmd, len(targets))
	_, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, target := range targets {
			cmds[i] = getScript.Eval(ctx, p, []string{s.key(target)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string][][]byte, len(targets))
	for i, target := range targets {
		vals, err := cmds[i].StringSlice()
		if err != nil {
			return nil, err
		}
		for _, v := range vals {
			out[target] = append(out[target], []byte(v))
		}
	}
	return out, nil
}

// Subscribe implements hub.PresenceStore: fn gets the targets other hubs
// announce, from a goroutine that cancel stops and waits for.
func (s *Store) Subscribe(fn func(target string)) (cancel func()) {
	ps := s.rdb.Subscribe(context.Background(), s.channel())
	ch := ps.Channel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range ch {
			from, target, ok := strings.Cut(m.Payload, " ")
			if ok && from != s.id {
				fn(target)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			ps.Close() // closes ch
			<-done
		})
	}
}

// renew moves the lapse of this hub's live entries TTL ahead.
func (s *Store) renew(ctx context.Context) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	ttl := s.opts.TTL.Milliseconds()
	batch := make(map[string][]any, len(s.mine))
	for target, e := range s.mine {
		batch[s.key(target)] = []any{s.id, ttl, e}
	}
	s.mu.Unlock()
	if err := redisclaims.EvalEach(ctx, s.rdb, putScript, batch); err != nil {
		s.opts.Logger.Warn("redispresence: renew entries", "err", err)
	}
}

// Close stops the renewal and withdraws this hub's entries (they would
// lapse after TTL anyway), announcing them to the other hubs.
func (s *Store) Close() {
	if !s.renewer.Stop() {
		return
	}
	s.mu.Lock()
	entries := make(map[string][]byte, len(s.mine))
	for target := range s.mine {
		entries[target] = nil
	}
	s.mu.Unlock()
	if len(entries) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.Put(ctx, entries); err != nil {
		s.opts.Logger.Warn("redispresence: withdraw entries; they lapse on their own", "err", err)
	}
}
