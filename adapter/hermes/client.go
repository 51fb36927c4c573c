package hermes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// client speaks the Hermes /v1/runs HTTP API.
type client struct {
	cfg Config
}

// httpError is a non-2xx answer of the Hermes API.
type httpError struct {
	Status  int
	Code    string // the body's error.code, when it has one
	Message string // the body's error message, scrubbed and bounded
}

func (e *httpError) Error() string {
	s := fmt.Sprintf("HTTP %d", e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// statusOf returns the HTTP status of an httpError, or 0.
func statusOf(err error) int {
	var he *httpError
	if errors.As(err, &he) {
		return he.Status
	}
	return 0
}

// scrub makes upstream text safe to journal and log: the API key itself and
// anything secret-looking are replaced, and the text is bounded.
func (c *client) scrub(s string) string {
	if k := c.cfg.APIKey.Reveal(); k != "" {
		s = strings.ReplaceAll(s, k, journal.Redacted)
	}
	s = journal.RedactString(strings.TrimSpace(s))
	return protocol.Truncate(s, 500)
}

// request builds a request with the auth header.
func (c *client) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.cfg.BaseURL+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if !c.cfg.APIKey.Empty() {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey.Reveal())
	}
	return req, nil
}

// call sends a JSON request under RequestTimeout and decodes a 2xx answer
// into out (when not nil); any other answer is an *httpError.
func (c *client) call(ctx context.Context, method, path string, body, out any, header http.Header) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return c.transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return c.readError(resp)
	}
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(out); err != nil {
		return fmt.Errorf("malformed answer to %s %s: %w", method, path, err)
	}
	return nil
}

// transportError keeps a transport failure's cause without repeating the
// request URL's query (there is none today) or anything from headers.
func (c *client) transportError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s %s: %w", ue.Op, c.scrub(ue.URL), ue.Err)
	}
	return err
}

// readError reads a non-2xx answer: {"error": {"message", "code"}} (the
// OpenAI-style body Hermes sends), {"error": "…"}, or text.
func (c *client) readError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	he := &httpError{Status: resp.StatusCode}
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil && len(body.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
		}
		var s string
		switch {
		case json.Unmarshal(body.Error, &obj) == nil:
			he.Message = obj.Message
			if obj.Code != nil {
				he.Code = fmt.Sprint(obj.Code)
			}
		case json.Unmarshal(body.Error, &s) == nil:
			he.Message = s
		}
	} else {
		he.Message = string(raw)
	}
	he.Code, he.Message = protocol.Truncate(c.scrub(he.Code), 64), c.scrub(he.Message)
	return he
}
