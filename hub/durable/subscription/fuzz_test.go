package subscription

import (
	"encoding/json"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
)

// FuzzRegistration feeds a registration's body, as a stranger sends it,
// to the parser: it answers a refusal with a code and a message, or a
// configuration that keeps every rule (and encoding/json, the trusted
// parser, must accept the body it took).
func FuzzRegistration(f *testing.F) {
	for _, s := range []string{
		`{"type":"webhook","pattern":"events/*","webhook":{"url":"https://h.example/x"},"lease_ttl_ms":1000,"description":"d"}`,
		`{"type":"pull-wake","streams":["a","b","a"],"wake_stream":"wake/pool"}`,
		`{"type":"webhook","webhook":{"url":"http://10.0.0.1/hook"},"pattern":"x"}`,
		`{"type":"pull-wake","pattern":"__ds/x","wake_stream":"w"}`,
		`{"type":"webhook","pattern":"a","webhook":{"url":"https://h"},"lease_ttl_ms":1e3}`,
		`{"type":"webhook","pattern":"a","webhook":{"url":"https://h"},"lease_ttl_ms":999.5}`,
		`[]`, ``, `{`, `{"type":1}`, `{"type":"pull-wake","streams":[1]}`,
	} {
		f.Add([]byte(s))
	}
	m := New(Options{MaxStreams: 8})
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("PUT", "/v1/stream/__ds/subscriptions/x", strings.NewReader(string(body)))
		c, e := m.parseConfig(r)
		if e != nil {
			if e.Code == "" || e.Message == "" || e.Status < 400 {
				t.Fatalf("a refusal without a status, code or message: %+v", e)
			}
			return
		}
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil && len(strings.TrimSpace(string(body))) > 0 {
			t.Fatalf("took a body encoding/json refuses: %q", body)
		}
		switch {
		case c.Type != TypeWebhook && c.Type != TypePullWake:
			t.Fatalf("type %q", c.Type)
		case c.Pattern == "" && len(c.Streams) == 0:
			t.Fatal("neither pattern nor streams")
		case c.LeaseTTLms < minLease || c.LeaseTTLms > maxLease:
			t.Fatalf("lease %d", c.LeaseTTLms)
		case len(c.Streams) > 8:
			t.Fatalf("%d streams past the bound", len(c.Streams))
		case !sort.StringsAreSorted(c.Streams):
			t.Fatal("streams not sorted")
		case c.Type == TypeWebhook && ValidateURL(c.WebhookURL) != nil:
			t.Fatalf("an unsafe webhook URL taken: %q", c.WebhookURL)
		case c.Type == TypePullWake && c.WakeStream == "":
			t.Fatal("pull-wake without a wake stream")
		}
		for i, s := range append([]string{c.Pattern, c.WakeStream}, c.Streams...) {
			if s == "" && i < 2 {
				continue
			}
			if _, e := checkPath("p", s); e != nil {
				t.Fatalf("a path the checker refuses was taken: %q", s)
			}
		}
	})
}

// FuzzRoute: any path under __ds/ routes to one API or none, and only the
// JWK Set and the token-authenticated calls skip the hub's authentication.
func FuzzRoute(f *testing.F) {
	for _, s := range []string{"jwks.json", "subscriptions/a", "subscriptions/a/streams", "subscriptions/a/streams/x/y",
		"subscriptions/a/callback", "subscriptions/a/ack", "subscriptions/a/release", "subscriptions/a/claim", "subscriptions//ack", "other"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rest string) {
		rt, ok := parseRoute(rest)
		open := !Authenticated(rest)
		if !ok {
			if open {
				t.Fatalf("%q routes nowhere but skips authentication", rest)
			}
			return
		}
		if open != (rt.jwks || rt.action == "callback" || rt.action == "ack" || rt.action == "release") {
			t.Fatalf("%q: authentication %v for %+v", rest, !open, rt)
		}
		if !rt.jwks && (rt.id == "" || strings.Contains(rt.id, "/")) {
			t.Fatalf("%q: id %q", rest, rt.id)
		}
	})
}
