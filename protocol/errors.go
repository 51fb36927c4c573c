package protocol

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable error code. Codes never change meaning;
// new ones may be added.
type Code string

// The error codes of protocol v1.
const (
	CodeBadRequest     Code = "bad_request"     // malformed JSON, unknown type, missing or wrong-typed field
	CodeTooLarge       Code = "too_large"       // a field, message or payload over its bound
	CodeBadCursor      Code = "bad_cursor"      // a cursor that is malformed, unknown or from another session
	CodeNotFound       Code = "not_found"       // no such session or run (or not the caller's)
	CodeConflict       Code = "conflict"        // e.g. a start while a run is active
	CodeUnauthorized   Code = "unauthorized"    // missing, invalid or expired credentials
	CodeForbidden      Code = "forbidden"       // authenticated but not allowed
	CodeRateLimited    Code = "rate_limited"    // too many messages
	CodeLimitExceeded  Code = "limit_exceeded"  // a configured count limit (watches, sockets, runs)
	CodeUnsupported    Code = "unsupported"     // the runtime lacks the capability
	CodeInternal       Code = "internal"        // a fault on the hub's side; the message is safe
	CodeUnavailable    Code = "unavailable"     // the hub is draining or a dependency is down
	CodeProtocol       Code = "protocol_error"  // a message out of order, e.g. anything before hello
	CodeTerminal       Code = "terminal"        // the run already has its terminal event
	CodeNotActive      Code = "not_active"      // the run or prompt is not active
	CodeSlowConsumer   Code = "slow_consumer"   // the client did not keep up
	CodeInvalidPayload Code = "invalid_payload" // an event payload lacks a required field
)

// CodeMethodNotAllowed is HTTP's 405: the path exists, not with this
// method (the answer carries Allow).
const CodeMethodNotAllowed Code = "method_not_allowed"

// Error is a protocol error with a stable code. Field names the offending
// field (dotted path) when there is one.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Is lets errors.Is match on the code: errors.Is(err, &Error{Code: CodeTooLarge}).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Message == "" || t.Message == e.Message)
}

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func fieldError(code Code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of err if it is (or wraps) an *Error, else
// CodeInternal.
func CodeOf(err error) Code {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return CodeInternal
}
