// Package protocol holds runhub's wire contract (protocol v1): the event
// envelope and its event types, run statuses, every WebSocket message a
// client or the hub sends, the HTTP request and result types, cursors, and
// NDJSON batching.
//
// Decoding is strict: an unknown type, a missing required field, a field of
// the wrong JSON type or a field over its size bound yields an *Error whose
// Code is stable (see errors.go) and whose message names the field.
//
// The package performs no I/O and holds no mutable package state; every
// function is safe for concurrent use.
package protocol
