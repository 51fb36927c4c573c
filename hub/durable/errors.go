package durable

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// httpError is an answer with a status, a code and a readable message.
type httpError struct {
	status int
	code   protocol.Code
	msg    string
	header http.Header
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) *httpError {
	return &httpError{status: http.StatusBadRequest, code: protocol.CodeBadRequest, msg: fmt.Sprintf(format, args...)}
}

func notFound(what string) *httpError {
	return &httpError{status: http.StatusNotFound, code: protocol.CodeNotFound, msg: what + " not found"}
}

// Codes of the answers the protocol gives a status of its own.
const (
	codeGone          protocol.Code = "stream_gone"
	codeClosed        protocol.Code = "stream_closed"
	codeContentType   protocol.Code = "content_type_mismatch"
	codeSeq           protocol.Code = "sequence_conflict"
	codeStaleEpoch    protocol.Code = "stale_producer_epoch"
	codeProducerGap   protocol.Code = "producer_sequence_gap"
	codeConfig        protocol.Code = "stream_config_conflict"
	codeBadOffset     protocol.Code = "bad_offset"
	codeNotAllowed    protocol.Code = protocol.CodeMethodNotAllowed
	codeNotModifiable protocol.Code = "read_only_stream"
)

// streamError is the answer to a journal's stream error.
func (d *Edge) streamError(err error) *httpError {
	var se *journal.StreamError
	if !errors.As(err, &se) {
		pe := d.core.PublicError(err)
		var p *protocol.Error
		if errors.As(pe, &p) {
			return &httpError{status: httpx.HTTPStatus(p.Code), code: p.Code, msg: p.Message}
		}
		return &httpError{status: http.StatusInternalServerError, code: protocol.CodeInternal, msg: "internal error"}
	}
	e := &httpError{msg: se.Msg, header: http.Header{}}
	switch se.Kind {
	case journal.StreamNotFound:
		e.status, e.code = http.StatusNotFound, protocol.CodeNotFound
	case journal.StreamGone:
		e.status, e.code = http.StatusGone, codeGone
	case journal.StreamConfigConflict:
		e.status, e.code = http.StatusConflict, codeConfig
	case journal.StreamContentType:
		e.status, e.code = http.StatusConflict, codeContentType
	case journal.StreamClosed:
		e.status, e.code = http.StatusConflict, codeClosed
		e.header.Set("Stream-Closed", "true")
	case journal.StreamSeqConflict:
		e.status, e.code = http.StatusConflict, codeSeq
	case journal.ProducerStale:
		e.status, e.code = http.StatusForbidden, codeStaleEpoch
		e.header.Set("Producer-Epoch", strconv.FormatUint(se.Epoch, 10))
	case journal.ProducerGap:
		e.status, e.code = http.StatusConflict, codeProducerGap
		e.header.Set("Producer-Expected-Seq", strconv.FormatUint(se.Expected, 10))
		e.header.Set("Producer-Received-Seq", strconv.FormatUint(se.Received, 10))
	case journal.ProducerBadSeq:
		e.status, e.code = http.StatusBadRequest, protocol.CodeBadRequest
	case journal.StreamTooLarge:
		e.status, e.code = http.StatusRequestEntityTooLarge, protocol.CodeTooLarge
	case journal.StreamBadOffset:
		e.status, e.code = http.StatusBadRequest, codeBadOffset
	default:
		e.status, e.code = http.StatusServiceUnavailable, protocol.CodeUnavailable
	}
	if se.Meta != nil && (se.Kind == journal.StreamClosed || se.Kind == journal.StreamSeqConflict ||
		se.Kind == journal.StreamContentType || se.Kind == journal.ProducerGap || se.Kind == journal.ProducerStale) {
		e.header.Set("Stream-Next-Offset", formatOffset(se.Meta.Records, se.Meta.Bytes))
		if se.Meta.Closed {
			e.header.Set("Stream-Closed", "true")
		}
	}
	return e
}

// fail answers err: its status, its headers, and a JSON body with its code
// and message (none on HEAD).
func (d *Edge) fail(c echo.Context, err error) error {
	var he *httpError
	if !errors.As(err, &he) {
		he = d.streamError(err)
	}
	h := c.Response().Header()
	for k, vs := range he.header {
		for _, v := range vs {
			h.Set(k, v)
		}
	}
	if he.status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "2")
	}
	if c.Request().Method == http.MethodHead {
		return c.NoContent(he.status)
	}
	h.Set("Content-Type", "application/json")
	c.Response().WriteHeader(he.status)
	return json.NewEncoder(c.Response()).Encode(protocol.ErrorBody{Error: &protocol.Error{Code: he.code, Message: he.msg}})
}
