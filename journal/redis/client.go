package redis

import (
	"context"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// clusterReadConns is the room a cluster client's pools get, per node, for
// the blocking reads of the tails.
const clusterReadConns = 32

// clusterStateReload is how stale a cluster client's slot map may get
// before a command makes it reload (ParseClusterURL).
const clusterStateReload = time.Second

// Cluster URL schemes: a comma-separated list of seed nodes of a Redis
// Cluster, e.g. redis+cluster://user:pass@h1:6379,h2:6379,h3:6379.
const (
	clusterScheme    = "redis+cluster://"
	clusterTLSScheme = "rediss+cluster://"
)

// IsClusterURL reports whether url names a Redis Cluster (NewClient).
func IsClusterURL(url string) bool {
	return strings.HasPrefix(url, clusterScheme) || strings.HasPrefix(url, clusterTLSScheme)
}

// NewClient makes the client of a Redis address, for the journal and for
// everything that shares its Redis:
//
//   - redis://, rediss://, unix://: one server (or a primary with
//     replicas), parsed by goredis.ParseURL, a *goredis.Client;
//   - redis+cluster://[user:password@]host:port[,host:port…][?options]
//     (rediss+cluster:// for TLS): a Redis Cluster reached through any of
//     the listed seed nodes, a *goredis.ClusterClient. The options are
//     those of goredis.ParseClusterURL (dial_timeout, read_timeout,
//     pool_size, max_retries, max_redirects, …); a database number is
//     refused, a Cluster has only database 0. Without pool_size, each
//     node's pool holds go-redis's default (10 per CPU) plus 32 for the
//     Store's blocking reads (one feed and one run-tail reader per shard).
//     The slot map is reloaded when a command finds it older than a
//     second, so that a failover is noticed even where no node answers
//     with a redirection (a dead master just refuses connections).
//
// The caller closes the client.
func NewClient(rawURL string) (goredis.UniversalClient, error) {
	if !IsClusterURL(rawURL) {
		opt, err := goredis.ParseURL(rawURL)
		if err != nil {
			return nil, err
		}
		return goredis.NewClient(opt), nil
	}
	opt, err := ParseClusterURL(rawURL)
	if err != nil {
		return nil, err
	}
	return goredis.NewClusterClient(opt), nil
}

// ParseClusterURL parses a redis+cluster:// or rediss+cluster:// address
// (see NewClient).
func ParseClusterURL(rawURL string) (*goredis.ClusterOptions, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || !IsClusterURL(rawURL) {
		return nil, fmt.Errorf("redis cluster URL %q: want redis+cluster:// or rediss+cluster://", redact(rawURL))
	}
	rest, query, _ := strings.Cut(rest, "?")
	user := ""
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		user, rest = rest[:i+1], rest[i+1:]
	}
	hosts, path, _ := strings.Cut(rest, "/")
	if path != "" && path != "0" {
		return nil, fmt.Errorf("redis cluster URL %q: a Cluster has only database 0", redact(rawURL))
	}
	var addrs []string
	for h := range strings.SplitSeq(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			addrs = append(addrs, h)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("redis cluster URL %q: no host", redact(rawURL))
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("redis cluster URL %q: %w", redact(rawURL), err)
	}
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	plain := strings.TrimSuffix(scheme, "+cluster") + "://" + user + addrs[0]
	if len(q) > 0 {
		plain += "?" + q.Encode()
	}
	opt, err := goredis.ParseClusterURL(plain)
	if err != nil {
		return nil, fmt.Errorf("redis cluster URL %q: %w", redact(rawURL), err)
	}
	if opt.ClusterStateReloadInterval == 0 {
		// go-redis reloads the slot map at once only on a redirection
		// (MOVED, ASK) or READONLY; a master that died answers neither, so
		// until the next periodic reload (60 s by default) every command
		// of its slots fails with "connection refused", long after its
		// replica took over. Reloading (one CLUSTER SLOTS, in the
		// background, when a command finds the map older than this) every
		// second keeps a failover's outage to the failover itself.
		opt.ClusterStateReloadInterval = clusterStateReload
	}
	if opt.PoolSize == 0 {
		// go-redis's default (10 per CPU, per node) plus the blocking reads
		// a Store keeps on each master: a feed reader and a run-tail reader
		// per shard of the node (2 × 16/3 with 3 masters), so that they
		// never starve the appends.
		opt.PoolSize = 10*runtime.GOMAXPROCS(0) + clusterReadConns
	}
	return opt, nil
}

// redact hides the password of a URL in an error.
func redact(rawURL string) string {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return rawURL
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		if u, _, hasPass := strings.Cut(rest[:i], ":"); hasPass {
			return scheme + "://" + u + ":xxxxx" + rest[i:]
		}
	}
	return rawURL
}

// clientTimings returns the read timeout, retries and retry backoff of a
// client, for the default ReplyCacheTTL.
func clientTimings(rdb goredis.UniversalClient) (read time.Duration, retries int, backoff time.Duration) {
	switch c := rdb.(type) {
	case *goredis.Client:
		o := c.Options()
		return o.ReadTimeout, o.MaxRetries, o.MaxRetryBackoff
	case *goredis.ClusterClient:
		o := c.Options()
		// A command is sent again after each redirection (MOVED, ASK,
		// TRYAGAIN) as well as after each failed attempt.
		return o.ReadTimeout, max(o.MaxRetries, 0) + max(o.MaxRedirects, 0), o.MaxRetryBackoff
	}
	return 0, 3, 512 * time.Millisecond
}

// serverOf returns the client of the one server that holds key: rdb itself
// on a single Redis, the master of key's slot on a Cluster. It is for what
// must stay on one connection of that server (a blocking read, WAIT after
// a write).
func serverOf(ctx context.Context, rdb goredis.UniversalClient, key string) (*goredis.Client, error) {
	switch c := rdb.(type) {
	case *goredis.Client:
		return c, nil
	case *goredis.ClusterClient:
		return c.MasterForKey(ctx, key)
	}
	return nil, fmt.Errorf("journal/redis: unsupported client %T (want a *goredis.Client or a *goredis.ClusterClient)", rdb)
}
