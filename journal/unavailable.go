package journal

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// ErrUnavailable marks an error that means the journal cannot be reached
// or cannot serve now; a backend may wrap it (%w) where it knows so.
var ErrUnavailable = errors.New("journal: unavailable")

// unavailableReplies are the first words of the replies a Redis server gives
// while it cannot serve, for a while: loading its data set after a
// restart, a replica that refuses writes (a failover), no master, a
// cluster down or reconfiguring (a redirection the client still got after
// following its redirections: slots moving during a failover), a script
// or module busy, too many clients.
var unavailableReplies = []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK", "NOREPLICAS", "BUSY", "ERR max number of clients"}

// poolTimeout is go-redis's ErrPoolTimeout (journal does not import the
// client; journal/redis tests that the text matches).
const poolTimeout = "redis: connection pool timeout"

// Unavailable reports whether err means that the journal (or the Redis
// behind it) cannot be reached or cannot serve now — a condition that
// passes, which a caller should answer "unavailable, retry later" — rather
// than a fault of the request or of the data. It is the one place that
// decides it, for every backend and every caller:
//
//   - an error wrapping ErrUnavailable;
//   - a network error: a connection refused or reset, a broken pipe, a
//     dial or i/o timeout (net.Error), a connection that ended mid-reply
//     (io.EOF, io.ErrUnexpectedEOF);
//   - a Redis reply that the server cannot serve now (LOADING, READONLY,
//     MASTERDOWN, CLUSTERDOWN, TRYAGAIN, MOVED, ASK, NOREPLICAS, BUSY, max
//     clients);
//   - a Redis client's connection pool timeout;
//   - a disk that refuses writes: full, over quota or read-only.
//
// ErrClosed (the process is shutting down) and context errors are the
// caller's to map; they are not reported here.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EROFS):
		return true
	}
	var re redisError
	if errors.As(err, &re) {
		msg := re.Error()
		for _, p := range unavailableReplies {
			// By whole words: BUSYGROUP and BUSYKEY are no BUSY.
			if rest, ok := strings.CutPrefix(msg, p); ok && (rest == "" || rest[0] == ' ') {
				return true
			}
		}
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == poolTimeout {
			return true
		}
	}
	return false
}

// redisError is a reply error of the Redis client (go-redis's redis.Error).
type redisError interface {
	error
	RedisError()
}
