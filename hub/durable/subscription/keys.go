package subscription

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/runhub/runhub/journal"
)

// keysDoc names the document holding the signing keys every replica
// shares: the Ed25519 key webhooks are signed with (its public half is
// published at __ds/jwks.json) and the HMAC key of callback and claim
// tokens. It is created once, by whichever replica needs it first.
const keysDoc = "__ds/keys"

type storedKeys struct {
	Seed  []byte `json:"ed25519_seed"`
	Token []byte `json:"token_key"`
}

// keyring is the loaded keys.
type keyring struct {
	priv  ed25519.PrivateKey
	pub   ed25519.PublicKey
	kid   string
	x     string
	token []byte
}

func newKeyring(sk storedKeys) (*keyring, error) {
	if len(sk.Seed) != ed25519.SeedSize || len(sk.Token) < 32 {
		return nil, errors.New("subscription: the stored signing keys are malformed")
	}
	priv := ed25519.NewKeyFromSeed(sk.Seed)
	pub := priv.Public().(ed25519.PublicKey)
	x := base64.RawURLEncoding.EncodeToString(pub)
	// The kid is the key's JWK thumbprint (RFC 7638: the required
	// members in lexical order, no spaces).
	sum := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + x + `"}`))
	return &keyring{priv: priv, pub: pub, x: x, kid: "ds_" + base64.RawURLEncoding.EncodeToString(sum[:]), token: sk.Token}, nil
}

// loadKeys reads the shared keys, creating them when there are none.
func loadKeys(ctx context.Context, docs journal.Docs) (*keyring, error) {
	for range 8 {
		raw, _, err := docs.LoadDoc(ctx, keysDoc)
		if err == nil {
			var sk storedKeys
			if err := json.Unmarshal(raw, &sk); err != nil {
				return nil, fmt.Errorf("subscription: the stored signing keys: %w", err)
			}
			return newKeyring(sk)
		}
		if !errors.Is(err, journal.ErrNotFound) {
			return nil, err
		}
		sk := storedKeys{Seed: make([]byte, ed25519.SeedSize), Token: make([]byte, 32)}
		_, _ = rand.Read(sk.Seed)
		_, _ = rand.Read(sk.Token)
		raw, _ = json.Marshal(sk)
		if _, err := docs.PutDoc(ctx, keysDoc, 0, raw); err != nil && !errors.Is(err, journal.ErrConflict) {
			return nil, err
		}
	}
	return nil, errors.New("subscription: the signing keys could not be loaded")
}

// jwk is a public key as the JWK Set publishes it.
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	X   string `json:"x"`
}

func (k *keyring) jwks() map[string][]jwk {
	return map[string][]jwk{"keys": {{Kty: "OKP", Crv: "Ed25519", Kid: k.kid, Use: "sig", Alg: "EdDSA", X: k.x}}}
}

// sign is the Webhook-Signature of body sent at now:
// t=<unix seconds>,kid=<kid>,ed25519=<unpadded base64url of the Ed25519
// signature of "<t>.<body>">.
func (k *keyring) sign(body []byte, now time.Time) string {
	t := strconv.FormatInt(now.Unix(), 10)
	msg := make([]byte, 0, len(t)+1+len(body))
	msg = append(append(append(msg, t...), '.'), body...)
	sig := ed25519.Sign(k.priv, msg)
	return "t=" + t + ",kid=" + k.kid + ",ed25519=" + base64.RawURLEncoding.EncodeToString(sig)
}

// token is a callback or claim token's claims: the subscription, the
// generation and the wake it is for, an id naming this very token, and
// its expiry (unix seconds).
type token struct {
	Sub string `json:"sub"`
	Gen uint64 `json:"gen"`
	JTI string `json:"jti"`
	Exp int64  `json:"exp"`
}

// tokenTTL is how long a token is accepted at most (the lease fences it
// much sooner).
const tokenTTL = time.Hour

func (k *keyring) mint(subID string, gen uint64, now time.Time) (string, string) {
	jti := randomID("", 12)
	raw, _ := json.Marshal(token{Sub: "subscription:" + subID, Gen: gen, JTI: jti, Exp: now.Add(tokenTTL).Unix()})
	p := base64.RawURLEncoding.EncodeToString(raw)
	return p + "." + k.mac(p), jti
}

func (k *keyring) mac(p string) string {
	m := hmac.New(sha256.New, k.token)
	m.Write([]byte(p))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// verify checks a token's signature, subject and expiry: the error is the
// protocol's code (TOKEN_INVALID, TOKEN_EXPIRED).
func (k *keyring) verify(tok, subID string, now time.Time) (token, *Error) {
	var t token
	p, sig, ok := strings.Cut(tok, ".")
	if !ok || subtle.ConstantTimeCompare([]byte(sig), []byte(k.mac(p))) != 1 {
		return t, errf(401, CodeTokenInvalid, "Token invalid")
	}
	raw, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil || json.Unmarshal(raw, &t) != nil || t.Sub != "subscription:"+subID {
		return t, errf(401, CodeTokenInvalid, "Token invalid")
	}
	if now.Unix() > t.Exp {
		return t, errf(401, CodeTokenExpired, "Token expired")
	}
	return t, nil
}

func randomID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + fmt.Sprintf("%x", b)
}
