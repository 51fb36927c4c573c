package hub

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/protocol"
)

// The HTTP helpers every route handler shares (api.go, sessions.go,
// queueedit.go, events.go, the interop endpoints): binding a body, reading
// a query number, the caller's subject and the JSON error body.

// subject is the caller's identity (requireAuth set it; OpenSubject when
// the hub runs open).
func (h *Hub) subject(c echo.Context) string { return h.principal(c).Subject }

// bind decodes a JSON body strictly into v: a bounded size, one object, the
// right field types.
func bind(c echo.Context, v any) error {
	body := http.MaxBytesReader(c.Response(), c.Request().Body, maxBodyBytes)
	data, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return protocol.Errorf(protocol.CodeTooLarge, "body is over %d bytes", maxBodyBytes)
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

// maxBodyBytes bounds an HTTP request body.
const maxBodyBytes = 1 << 20

// parseUint reads an optional non-negative integer query parameter.
func parseUint(c echo.Context, name string, def uint64) (uint64, error) {
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

// controlResult answers a ControlResult with the status protocol.md gives.
func controlResult(c echo.Context, res protocol.ControlResult, err error, okStatus int) error {
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

func writeJSONError(w http.ResponseWriter, status int, pe *protocol.Error) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(protocol.ErrorBody{Error: pe})
}

// retryAfter is the Retry-After (seconds) of a 503: a journal or Redis
// outage (a restart) or a draining hub usually passes within seconds.
const retryAfter = "2"
