package durable

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/runhub/runhub/journal"
)

// An offset names the position after a number of records:
// "<records>_<bytes>", each 16 decimal digits, so that offsets sort as
// their positions do. "-1" is the start, "now" the tail.
var offsetRE = regexp.MustCompile(`^[0-9]{16}_[0-9]{16}$`)

func formatOffset(records, bytes uint64) string {
	return fmt.Sprintf("%016d_%016d", records, bytes)
}

// offsetSpec is a parsed offset parameter.
type offsetSpec struct {
	given bool   // the parameter was present
	now   bool   // "now": the tail
	index uint64 // records before the position
}

// parseOffset reads the offset query parameter: at most one, well formed.
func parseOffset(r *http.Request) (offsetSpec, error) {
	vals, ok := r.URL.Query()["offset"]
	if !ok {
		return offsetSpec{}, nil
	}
	if len(vals) != 1 {
		return offsetSpec{}, badRequest("offset: give it once, not %d times", len(vals))
	}
	return parseOffsetValue(vals[0])
}

// parseRead reads a GET's offset and live mode: a live read needs an
// offset.
func parseRead(r *http.Request) (offsetSpec, string, error) {
	off, err := parseOffset(r)
	if err != nil {
		return off, "", err
	}
	live := r.URL.Query().Get("live")
	switch live {
	case "", "long-poll", "sse":
	default:
		return off, "", badRequest("live %q: must be long-poll or sse", truncate(live, 32))
	}
	if live != "" && !off.given {
		return off, "", badRequest("a live read (live=%s) needs an offset", live)
	}
	return off, live, nil
}

func parseOffsetValue(v string) (offsetSpec, error) {
	switch {
	case v == "-1":
		return offsetSpec{given: true}, nil
	case v == "now":
		return offsetSpec{given: true, now: true}, nil
	case offsetRE.MatchString(v):
		n, _ := strconv.ParseUint(v[:16], 10, 64)
		return offsetSpec{given: true, index: n}, nil
	}
	return offsetSpec{}, badRequest("offset %q: not an offset this server gave (nor -1 or now)", truncate(v, 64))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// uintRE is a non-negative decimal integer without a sign or leading zeros.
var uintRE = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

// maxSafeInt is 2^53-1, the largest integer JavaScript holds exactly.
const maxSafeInt = 1<<53 - 1

// parseStrictUint parses a header's non-negative integer, at most max.
func parseStrictUint(name, v string, max uint64) (uint64, error) {
	if !uintRE.MatchString(v) {
		return 0, badRequest("%s %q: must be a non-negative decimal integer without sign or leading zeros", name, truncate(v, 32))
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > max {
		return 0, badRequest("%s %q: must be at most %d", name, truncate(v, 32), max)
	}
	return n, nil
}

// expiry reads Stream-TTL and Stream-Expires-At (not both).
func (d *Edge) expiry(h http.Header) (ttl int64, hasTTL bool, expiresAt int64, err error) {
	t, e := h.Get("Stream-TTL"), h.Get("Stream-Expires-At")
	_, tok := h["Stream-Ttl"]
	_, eok := h["Stream-Expires-At"]
	if tok && eok {
		return 0, false, 0, badRequest("give Stream-TTL or Stream-Expires-At, not both")
	}
	if tok {
		n, err := parseStrictUint("Stream-TTL", t, uint64(d.opts.MaxTTL))
		if err != nil {
			return 0, false, 0, err
		}
		return int64(n), true, 0, nil
	}
	if eok {
		at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(e))
		if err != nil {
			return 0, false, 0, badRequest("Stream-Expires-At %q: not an RFC 3339 timestamp", truncate(e, 64))
		}
		return 0, false, at.UnixMilli(), nil
	}
	return 0, false, 0, nil
}

// producer reads the producer headers: all three or none.
func producer(h http.Header) (*journal.ProducerTuple, error) {
	_, iok := h["Producer-Id"]
	_, eok := h["Producer-Epoch"]
	_, sok := h["Producer-Seq"]
	if !iok && !eok && !sok {
		return nil, nil
	}
	if !iok || !eok || !sok {
		return nil, badRequest("Producer-Id, Producer-Epoch and Producer-Seq go together: give all three or none")
	}
	id := h.Get("Producer-Id")
	if id == "" || len(id) > 256 {
		return nil, badRequest("Producer-Id must be 1 to 256 bytes")
	}
	epoch, err := parseStrictUint("Producer-Epoch", h.Get("Producer-Epoch"), maxSafeInt)
	if err != nil {
		return nil, err
	}
	seq, err := parseStrictUint("Producer-Seq", h.Get("Producer-Seq"), maxSafeInt)
	if err != nil {
		return nil, err
	}
	return &journal.ProducerTuple{ID: id, Epoch: epoch, Seq: seq}, nil
}

// isTrue reads a boolean header ("true", any case).
func isTrue(h http.Header, name string) bool {
	return strings.EqualFold(strings.TrimSpace(h.Get(name)), "true")
}

// contentType checks a Content-Type's syntax and returns it ("" when
// absent).
func contentType(h http.Header) (string, error) {
	ct := strings.TrimSpace(h.Get("Content-Type"))
	if ct == "" {
		return "", nil
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		return "", badRequest("Content-Type %q: not a media type", truncate(ct, 64))
	}
	return ct, nil
}

func isJSON(ct string) bool { return journal.MediaType(ct) == "application/json" }

// sseEncoding is how SSE carries a stream of content type ct: "" (as
// text) for text/* and JSON, base64 for the rest.
func sseEncoding(ct string) string {
	mt := journal.MediaType(ct)
	if strings.HasPrefix(mt, "text/") || mt == "application/json" {
		return ""
	}
	return "base64"
}

// readBody reads at most max bytes of the body (413 past them).
func readBody(r *http.Request, max int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	if r.ContentLength > max {
		return nil, &httpError{status: http.StatusRequestEntityTooLarge, code: "too_large",
			msg: fmt.Sprintf("the body is %d bytes, more than the %d an append may be", r.ContentLength, max)}
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead) // one allocation, not a doubling per read
	}
	_, err := buf.ReadFrom(io.LimitReader(r.Body, max+1))
	b := buf.Bytes()
	if err != nil {
		return nil, badRequest("reading the body: %v", err)
	}
	if int64(len(b)) > max {
		return nil, &httpError{status: http.StatusRequestEntityTooLarge, code: "too_large",
			msg: fmt.Sprintf("the body is more than the %d bytes an append may be", max)}
	}
	return b, nil
}

// flattenJSON is a JSON body as one record: an array's elements (one level
// flattened), or the single value; count is how many messages. An empty
// array is count 0.
func flattenJSON(body []byte) (data []byte, count int, err error) {
	trimmed := bytes.TrimSpace(body)
	if !json.Valid(trimmed) {
		return nil, 0, badRequest("the body is not valid JSON")
	}
	if len(trimmed) == 0 || trimmed[0] != '[' {
		var buf bytes.Buffer
		if err := json.Compact(&buf, trimmed); err != nil {
			return nil, 0, badRequest("the body is not valid JSON")
		}
		return buf.Bytes(), 1, nil
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(trimmed, &msgs); err != nil {
		return nil, 0, badRequest("the body is not valid JSON")
	}
	var buf bytes.Buffer
	for i, m := range msgs {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := json.Compact(&buf, m); err != nil {
			return nil, 0, badRequest("the body is not valid JSON")
		}
	}
	return buf.Bytes(), len(msgs), nil
}

// cursorEpoch and cursorInterval define Stream-Cursor: the number of
// 20-second intervals since 2024-10-09T00:00:00Z.
var cursorEpoch = time.Date(2024, 10, 9, 0, 0, 0, 0, time.UTC)

const cursorInterval = 20 * time.Second

// cursor is the Stream-Cursor of a live answer: the current interval, or
// past the client's (by 1 to 3600 s of jitter) when it echoed one not
// behind it, so that cursors only move forward.
func (d *Edge) cursor(r *http.Request) string {
	cur := uint64(d.opts.Now().Sub(cursorEpoch) / cursorInterval)
	if v := r.URL.Query().Get("cursor"); v != "" {
		if c, err := strconv.ParseUint(v, 10, 64); err == nil && c >= cur {
			jitter := uint64(rand.IntN(3600)+1) * uint64(time.Second) / uint64(cursorInterval)
			cur = c + max(1, jitter)
		}
	}
	return strconv.FormatUint(cur, 10)
}
