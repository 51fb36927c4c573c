package journal_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/runhub/runhub/journal"
)

func TestSecretKey(t *testing.T) {
	for _, k := range []string{"api_key", "apiKey", "X-Api-Key", "token", "access_token", "github_token",
		"password", "db_passwd", "client_secret", "Authorization", "cookie", "private_key", "credentials"} {
		if !journal.SecretKey(k) {
			t.Errorf("SecretKey(%q) = false, want true", k)
		}
	}
	for _, k := range []string{"input_tokens", "output_tokens", "max_tokens", "tokens", "message_id", "text", "key_count", "monkey"} {
		if journal.SecretKey(k) {
			t.Errorf("SecretKey(%q) = true, want false", k)
		}
	}
}

func TestRedactString(t *testing.T) {
	secrets := []string{
		"Authorization: Bearer abcdefghijklmnop1234",
		"use sk-proj-AAAAAAAAAAAAAAAAAAAAAAAAAAAA please",
		"jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyIn0.c2lnbmF0dXJlLXNpZw",
		"ghp_0123456789abcdefghijABCDEFGHIJ012345",
		"AKIAABCDEFGHIJKLMNOP",
		"password=hunter22222",
	}
	for _, s := range secrets {
		got := journal.RedactString(s)
		if !strings.Contains(got, journal.Redacted) {
			t.Errorf("RedactString(%q) = %q: nothing redacted", s, got)
		}
		for _, frag := range []string{"abcdefghijklmnop1234", "AAAAAAAAAAAAAAAAAAAA", "c2lnbmF0dXJlLXNpZw", "0123456789abcdefghij", "ABCDEFGHIJKLMNOP", "hunter22222"} {
			if strings.Contains(s, frag) && strings.Contains(got, frag) {
				t.Errorf("RedactString(%q) = %q: %q survived", s, got, frag)
			}
		}
	}
	for _, s := range []string{"w0 w1 w2 ", "the task-list is long and winding", "tokens: 42"} {
		if got := journal.RedactString(s); got != s {
			t.Errorf("RedactString(%q) = %q: changed harmless text", s, got)
		}
	}
}

func TestRedactJSON(t *testing.T) {
	in := `{"tool":"http","args":{"headers":{"Authorization":"Bearer abcdefghijklmnopqrst"},"api_key":"k-123456","nested":[{"password":"p4ssw0rd!"}]},"usage":{"input_tokens":12},"note":"key sk-abcdefghijklmnopqrstuvwx"}`
	out := string(journal.RedactJSON(json.RawMessage(in)))
	for _, secret := range []string{"abcdefghijklmnopqrst", "k-123456", "p4ssw0rd!", "sk-abcdefghijklmnopqrstuvwx"} {
		if strings.Contains(out, secret) {
			t.Errorf("secret %q survived: %s", secret, out)
		}
	}
	var v struct {
		Usage struct {
			InputTokens int `json:"input_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Usage.InputTokens != 12 {
		t.Fatalf("counts must survive: %s (%v)", out, err)
	}
	plain := json.RawMessage(`{"message_id":"m1","text":"w0 "}`)
	if got := journal.RedactJSON(plain); &got[0] != &plain[0] {
		t.Error("a payload without secret triggers was re-encoded; the fast path must return it as is")
	}
}
