package subscription

import (
	"crypto/ed25519"
	"encoding/base64"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{
		{"events/*", "events/a", true},
		{"events/*", "events/a/b", false},
		{"events/*", "events", false},
		{"events/**", "events", true},
		{"events/**", "events/a/b/c", true},
		{"**/x", "a/b/x", true},
		{"**/x", "x", true},
		{"**/x", "a/y", false},
		{"a/*/c", "a/b/c", true},
		{"a/*/c", "a/b/d", false},
		{"/events/*/", "events/a", true},
		{"a/%2A", "a/*", true},
		{"a/%2A", "a/b", false},
		{"**", "anything/at/all", true},
		{"a/**/b/**/c", "a/x/b/y/z/c", true},
		{"a/**/b/**/c", "a/x/y/c", false},
	} {
		if got := Match(c.pattern, c.path); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.path, got, c.want)
		}
	}
}

func TestValidateURL(t *testing.T) {
	for _, c := range []struct {
		url string
		ok  bool
	}{
		{"https://hooks.example.com/x", true},
		{"http://localhost:9000/hook", true},
		{"http://127.0.0.1:9000/hook", true},
		{"http://127.0.0.9/hook", true},
		{"http://hooks.example.com/x", false},
		{"http://10.0.0.1/hook", false},
		{"https://10.0.0.1/hook", false},
		{"https://192.168.1.1/hook", false},
		{"https://172.16.0.1/hook", false},
		{"https://169.254.169.254/latest", false},
		{"https://[::1]/hook", false},
		{"https://[fd00::1]/hook", false},
		{"https://100.64.0.1/hook", false},
		{"https://0.0.0.0/hook", false},
		{"https://localhost/hook", false},
		{"https://user:pw@hooks.example.com/", false},
		{"ftp://hooks.example.com/", false},
		{"not a url", false},
		{"/relative", false},
		{"https://" + strings.Repeat("a", 3000) + ".com/", false},
	} {
		err := ValidateURL(c.url)
		if (err == nil) != c.ok {
			t.Errorf("ValidateURL(%.40q) = %v, want ok %v", c.url, err, c.ok)
		}
		if err != nil && err.Error() == "" {
			t.Errorf("ValidateURL(%.40q): an error without a message", c.url)
		}
	}
}

func testKeys(t *testing.T) *keyring {
	t.Helper()
	k, err := newKeyring(storedKeys{Seed: make([]byte, ed25519.SeedSize), Token: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A signature verifies as the protocol's receivers verify it: the
// header's form, the kid of the published key, Ed25519 over
// "<t>.<body>" with the key rebuilt from the JWK's x.
func TestSign_VerifiesWithThePublishedKey(t *testing.T) {
	k := testKeys(t)
	body := []byte(`{"subscription_id":"s","wake_id":"w_1"}`)
	now := time.Unix(1778324210, 0)
	h := k.sign(body, now)
	m := regexp.MustCompile(`^t=(\d+),kid=([^,]+),ed25519=([A-Za-z0-9_-]+)$`).FindStringSubmatch(h)
	if m == nil {
		t.Fatalf("Webhook-Signature %q has not the protocol's form", h)
	}
	keys := k.jwks()["keys"]
	if len(keys) != 1 || keys[0].Kid != m[2] || keys[0].Kty != "OKP" || keys[0].Crv != "Ed25519" || keys[0].Alg != "EdDSA" {
		t.Fatalf("the JWK Set %+v does not publish kid %s", keys, m[2])
	}
	if !strings.HasPrefix(m[2], "ds_") || m[1] != strconv.FormatInt(now.Unix(), 10) {
		t.Fatalf("kid %s, t %s", m[2], m[1])
	}
	pub, err := base64.RawURLEncoding.DecodeString(keys[0].X)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(m[3])
	if err != nil {
		t.Fatal(err)
	}
	if !ed25519.Verify(ed25519.PublicKey(pub), []byte(m[1]+"."+string(body)), sig) {
		t.Fatal("the signature does not verify with the published key")
	}
	if ed25519.Verify(ed25519.PublicKey(pub), []byte(m[1]+"."+string(body)+" "), sig) {
		t.Fatal("the signature verifies another body")
	}
}

func TestToken(t *testing.T) {
	k := testKeys(t)
	now := time.Now()
	tok, jti := k.mint("s1", 7, now)
	got, e := k.verify(tok, "s1", now)
	if e != nil || got.Gen != 7 || got.JTI != jti {
		t.Fatalf("verify = %+v, %v", got, e)
	}
	if _, e := k.verify(tok, "s2", now); e == nil || e.Code != CodeTokenInvalid {
		t.Fatalf("another subscription's token = %v, want TOKEN_INVALID", e)
	}
	if _, e := k.verify(tok, "s1", now.Add(2*tokenTTL)); e == nil || e.Code != CodeTokenExpired {
		t.Fatalf("an expired token = %v, want TOKEN_EXPIRED", e)
	}
	p, sig, _ := strings.Cut(tok, ".")
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"subscription:s1","gen":8,"jti":"x","exp":9999999999}`))
	for _, bad := range []string{"", "x", p, p + ".", forged + "." + sig, p + "." + sig + "x"} {
		if _, e := k.verify(bad, "s1", now); e == nil || e.Code != CodeTokenInvalid {
			t.Errorf("verify(%.30q) = %v, want TOKEN_INVALID", bad, e)
		}
	}
	other, _ := newKeyring(storedKeys{Seed: make([]byte, ed25519.SeedSize), Token: []byte(strings.Repeat("o", 32))})
	if _, e := other.verify(tok, "s1", now); e == nil {
		t.Fatal("a token verified under another key")
	}
}

func TestRetryDelay(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 7: time.Minute, 30: time.Minute} {
		for range 20 {
			d := retryDelay(n)
			if d < want*8/10 || d > want*12/10 {
				t.Fatalf("retryDelay(%d) = %v, want %v ± 20%%", n, d, want)
			}
		}
	}
}
