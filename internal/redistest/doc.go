// Package redistest runs a real redis-server for tests.
//
// Tests that need Redis start one with Start (per test) or New (from
// TestMain), connect through the unix socket URL the Server reports, and
// never skip: when redis-server is missing the test fails and says how to
// install it. The server listens on a unix socket only (--port 0), under a
// short directory in /tmp so the path stays within the kernel's socket path
// limit.
//
// By default persistence is off (--save "" --appendonly no). Fault tests
// that restart or kill Redis set Options.AOF (and optionally a fixed
// Options.Dir): Restart and Kill keep the socket path and the directory, so a
// client reconnects to the same URL and finds what the AOF preserved.
//
// StartCluster (or NewCluster) starts a Redis Cluster instead: by default
// 3 masters and 3 replicas, each a Server listening on a free TCP port of
// 127.0.0.1 besides its socket (--cluster-enabled yes, a small
// cluster-node-timeout), joined with redis-cli --cluster create (redis-cli
// from redis-tools; missing, the test fails rather than skips). URL is the
// redis+cluster:// address journal/redis understands; Node finds a node by
// address, to Kill (its replica takes over: WaitHealthy waits for that)
// and Restart it (it rejoins as a replica).
//
// A Server's methods are safe for concurrent use.
package redistest
