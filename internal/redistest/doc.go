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
// A Server's methods are safe for concurrent use.
package redistest
