package durable

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/journal"
)

// defaultContentType is a created stream's when the PUT names none.
const defaultContentType = "application/octet-stream"

// mayRead reports whether p may read a stream of meta m: its creator,
// or an admin.
func mayRead(p hub.Principal, m journal.StreamMeta) bool { return p.Admin || m.Owner == p.Subject }

// hidden answers for a stream of someone else's as for a missing one.
func hidden() *httpError { return notFound("stream") }

// readOnlyAdmin refuses an admin's write to another subject's stream: the
// admin role reads only, as everywhere in the hub.
func readOnlyAdmin() *httpError {
	return &httpError{status: http.StatusForbidden, code: "forbidden", msg: "the admin role reads only: the stream is someone else's"}
}

// setStreamHeaders sets what every answer about a stream carries.
func setStreamHeaders(h http.Header, m journal.StreamMeta) {
	h.Set("Stream-Next-Offset", formatOffset(m.Records, m.Bytes))
	if m.Closed {
		h.Set("Stream-Closed", "true")
	}
}

func (d *Edge) create(c echo.Context, name string) error {
	r := c.Request()
	p := d.core.Caller(c)
	ct, err := contentType(r.Header)
	if err != nil {
		return d.fail(c, err)
	}
	ttl, hasTTL, expiresAt, err := d.expiry(r.Header)
	if err != nil {
		return d.fail(c, err)
	}
	fork, err := d.forkOf(r.Header)
	if err != nil {
		return d.fail(c, err)
	}
	if ct == "" && fork == nil {
		ct = defaultContentType
	}
	rb, err := d.readBody(r, d.opts.MaxAppendBytes)
	if err != nil {
		return d.fail(c, err)
	}
	var jerr error // the journal's answer: rb's buffer is free after it
	defer func() { rb.release(jerr) }()
	body := rb.data
	req := journal.StreamCreate{Owner: p.Subject, ContentType: ct, TTL: ttl, HasTTL: hasTTL, ExpiresAt: expiresAt,
		Closed: isTrue(r.Header, "Stream-Closed"), Fork: fork}
	if fork != nil {
		src, err := d.opts.Streams.StreamHead(r.Context(), fork.From)
		if err == nil && !mayRead(p, src.Meta) {
			return d.fail(c, notFound("the fork's source"))
		}
		if ct == "" && err == nil {
			ct = src.Meta.ContentType
		}
	}
	if len(body) > 0 {
		rec := &journal.StreamRecord{Data: body}
		if isJSON(ct) {
			data, n, err := flattenJSON(body)
			if err != nil {
				return d.fail(c, err)
			}
			rec.Data, rec.Count = data, n
		}
		req.Initial = rec
	}
	info, created, err := d.opts.Streams.CreateStream(r.Context(), name, req)
	jerr = err
	if err != nil {
		return d.fail(c, err)
	}
	m := info.Meta
	if m.Owner != p.Subject {
		return d.fail(c, &httpError{status: http.StatusForbidden, code: "forbidden", msg: "the stream is someone else's"})
	}
	if created && d.subs != nil {
		d.subs.Appended(r.Context(), name, m.Owner, m.Gen, formatOffset(0, 0))
	}
	h := c.Response().Header()
	h.Set("Content-Type", m.ContentType)
	setStreamHeaders(h, m)
	if !created {
		return c.NoContent(http.StatusOK)
	}
	h.Set("Location", absoluteURL(r))
	return c.NoContent(http.StatusCreated)
}

// absoluteURL is the request's URL with its scheme and host.
func absoluteURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if fp := r.Header.Get("X-Forwarded-Proto"); fp == "https" || fp == "http" {
		scheme = fp
	}
	return (&url.URL{Scheme: scheme, Host: r.Host, Path: r.URL.Path}).String()
}

// forkOf reads the fork headers.
func (d *Edge) forkOf(h http.Header) (*journal.StreamFork, error) {
	from := strings.TrimSpace(h.Get("Stream-Forked-From"))
	_, subGiven := h["Stream-Fork-Sub-Offset"]
	_, offGiven := h["Stream-Fork-Offset"]
	if from == "" {
		if subGiven || offGiven {
			return nil, badRequest("Stream-Fork-Offset and Stream-Fork-Sub-Offset need Stream-Forked-From")
		}
		return nil, nil
	}
	if u, err := url.Parse(from); err == nil && u.IsAbs() {
		from = u.Path
	}
	if !strings.HasPrefix(from, Prefix) {
		return nil, badRequest("Stream-Forked-From %q: must be a stream's path, %s…", truncate(from, 64), Prefix)
	}
	src, err := streamName(from)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(src, runsPrefix) {
		return nil, badRequest("a run's stream cannot be forked")
	}
	f := &journal.StreamFork{From: src}
	if offGiven {
		off, err := parseOffsetValue(h.Get("Stream-Fork-Offset"))
		if err != nil {
			return nil, err
		}
		if !off.now {
			f.Offset, f.HasOffset = off.index, true
		}
	}
	if subGiven {
		sub, err := parseStrictUint("Stream-Fork-Sub-Offset", h.Get("Stream-Fork-Sub-Offset"), maxSafeInt)
		if err != nil {
			return nil, err
		}
		if sub > 0 && !f.HasOffset {
			return nil, badRequest("Stream-Fork-Sub-Offset needs a Stream-Fork-Offset")
		}
		f.Sub = sub
	}
	return f, nil
}

// check finds the stream and checks the caller may read it (write: and
// write it).
func (d *Edge) check(c echo.Context, name string, write bool) (journal.StreamMeta, error) {
	info, err := d.opts.Streams.StreamHead(c.Request().Context(), name)
	if err != nil {
		return info.Meta, err
	}
	p := d.core.Caller(c)
	switch {
	case !mayRead(p, info.Meta):
		return info.Meta, hidden()
	case write && info.Meta.Owner != p.Subject:
		return info.Meta, readOnlyAdmin()
	}
	return info.Meta, nil
}

func (d *Edge) append(c echo.Context, name string) error {
	r := c.Request()
	if _, err := d.check(c, name, true); err != nil {
		return d.fail(c, err)
	}
	closing := isTrue(r.Header, "Stream-Closed")
	prod, err := producer(r.Header)
	if err != nil {
		return d.fail(c, err)
	}
	ct, err := contentType(r.Header)
	if err != nil {
		return d.fail(c, err)
	}
	rb, err := d.readBody(r, d.opts.MaxAppendBytes)
	if err != nil {
		return d.fail(c, err)
	}
	var jerr error // the journal's answer: rb's buffer is free after it
	defer func() { rb.release(jerr) }()
	body := rb.data
	if len(body) == 0 && !closing {
		return d.fail(c, badRequest("an append needs a body (or Stream-Closed: true to close)"))
	}
	a := journal.StreamAppend{ContentType: ct, Close: closing, StreamSeq: r.Header.Get("Stream-Seq"), Producer: prod}
	if len(a.StreamSeq) > 256 {
		return d.fail(c, badRequest("Stream-Seq: at most 256 bytes"))
	}
	if len(body) > 0 {
		if ct == "" {
			return d.fail(c, badRequest("an append with a body needs a Content-Type"))
		}
		a.Data = body
		if isJSON(ct) {
			data, n, err := flattenJSON(body)
			if err != nil {
				return d.fail(c, err)
			}
			if n == 0 {
				return d.fail(c, badRequest("an empty JSON array appends nothing"))
			}
			a.Data, a.Count = data, n
		}
	}
	res, err := d.opts.Streams.AppendStream(r.Context(), name, a)
	jerr = err
	if err != nil {
		return d.fail(c, err)
	}
	if d.subs != nil && len(a.Data) > 0 {
		m, before := res.Info.Meta, "" // a duplicate's position is not known
		if !res.Duplicate {
			before = formatOffset(m.Records-1, m.Bytes-uint64(len(a.Data)))
		}
		d.subs.Appended(r.Context(), name, m.Owner, m.Gen, before)
	}
	h := c.Response().Header()
	setStreamHeaders(h, res.Info.Meta)
	if prod != nil {
		h.Set("Producer-Epoch", strconv.FormatUint(res.Epoch, 10))
		h.Set("Producer-Seq", strconv.FormatUint(res.Seq, 10))
		if !res.Duplicate && len(a.Data) > 0 {
			return c.NoContent(http.StatusOK)
		}
	}
	return c.NoContent(http.StatusNoContent)
}

func (d *Edge) delete(c echo.Context, name string) error {
	if _, err := d.check(c, name, true); err != nil {
		return d.fail(c, err)
	}
	if err := d.opts.Streams.DeleteStream(c.Request().Context(), name); err != nil {
		return d.fail(c, err)
	}
	return c.NoContent(http.StatusNoContent)
}
