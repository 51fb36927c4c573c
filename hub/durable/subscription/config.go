package subscription

import (
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
)

// readJSON reads a request's JSON object (an empty body is {}).
func readJSON(r *http.Request, v any) *Error {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return invalid("the request body could not be read")
	}
	if len(raw) > maxBody {
		return errf(http.StatusRequestEntityTooLarge, CodeInvalidRequest, "the request body is larger than %d bytes", maxBody)
	}
	if len(strings.TrimSpace(string(raw))) == 0 {
		raw = []byte("{}")
	}
	if !json.Valid(raw) {
		return invalid("Invalid JSON body")
	}
	if strings.TrimSpace(string(raw))[0] != '{' {
		return invalid("Request body must be a JSON object")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return invalid("Invalid request body: %v", err)
	}
	return nil
}

// checkPath checks a stream path of a request's body.
func checkPath(what, p string) (string, *Error) {
	n := normalize(p)
	switch {
	case n == "" || len(n) > 1024:
		return "", invalid("%s must be a stream path of 1 to 1024 bytes", what)
	case strings.Contains(n, "//"):
		return "", invalid("%s %q has an empty path segment", what, truncate(n, 64))
	case n == "__ds" || strings.HasPrefix(n, "__ds/"):
		return "", invalid("%s %q is in the reserved __ds namespace", what, truncate(n, 64))
	case strings.ContainsAny(n, "{}\\"):
		return "", invalid("%s %q may not contain braces or backslashes", what, truncate(n, 64))
	}
	for _, seg := range strings.Split(n, "/") {
		if seg == "." || seg == ".." {
			return "", invalid("%s %q may not contain . or .. segments", what, truncate(n, 64))
		}
	}
	for _, r := range n {
		if r < 0x20 || r == 0x7f {
			return "", invalid("%s may not contain control characters", what)
		}
	}
	return n, nil
}

// parseConfig reads a registration's body.
func (m *Manager) parseConfig(r *http.Request) (Config, *Error) {
	var raw map[string]json.RawMessage
	var c Config
	if e := readJSON(r, &raw); e != nil {
		return c, e
	}
	str := func(k string) (string, bool, *Error) {
		v, ok := raw[k]
		if !ok || string(v) == "null" {
			return "", false, nil
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", true, invalid("%s must be a string", k)
		}
		return s, true, nil
	}
	typ, _, e := str("type")
	if e != nil || (typ != TypeWebhook && typ != TypePullWake) {
		return c, invalid(`type must be "webhook" or "pull-wake"`)
	}
	c.Type = typ
	pat, _, e := str("pattern")
	if e != nil {
		return c, e
	}
	if pat != "" {
		if c.Pattern, e = checkPath("pattern", pat); e != nil {
			return c, e
		}
	}
	if v, ok := raw["streams"]; ok && string(v) != "null" {
		var list []json.RawMessage
		if json.Unmarshal(v, &list) != nil {
			return c, invalid("streams must be an array of stream paths")
		}
		seen := map[string]bool{}
		for _, item := range list {
			var s string
			if json.Unmarshal(item, &s) != nil {
				return c, invalid("streams must contain only strings")
			}
			p, e := checkPath("a stream of streams", s)
			if e != nil {
				return c, e
			}
			if !seen[p] {
				seen[p] = true
				c.Streams = append(c.Streams, p)
			}
		}
		sort.Strings(c.Streams)
		if len(c.Streams) > m.o.MaxStreams {
			return c, invalid("streams lists %d streams; a subscription links at most %d", len(c.Streams), m.o.MaxStreams)
		}
	}
	if c.Pattern == "" && len(c.Streams) == 0 {
		return c, invalid("At least one of pattern or streams is required")
	}
	c.LeaseTTLms = defaultLease
	if v, ok := raw["lease_ttl_ms"]; ok && string(v) != "null" {
		var f float64
		if json.Unmarshal(v, &f) != nil || f != float64(int64(f)) || f < minLease || f > maxLease {
			return c, invalid("lease_ttl_ms must be an integer from 1000 to 600000")
		}
		c.LeaseTTLms = int64(f)
	}
	switch typ {
	case TypeWebhook:
		var wh struct {
			URL *string `json:"url"`
		}
		v, ok := raw["webhook"]
		if !ok || json.Unmarshal(v, &wh) != nil || wh.URL == nil || *wh.URL == "" {
			return c, invalid("webhook subscriptions require webhook.url")
		}
		c.WebhookURL = *wh.URL
	case TypePullWake:
		ws, _, e := str("wake_stream")
		if e != nil || ws == "" {
			return c, invalid("pull-wake subscriptions require wake_stream")
		}
		if c.WakeStream, e = checkPath("wake_stream", ws); e != nil {
			return c, e
		}
	}
	if d, ok, e := str("description"); e != nil {
		return c, e
	} else if ok {
		if len(d) > 1024 {
			return c, invalid("description must be at most 1024 bytes")
		}
		c.Description = &d
	}
	if c.Type == TypeWebhook {
		if err := ValidateURL(c.WebhookURL); err != nil {
			return c, errf(http.StatusBadRequest, CodeURLRejected, "%s", err.Error())
		}
	}
	return c, nil
}

func forbidden(msg string) *Error { return errf(http.StatusForbidden, CodeForbidden, "%s", msg) }
