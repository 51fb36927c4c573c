package journal

import (
	"bytes"
	"testing"
)

// mayHoldSecret's in-place ASCII search answers as lowering the payload
// and searching did, non-ASCII text included (the Kelvin sign K lowers
// to k, so "\u212Aey" is "key").
func TestMayHoldSecretMatchesLowering(t *testing.T) {
	lowered := func(b []byte) bool {
		lower := bytes.ToLower(b)
		for _, tr := range triggers {
			if bytes.Contains(lower, []byte(tr)) {
				return true
			}
		}
		return false
	}
	inputs := []string{
		`{"message_id":"m1","text":"w12 "}`, `{"text":"BeArEr abc"}`, `{"text":"my API_KEY is"}`, `{"text":"SK-PROJ"}`,
		`{"text":"\u212Aey"}`, `{"text":"é secret"}`, `{"text":"ÉTÉ"}`, `{"x":"github_PAT_1"}`, `{"x":"AkIa"}`,
		`{"x":"Cookie"}`, `{"x":"passW"}`, `{"x":"credentiaL"}`, `{"x":"tok"}`, `{"x":"ke"}`, ``, `k`, `KEY`,
		`{"text":"ſecret"}`, `{"input_tokens":3}`, `{"x":"eyJ"}`, `{"x":"ghs_"}`,
	}
	for _, in := range inputs {
		if got, want := mayHoldSecret([]byte(in)), lowered([]byte(in)); got != want {
			t.Errorf("mayHoldSecret(%q) = %v, lowering says %v", in, got, want)
		}
	}
}

// A token payload with nothing to redact costs no allocation (lowering it
// cost one per event).
func TestRedactJSON_PlainTokenAllocatesNothing(t *testing.T) {
	payload := []byte(`{"message_id":"m1","text":"w1234 "}`)
	if n := testing.AllocsPerRun(100, func() { RedactJSON(payload) }); n != 0 {
		t.Fatalf("RedactJSON of a plain token: %v allocations, want 0", n)
	}
}

func BenchmarkRedactJSON_Token(b *testing.B) {
	payload := []byte(`{"message_id":"m1","text":"w1234 "}`)
	b.ReportAllocs()
	for b.Loop() {
		RedactJSON(payload)
	}
}
