package subscription

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// The error codes the protocol names for its subscription APIs, and the
// one runhub adds for its bounds.
const (
	CodeInvalidRequest  = "INVALID_REQUEST"
	CodeNotFound        = "SUBSCRIPTION_NOT_FOUND"
	CodeAlreadyExists   = "SUBSCRIPTION_ALREADY_EXISTS"
	CodeURLRejected     = "WEBHOOK_URL_REJECTED"
	CodeTokenInvalid    = "TOKEN_INVALID"
	CodeTokenExpired    = "TOKEN_EXPIRED"
	CodeFenced          = "FENCED"
	CodeAlreadyClaimed  = "ALREADY_CLAIMED"
	CodeNoPendingWork   = "NO_PENDING_WORK"
	CodeInvalidOffset   = "INVALID_OFFSET"
	CodeForbidden       = "FORBIDDEN"
	CodeLimitExceeded   = "SUBSCRIPTION_LIMIT_EXCEEDED"
	CodeUnavailable     = "UNAVAILABLE"
	CodeMethodNotAllowd = "METHOD_NOT_ALLOWED"
)

// Error is a refusal: its status, the protocol's code and a message (and,
// for ALREADY_CLAIMED, the holder and generation).
type Error struct {
	Status        int    `json:"-"`
	Code          string `json:"code"`
	Message       string `json:"message"`
	CurrentHolder string `json:"current_holder,omitempty"`
	Generation    uint64 `json:"generation,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) *Error {
	return errf(http.StatusBadRequest, CodeInvalidRequest, format, args...)
}

func notFound() *Error { return errf(http.StatusNotFound, CodeNotFound, "Subscription not found") }

func fenced() *Error { return errf(http.StatusConflict, CodeFenced, "Wake generation is stale") }

func writeError(w http.ResponseWriter, e *Error) {
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "2")
	}
	writeJSON(w, e.Status, map[string]*Error{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
