// Package httpx is what every HTTP edge of the hub shares, and the core's
// own HTTP answers: binding a JSON body strictly, reading a query number,
// errors as JSON bodies with their HTTP status, ControlResult answers, the
// bearer token and Origin rules, the 405 answers, and SSE streams. It knows
// nothing of the hub: the core (package hub) and every edge import it.
package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/protocol"
)

// Bind decodes a JSON body strictly into v: a bounded size, one object, the
// right field types.
func Bind(c echo.Context, v any) error {
	body := http.MaxBytesReader(c.Response(), c.Request().Body, MaxBodyBytes)
	data, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return protocol.Errorf(protocol.CodeTooLarge, "body is over %d bytes", MaxBodyBytes)
		}
		return protocol.Errorf(protocol.CodeBadRequest, "could not read the body")
	}
	if len(data) == 0 {
		data = []byte("{}")
	}
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &protocol.Error{Code: protocol.CodeBadRequest, Field: te.Field, Message: te.Field + ": has the wrong JSON type"}
		}
		return protocol.Errorf(protocol.CodeBadRequest, "malformed JSON body")
	}
	return nil
}

// MaxBodyBytes bounds an HTTP request body.
const MaxBodyBytes = 1 << 20

// ParseUint reads an optional non-negative integer query parameter.
func ParseUint(c echo.Context, name string, def uint64) (uint64, error) {
	s := c.QueryParam(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, &protocol.Error{Code: protocol.CodeBadRequest, Field: name, Message: name + ": must be a non-negative integer"}
	}
	return v, nil
}

// ControlResult answers a ControlResult with the status protocol.md gives.
func ControlResult(c echo.Context, res protocol.ControlResult, err error, okStatus int) error {
	if err != nil {
		return err
	}
	status := okStatus
	switch res.Status {
	case protocol.ResultNotActive, protocol.ResultExpired, protocol.ResultConflict:
		status = http.StatusConflict
	case protocol.ResultUnsupported:
		status = http.StatusNotImplemented
	}
	return c.JSON(status, res)
}

// WriteJSONError writes pe as a JSON error body with status, outside echo.
func WriteJSONError(w http.ResponseWriter, status int, pe *protocol.Error) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", RetryAfter)
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(protocol.ErrorBody{Error: pe})
}

// RetryAfter is the Retry-After (seconds) of a 503: a journal or Redis
// outage (a restart) or a draining hub usually passes within seconds.
const RetryAfter = "2"

// FieldErr is a protocol error about one request field, its message
// starting with the field's name.
func FieldErr(code protocol.Code, field, format string, args ...any) *protocol.Error {
	return &protocol.Error{Code: code, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// SafeMessage is the message of err a client may see: a protocol error's,
// else "internal error".
func SafeMessage(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Message
	}
	return "internal error"
}

// Bearer returns the token of an "Authorization: Bearer <token>" header;
// present reports whether the header was there at all.
func Bearer(r *http.Request) (token string, present bool) {
	v := r.Header.Get("Authorization")
	if v == "" {
		return "", false
	}
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(tok), true
}

// ErrOrigin refuses a browser request from another site.
var ErrOrigin = protocol.Errorf(protocol.CodeForbidden, "cross-origin request refused")

// OriginAllowed accepts a request without an Origin header (not a browser,
// or a same-origin GET), a same-origin one, or one whose origin host (or
// scheme://host when the pattern has a scheme) matches a pattern, the rule
// of websocket.AcceptOptions.OriginPatterns.
func OriginAllowed(r *http.Request, patterns []string) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return ErrOrigin
	}
	if strings.EqualFold(r.Host, u.Host) {
		return nil
	}
	for _, p := range patterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(target)); ok {
			return nil
		}
	}
	return ErrOrigin
}
