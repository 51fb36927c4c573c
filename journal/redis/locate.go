package redis

import (
	"context"
	"errors"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// maxLocs bounds a Store's cache of run locators.
const maxLocs = 1 << 16

// locCache remembers the shard of runs this Store has looked up or begun:
// a run never moves, so the lookups of Read, Run and SubscribeRun cost a
// round trip only the first time. Bounded: when full, an arbitrary entry
// makes room.
type locCache struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *locCache) init() { c.m = make(map[string]int) }

func (c *locCache) get(id string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.m[id]
	return n, ok
}

func (c *locCache) put(id string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[id]; !ok && len(c.m) >= maxLocs {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[id] = n
}

func (c *locCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// locate returns the shard of a run: from the cache, else from its
// locator. found is false for a run that was never begun (or was trimmed).
// cached tells the caller the answer came from the cache and may be stale
// (a trimmed run id begun again in another session): see relocate.
func (s *Store) locate(ctx context.Context, id string) (n int, found, cached bool, err error) {
	if n, ok := s.locs.get(id); ok {
		return n, true, true, nil
	}
	n, found, err = s.lookup(ctx, id)
	return n, found, false, err
}

// lookup reads a run's locator from Redis and caches it.
func (s *Store) lookup(ctx context.Context, id string) (int, bool, error) {
	v, err := s.rdb.Get(ctx, s.k.loc(id)).Result()
	if errors.Is(err, goredis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	n, err := s.k.parseShard(v)
	if err != nil {
		return 0, false, err
	}
	s.locs.put(id, n)
	return n, true, nil
}

// relocate is for a cached shard whose run turned out missing: it drops
// the cache entry and reads the locator again; changed is true when the
// run now lives in another shard.
func (s *Store) relocate(ctx context.Context, id string, old int) (n int, changed bool, err error) {
	s.locs.drop(id)
	n, found, err := s.lookup(ctx, id)
	if err != nil || !found {
		return 0, false, err
	}
	return n, n != old, nil
}

// claimLocator points a run's locator at shard n before BeginRun's script
// registers the run there. created is true when this call wrote it (and so
// must remove it if the run is not registered). A locator naming another
// shard means the run id is taken (by a run of another session, or by a
// BeginRun in flight or cut off half-way: the id is not reused, as run ids
// are unique).
func (s *Store) claimLocator(ctx context.Context, id string, n int) (created, taken bool, err error) {
	key := s.k.loc(id)
	for range 3 {
		ok, err := s.rdb.SetNX(ctx, key, n, 0).Result()
		if err != nil || ok {
			return ok, false, err
		}
		v, err := s.rdb.Get(ctx, key).Result()
		if errors.Is(err, goredis.Nil) {
			continue // removed meanwhile
		}
		if err != nil {
			return false, false, err
		}
		if m, err := s.k.parseShard(v); err != nil || m != n {
			return false, true, nil
		}
		return false, false, nil // the script tells whether the run exists
	}
	return false, true, nil
}

// dropLocator removes a run's locator if it still names shard n.
func (s *Store) dropLocator(ctx context.Context, id string, n int) {
	s.locs.drop(id)
	_ = dropLocatorScript.Run(ctx, s.rdb, []string{s.k.loc(id)}, n).Err()
}
