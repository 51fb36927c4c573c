// Package redislimit counts the open sockets of each subject across every
// hub replica sharing one Redis, so that hub.Config.MaxSocketsPerSubject
// bounds a subject's sockets in the whole deployment rather than per
// replica. It implements hub.SocketCounter.
//
// Each subject has a sorted set, <prefix>sockets:{<subject>}, of socket ids
// scored by when their claim lapses (Redis's clock, so hubs' clocks do not
// matter). A hub claims a socket with one script (drop lapsed claims,
// count, add) and renews its live claims every TTL/3; a hub that dies
// stops renewing, and its claims lapse after TTL. Until then they still
// count: a subject that reconnects many tabs after a replica dies may be
// refused for up to TTL.
//
// A Counter's methods are safe for concurrent use; Claim and Release each
// make one round trip to Redis. One goroutine per Counter renews its
// claims until Close.
package redislimit
