package journal

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Redacted replaces every secret the journal refuses to persist.
const Redacted = "[REDACTED]"

// The credential keywords, the one list of the words that introduce a
// secret in text: schemes followed by whitespace and a token ("Bearer x")
// and keys followed by ':' or '=' and a value ("api_key=x"). Regular
// expression alternations, matched case-insensitively.
const (
	credentialSchemes = `bearer|basic|token`
	credentialKeys    = `api[_-]?key|access[_-]?token|auth[_-]?token|secret|password|passwd`
	// CredentialKeywords is every credential keyword as one alternation
	// (for adapter's held-back stream text, which must hold back the word
	// after any of them).
	CredentialKeywords = credentialSchemes + "|" + credentialKeys
)

// credentialHints are lowercase substrings of which every match of
// CredentialKeywords holds one.
var credentialHints = []string{"bearer", "basic", "token", "api", "secret", "passw"}

// MayHoldCredentialKeyword reports whether s may hold a match of
// CredentialKeywords: false only when s has none of the keywords' ASCII
// hints in any case, so text without one needs no regular expression. Text
// that is not ASCII always reports true (a regular expression's case
// folding is Unicode's).
func MayHoldCredentialKeyword(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return true
		}
	}
	for _, w := range credentialHints {
		if ContainsFoldASCII(s, w) {
			return true
		}
	}
	return false
}

var (
	// secret-looking substrings of any string value
	reBearer = regexp.MustCompile(`(?i)\b(` + credentialSchemes + `)\s+[A-Za-z0-9._~+/=-]{8,}`)
	reAPIKey = regexp.MustCompile(`\b(sk|rk|pk)-(?:[a-z]+-)?[A-Za-z0-9_-]{16,}`)
	reJWT    = regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*`)
	reGitHub = regexp.MustCompile(`\b(ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}`)
	reAWS    = regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`)
	reKV     = regexp.MustCompile(`(?i)\b(` + credentialKeys + `)(["']?\s*[:=]\s*["']?)[^\s"'&,;]{4,}`)
)

// triggers are the lowercase substrings whose absence proves a payload has
// nothing to redact (the fast path for token-rate appends).
var triggers = []string{"bearer", "basic", "token", "sk-", "rk-", "pk-", "eyj", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat", "akia",
	"key", "secret", "passw", "authorization", "cookie", "credential"}

// RedactJSON returns payload with secrets replaced by Redacted: values of
// fields named like credentials (api_key, token, password, secret,
// authorization, cookie, …) and secret-looking substrings of any string
// (bearer tokens, sk-… API keys, JWTs, GitHub and AWS keys, key=value
// pairs). Payloads that cannot hold a secret are returned unchanged without
// being parsed.
func RedactJSON(payload json.RawMessage) json.RawMessage {
	if !mayHoldSecret(payload) {
		return payload
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return payload // invalid JSON never reaches here (Prepare validates first)
	}
	v, changed := redactValue(v)
	if !changed {
		return payload
	}
	out, err := json.Marshal(v)
	if err != nil {
		return payload
	}
	return out
}

// RedactSession redacts the free text of a session record before a backend
// stores it: the title, the goal's text and reason, and every queued
// message. A message that waits in the journal (queued, or a goal's text)
// therefore reaches its run redacted, as a run request handed to a runner
// does.
func RedactSession(m *SessionMeta) {
	m.Title = RedactString(m.Title)
	if m.Goal != nil {
		m.Goal.Text, m.Goal.Reason = RedactString(m.Goal.Text), RedactString(m.Goal.Reason)
	}
	for i := range m.Queue {
		m.Queue[i].Message = RedactString(m.Queue[i].Message)
	}
}

// RedactString replaces secret-looking substrings of s.
func RedactString(s string) string {
	if !mayHoldSecret([]byte(s)) {
		return s
	}
	s = reBearer.ReplaceAllString(s, "${1} "+Redacted)
	s = reAPIKey.ReplaceAllString(s, Redacted)
	s = reJWT.ReplaceAllString(s, Redacted)
	s = reGitHub.ReplaceAllString(s, Redacted)
	s = reAWS.ReplaceAllString(s, Redacted)
	s = reKV.ReplaceAllString(s, "${1}${2}"+Redacted)
	return s
}

// triggersByFirst lists triggers by their first byte, for mayHoldSecret's
// single pass.
var triggersByFirst = func() (t [256][]string) {
	for _, tr := range triggers {
		t[tr[0]] = append(t[tr[0]], tr)
	}
	return t
}()

// mayHoldSecret reports whether b contains one of triggers in any case.
// ASCII text (nearly every token) is searched in one pass, in place,
// without the lowered copy bytes.ToLower makes; other text is lowered by
// bytes.ToLower, as the patterns' case folding is Unicode's (the Kelvin
// sign lowers to k).
func mayHoldSecret(b []byte) bool {
	for i, c := range b {
		if c >= utf8.RuneSelf {
			return mayHoldSecretLowered(bytes.ToLower(b))
		}
		for _, t := range triggersByFirst[lowerASCII(c)] {
			if hasPrefixFoldASCII(b[i:], t) {
				return true
			}
		}
	}
	return false
}

func mayHoldSecretLowered(lower []byte) bool {
	for _, t := range triggers {
		if bytes.Contains(lower, []byte(t)) {
			return true
		}
	}
	return false
}

// hasPrefixFoldASCII reports whether b starts with t, ignoring ASCII case;
// t is lowercase ASCII.
func hasPrefixFoldASCII(b []byte, t string) bool {
	if len(b) < len(t) {
		return false
	}
	for j := 0; j < len(t); j++ {
		if lowerASCII(b[j]) != t[j] {
			return false
		}
	}
	return true
}

// ContainsFoldASCII reports whether s contains sub, ignoring ASCII case;
// sub must be lowercase ASCII.
func ContainsFoldASCII(s, sub string) bool {
	n := len(sub)
	if n == 0 {
		return true
	}
	first := sub[0]
	for i := 0; i+n <= len(s); i++ {
		if lowerASCII(s[i]) != first {
			continue
		}
		j := 1
		for j < n && lowerASCII(s[i+j]) == sub[j] {
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func redactValue(v any) (any, bool) {
	switch t := v.(type) {
	case string:
		r := RedactString(t)
		return r, r != t
	case map[string]any:
		changed := false
		for k, x := range t {
			if SecretKey(k) {
				if s, ok := x.(string); ok && s == Redacted {
					continue
				}
				if x != nil {
					t[k] = Redacted
					changed = true
				}
				continue
			}
			if nx, c := redactValue(x); c {
				t[k] = nx
				changed = true
			}
		}
		return t, changed
	case []any:
		changed := false
		for i, x := range t {
			if nx, c := redactValue(x); c {
				t[i] = nx
				changed = true
			}
		}
		return t, changed
	}
	return v, false
}

// SecretKey reports whether a field name denotes a credential: api_key,
// apiKey, x-api-key, token, access_token, github_token, password, secret,
// client_secret, authorization, cookie, private_key, credentials. Counts
// such as input_tokens or max_tokens are not secrets.
func SecretKey(k string) bool {
	n := strings.ToLower(k)
	n = strings.NewReplacer("_", "", "-", "", ".", "", " ", "").Replace(n)
	switch n {
	case "authorization", "proxyauthorization", "cookie", "setcookie", "credentials", "credential", "privatekey", "auth":
		return true
	}
	for _, suf := range []string{"apikey", "token", "password", "passwd", "secret", "privatekey", "accesskey", "sessionkey"} {
		if strings.HasSuffix(n, suf) {
			return true
		}
	}
	return false
}
