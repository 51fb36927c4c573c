package httpx

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/protocol"
)

// HTTPStatus maps a protocol error code to its HTTP status.
func HTTPStatus(code protocol.Code) int {
	switch code {
	case protocol.CodeBadRequest, protocol.CodeInvalidPayload, protocol.CodeBadCursor, protocol.CodeProtocol:
		return http.StatusBadRequest
	case protocol.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case protocol.CodeNotFound:
		return http.StatusNotFound
	case protocol.CodeConflict, protocol.CodeNotActive, protocol.CodeTerminal:
		return http.StatusConflict
	case protocol.CodeUnauthorized:
		return http.StatusUnauthorized
	case protocol.CodeForbidden:
		return http.StatusForbidden
	case protocol.CodeRateLimited, protocol.CodeLimitExceeded:
		return http.StatusTooManyRequests
	case protocol.CodeUnsupported:
		return http.StatusNotImplemented
	case protocol.CodeUnavailable:
		return http.StatusServiceUnavailable
	case protocol.CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	}
	return http.StatusInternalServerError
}

// ErrorHandler renders every error as a JSON body {error:{code,message}}.
func ErrorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var pe *protocol.Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &pe):
	case errors.As(err, &he):
		if (he.Code == http.StatusNotFound || he.Code == http.StatusMethodNotAllowed) && methodNotAllowed(c) {
			return
		}
		code := protocol.CodeInternal
		switch he.Code {
		case http.StatusNotFound:
			code = protocol.CodeNotFound
		case http.StatusMethodNotAllowed:
			code = protocol.CodeMethodNotAllowed
		case http.StatusBadRequest:
			code = protocol.CodeBadRequest
		case http.StatusRequestEntityTooLarge:
			code = protocol.CodeTooLarge
		case http.StatusUnauthorized:
			code = protocol.CodeUnauthorized
		case http.StatusForbidden:
			code = protocol.CodeForbidden
		case http.StatusServiceUnavailable:
			code = protocol.CodeUnavailable
			c.Response().Header().Set("Retry-After", RetryAfter)
		}
		pe = &protocol.Error{Code: code, Message: fmt.Sprint(he.Message)}
		c.JSON(he.Code, protocol.ErrorBody{Error: pe})
		return
	default:
		pe = protocol.Errorf(protocol.CodeInternal, "internal error")
	}
	if pe.Code == protocol.CodeUnavailable {
		c.Response().Header().Set("Retry-After", RetryAfter)
	}
	c.JSON(HTTPStatus(pe.Code), protocol.ErrorBody{Error: pe})
}
