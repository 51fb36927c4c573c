package openai

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/internal/lineread"
	"github.com/runhub/runhub/protocol"
)

// emitter is what a stream emits into: the run's *driver.Execution (a
// recorder in the fuzzer).
type emitter interface {
	Emit(ctx context.Context, typ protocol.EventType, payload any) (protocol.Envelope, error)
}

// stream maps one answer to events.
type stream struct {
	d     *Driver
	x     emitter
	model string
	idle  *time.Timer
	log   *slog.Logger

	usage         *usage
	upstreamModel string
	finish        string
	contentChunks int64
	reasoning     bool // a reasoning block is open
	blocks        int
	malformed     int
}

// readError is a failed read of the answer's body.
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }

// read consumes an SSE body (lines ending in CRLF, LF or CR) until data:
// [DONE]. Lines starting with ':'
// (keepalives) and the fields event, id and retry are ignored; a line that
// is no SSE field, or data that is not a valid chunk, is skipped and
// counted.
func (s *stream) read(ctx context.Context, body io.Reader) error {
	lr := lineread.NewReader(body, 64<<10, maxLineBytes)
	var pending []byte // data lines of an event not yet dispatched
	for {
		line, tooLong, rerr := lr.Read()
		var done bool
		var err error
		switch {
		case tooLong:
			s.malformed++
		case len(line) == 0: // end of an event
			if len(pending) > 0 {
				done, err = s.dispatch(ctx, pending)
				pending = pending[:0]
			}
		case line[0] == ':': // comment: keepalive
		default:
			done, err = s.field(ctx, line, &pending)
		}
		if done || err != nil {
			return err
		}
		if rerr != nil {
			if len(pending) > 0 {
				if done, err := s.dispatch(ctx, pending); done || err != nil {
					return err
				}
			}
			if errors.Is(rerr, io.EOF) {
				if s.finish != "" {
					return nil // finished, only the [DONE] line is missing
				}
				return &driver.Error{Code: protocol.ErrorProviderError,
					Message: "the upstream closed the stream before the answer finished"}
			}
			return readError{rerr}
		}
	}
}

// field handles one SSE field line.
func (s *stream) field(ctx context.Context, line []byte, pending *[]byte) (done bool, err error) {
	name, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(name) {
	case "data":
	case "event", "id", "retry":
		return false, nil
	default:
		s.malformed++ // not an SSE field (e.g. raw JSON without "data:")
		return false, nil
	}
	if string(value) != "[DONE]" && !json.Valid(value) {
		// Part of an event spread over several data lines (the SSE spec
		// joins them with newlines), or garbage: decided at the event's end.
		if len(*pending) > 0 {
			*pending = append(*pending, '\n')
		}
		*pending = append(*pending, value...)
		return false, nil
	}
	// A complete chunk on one line: dispatch at once, so servers that omit
	// the blank line between events work too.
	if len(*pending) > 0 {
		joined := append(append(*pending, '\n'), value...)
		*pending = (*pending)[:0]
		if json.Valid(joined) {
			return s.dispatch(ctx, joined)
		}
		s.malformed++
	}
	return s.dispatch(ctx, value)
}

// dispatch handles one event's data; done reports data: [DONE].
func (s *stream) dispatch(ctx context.Context, data []byte) (done bool, err error) {
	if string(data) == "[DONE]" {
		return true, nil
	}
	s.idle.Reset(s.d.cfg.IdleTimeout)
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		s.malformed++
		return false, nil
	}
	return false, s.apply(ctx, &c)
}

func (s *stream) apply(ctx context.Context, c *chunk) error {
	if msg := errorText(c.Error); msg != "" {
		return &driver.Error{Code: protocol.ErrorProviderError, Message: s.d.safe("the upstream failed mid-stream: " + msg)}
	}
	if c.Model != "" {
		s.upstreamModel = c.Model
	}
	if c.Usage != nil {
		s.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		dl := ch.Delta
		if ch.Message != nil {
			dl = *ch.Message
		}
		if r := cmp.Or(dl.ReasoningContent, dl.Reasoning); r != "" {
			if !s.reasoning {
				s.reasoning = true
				s.blocks++
			}
			if _, err := s.x.Emit(ctx, protocol.EventReasoningDelta, protocol.ReasoningPayload{BlockID: s.blockID(), Text: r}); err != nil {
				return err
			}
		}
		if dl.Content != "" {
			if err := s.closeReasoning(ctx); err != nil {
				return err
			}
			s.contentChunks++
			if _, err := s.x.Emit(ctx, protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: dl.Content}); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish = *ch.FinishReason
		}
	}
	return nil
}

func (s *stream) blockID() string { return "b" + strconv.Itoa(s.blocks) }

// closeReasoning ends an open reasoning block with reasoning.done.
func (s *stream) closeReasoning(ctx context.Context) error {
	if !s.reasoning {
		return nil
	}
	s.reasoning = false
	_, err := s.x.Emit(ctx, protocol.EventReasoningDone, protocol.ReasoningPayload{BlockID: s.blockID(), Text: ""})
	return err
}

// whole handles a server that answered with one JSON completion although
// a stream was asked for.
func (s *stream) whole(ctx context.Context, body io.Reader) error {
	data, err := io.ReadAll(io.LimitReader(body, maxJSONBody))
	if err != nil {
		return readError{err}
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return &driver.Error{Code: protocol.ErrorProviderError, Message: "the upstream answered with invalid JSON"}
	}
	return s.apply(ctx, &c)
}
